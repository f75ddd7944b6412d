// Direct receives (docs/architecture.md; dev_types.h, p2pExchanges): a message
// of at least UNICCL_P2P_DIRECT_MIN_BYTES received over a P2P connection
// into a buffer this rank registered with ncclCommRegister is stored there
// by the sender's kernel itself, with no staging slot. The receiver offers
// the address at which the SENDER's process sees the buffer: the same
// address for a peer of this process (its GPU reaches ours through peer
// access, or through ncclMemAlloc's access grants), else a mapping the
// peer's import service made (core/import_service.h), asked for once per
// (peer, allocation) and kept until ncclCommDeregister.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/core/registry.h"

struct ncclComm;

namespace uniccl {

// Where `peer` may store a message this rank receives into [buff, buff +
// bytes): an address in the peer's process, or 0 (not registered, not over
// P2P, memory the peer cannot map: the message goes through the slots).
uintptr_t directRecvTarget(ncclComm* comm, int peer, void* buff, size_t bytes);

// ncclCommDeregister: the peers that mapped the buffer's allocations unmap
// them (best effort: a peer that is gone costs the 2-second connect wait of
// core/import_service.cc, then an INFO line).
void releaseDirectViews(ncclComm* comm, const std::vector<PeerView>& views);

}  // namespace uniccl
