// AllGather in ceil(log2 n) rounds instead of the ring's n-1 steps: the
// latency of an AllGather across many hosts of one GPU each (NCCL's PAT
// serves that case; this is Bruck's algorithm, which needs no power of two).
//
// Before round k (distance d = 2^k) a rank r holds the d blocks r, r+1, ...,
// r+d-1 (mod n) of its receive buffer. In round k it sends the first
// min(d, n-d) of them to rank r-d and receives as many, blocks r+d, ..., from
// rank r+d, straight into their final places. A range that wraps past block
// n-1 goes as two messages, so no temporary buffer and no final rotation.
// Round 0 sends the rank's own block from the send buffer while the copy
// into its receive buffer (out of place) runs beside it.
//
// Each round is a set of p2p work items over the existing connections, and
// a kernel launch of its own on the group's stream: round k+1 sends what
// round k received only once that launch ended (stream order; in a graph,
// one kernel node after the other). Every rank lays out the same rounds,
// so the messages of each connection match in order.
//
// Which AllGathers run so: tuning's collUsesPat (core/tuning.h). The
// ReduceScatter runs these rounds backwards (core/reducescatter_pat.h).
#pragma once

#include <cstdint>
#include <vector>

#include "common/core/launch_plan.h"
#include "common/core/tasks.h"
#include "device/dev_types.h"

struct ncclComm;

namespace uniccl {

// Appends the work items of the AllGather `t` to *out, and to *launchStarts
// the index in *out of each round's first item (a new kernel launch begins
// there; any kernel runs these datatype-free items).
void patAllGatherWorks(ncclComm* comm, const Task& t, std::vector<dev::Work>* out,
                       std::vector<LaunchStart>* launchStarts);

// Calls fn(peer) for every rank the PAT rounds of rank `rank` of nRanks send
// to or receive from: those at distances 2^k both ways, the same for
// AllGather and ReduceScatter (core/reducescatter_pat.h). A rank may come
// twice (both ways at the same distance); nothing is allocated, as the
// planner asks at every group end that has a PAT collective.
template <typename Fn>
void forEachPatPeer(int rank, int nRanks, Fn&& fn) {
  for (int d = 1; d < nRanks; d *= 2) {
    fn((rank - d + nRanks) % nRanks);
    fn((rank + d) % nRanks);
  }
}

}  // namespace uniccl
