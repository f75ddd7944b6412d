// Several ranks on one GPU (RCCL's multi-rank-per-device mode), opt-in
// through ncclCommInitRankMulti or UNICCL_RANKS_PER_GPU.
//
// Ranks that share a GPU spin on each other inside their kernels, so every
// rank's blocks must be resident at the same time. Three rules make that
// hold by construction, each decided from the allgathered peer info so that
// every rank of the communicator reaches the same verdict:
//   - channels: each rank runs at most floor(resident / k) blocks, where k
//     ranks share a GPU that holds `resident` collective blocks at once (the
//     kernels' occupancy); a communicator that cannot fit one channel per
//     rank, or whose NCCL_MIN_NCHANNELS asks for more, is refused;
//   - processes: kernels of different processes run concurrently only
//     through MPS, so ranks of several processes on one GPU are refused
//     unless every one of them sees an MPS server;
//   - work queues: the ranks of one process on one GPU each need a queue of
//     their own (a kernel queued behind another rank's waiting kernel never
//     starts), so they may not outnumber CUDA_DEVICE_MAX_CONNECTIONS /
//     GPU_MAX_HW_QUEUES; such communicators also use one stream per rank
//     (no copy-engine side stream, no side-stream self copies) and launch
//     without early PDL release (a next kernel's parked blocks would count
//     twice against the resident blocks).
#pragma once

#include <cstddef>
#include <vector>

#include "common/core/peer_info.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

class GroupPlan;

// Fills this rank's sharing fields: the resident blocks of the kernels it
// may launch (blockThreads each) on the current device, the ranks it accepts on its GPU
// (UNICCL_RANKS_PER_GPU; any number with a virtual id), the work queues of
// the process and whether MPS lets other processes' kernels run alongside.
[[nodiscard]] ncclResult_t fillSharingInfo(const std::vector<const void*>& kernels, unsigned blockThreads, int virtualId,
                             PeerInfo* info);

// What the peers' info says about GPU sharing in this communicator.
struct GpuSharing {
  bool shared = false;   // some GPU holds several ranks
  int maxChannels = 0;   // channels every rank's blocks fit with (>= 1 when valid)
};

// Checks the peers' info (the same on every rank) and returns the verdict:
// ncclInvalidUsage with a message when two ranks share a GPU without opting
// in, when virtual ids repeat on a GPU, when ranks of several processes
// share a GPU without MPS, when one process's ranks on a GPU outnumber its
// work queues, or when not even one channel per rank fits.
[[nodiscard]] ncclResult_t checkGpuSharing(const std::vector<PeerInfo>& peers, int myRank, GpuSharing* out);

// The streams of a group's tasks on communicators that share a GPU: each
// rank of a GPU needs a stream of its own, or its kernel queues behind
// another rank's kernel that waits for it. ncclInvalidUsage with a message
// when two communicators of the group launch on the same stream of one GPU,
// or one of them on the legacy default stream (which waits for every other
// stream of the device). Communicators that share no GPU are not looked at.
// Not seen: ranks driven by different threads, each in its own group, that
// pass the same stream (documented in docs/gpu-sharing.md).
[[nodiscard]] ncclResult_t checkSharedGpuStreams(const GroupPlan& group);

}  // namespace uniccl
