// The bootstrap root: a background thread of the process that made the id. It
// collects one hello per rank, then tells each rank the listen address of its
// ring successor, and exits. It never waits longer than UNICCL_BOOTSTRAP_TIMEOUT
// seconds once the first rank has arrived, and hostile or broken connections
// are dropped without disturbing the real ranks.
//
// Root threads live in a process-wide registry: finished ones are joined by the
// next ncclGetUniqueId, all are stopped and joined at process exit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/util/auth.h"
#include "common/util/socket_address.h"
#include "uniccl.h"

namespace uniccl {

// Listens on `bindAddr` (port 0 = ephemeral) and serves one rendezvous of
// the ranks that prove `secret`. *bound receives the address ranks connect to.
[[nodiscard]] ncclResult_t startRoot(const SocketAddress& bindAddr, const AuthSecret& secret, SocketAddress* bound);

// For ids from NCCL_COMM_ID: starts the root on `addr` unless this process
// already serves it there. If the port is taken by another process (or the
// address is not local) that process is assumed to be the root: success.
[[nodiscard]] ncclResult_t startRootIfAbsent(const SocketAddress& addr, const AuthSecret& secret);

// Joins root threads that have finished.
void reapFinishedRoots();

// Root threads not yet joined (for tests that check for leaks).
size_t rootThreadCount();

// Waits (at most timeoutMs) until every root thread has finished, then joins
// them. True when none is left.
bool waitForRoots(int64_t timeoutMs);

}  // namespace uniccl
