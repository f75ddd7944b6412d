// What ranks tell each other when they register a window, and how each rank
// gets a handle to every LSA peer's physical allocation: a peer in the same
// process shares its handle as it is; a peer in another process of the host
// sends a file descriptor over a Unix-domain socket (util/fd_passing.h) whose
// name comes from the communicator's secret, after proving the secret
// (util/fd_auth.h).
#pragma once

#include <cstdint>
#include <vector>

#include "common/gpu.h"
#include "common/symmetric/window_comm.h"

namespace uniccl {

struct WindowAnnounce {
  int32_t status;       // ncclResult_t of the rank's local checks
  int32_t fdExport;     // its handles export as file descriptors
  int32_t flags;        // NCCL_WIN_* it registers with (must be every rank's)
  int32_t pad;
  uint64_t handle;      // valid in the rank's own process
  uint64_t allocBytes;  // the physical allocation holding its buffer
  uint64_t offset;      // the buffer's offset in it
  uint64_t granularity;
};

// Allgathers every rank's announcement (all[r] for rank r).
[[nodiscard]] ncclResult_t announce(const WindowComm& comm, const WindowAnnounce* mine,
                                    std::vector<WindowAnnounce>* all);

// handles[p] for rank p of the LSA team comm.lsa (this rank's own
// included); imported[p] when this call made a new reference the caller
// must release. seq: the comm's registration count (names the sockets of
// this registration).
// Called by every rank once all announced success (window.cc): ranks send
// and receive descriptors among LSA peers of other processes, each wait
// bounded by the bootstrap timeout (a peer that failed here is waited for
// that long, then the registration fails everywhere).
[[nodiscard]] ncclResult_t peerHandles(const WindowComm& comm, const std::vector<WindowAnnounce>& all, uint64_t seq,
                                       std::vector<gpu::MemHandle>* handles, std::vector<bool>* imported);

}  // namespace uniccl
