// ReduceScatter in ceil(log2 n) rounds instead of the ring's n-1 steps:
// the PAT AllGather's rounds (core/allgather_pat.h) played backwards, each
// message reduced into what its receiver holds.
//
// Rank r keeps a partial sum per relative offset j: block (r+j) mod n of
// the result. Before the rounds it holds offsets 0..n-1 (its own input).
// Rounds go from the largest distance d (the largest power of two below
// n) down to 1; in each, with c = min(d, n-d), rank r sends its partial
// sums of offsets d..d+c-1 to rank r+d and receives from rank r-d those of
// offsets 0..c-1 (the same blocks: r-d's offset d+k is r's offset k),
// reducing them into its own. After the round of distance d it holds
// offsets 0..d-1; after d = 1 only offset 0, its block, reduced over every
// rank. Each block's AllGather tree reversed is its reduction tree, so
// every rank's input enters every block exactly once; each rank sends n-1
// blocks in all, as on the ring.
//
// Where the partial sums live: offset 0 in the receive buffer (the rank's
// result; in place, its input block, which the first reduction into it
// reads where it writes); offsets 1..P-1 in scratch (core/pat_scratch.h),
// P the largest c of any round, about n/2 (no scratch on 2 and 3 ranks).
// An offset no round has reduced into yet is read from the send buffer,
// which is never written. A message whose blocks straddle one of these
// boundaries, at either end, or the buffers' last block, goes as several,
// cut at the same places at both ends, so the messages on each connection
// match in size and order.
//
// Each round is a set of p2p work items whose receive halves reduce
// (dev_types.h, p2pReduceRecvProto: Simple, the op in the item), and a
// kernel launch of its own, on the datatype's Simple collective kernel
// (device/p2p_reduce.h): a round sends what the previous one reduced only
// once that launch ended (stream order; in a graph, kernel node order).
//
// Which ReduceScatters run so: tuning's collUsesPat (core/tuning.h). Only
// sum, prod, max and min: the ops with a scalar (ncclAvg, PreMulSum) would
// need it applied to each input exactly once, on sends that are plain
// messages, so they stay on the ring.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/core/launch_plan.h"
#include "common/core/tasks.h"
#include "device/dev_types.h"
#include "uniccl.h"

namespace uniccl {

// Whether PAT rounds can run a ReduceScatter with this op (a dev::RedOp
// after lowering): sum, prod, max, min.
constexpr bool patReducesWith(uint8_t op) {
  return op == dev::kOpSum || op == dev::kOpProd || op == dev::kOpMax || op == dev::kOpMin;
}

// The first round's distance: the largest power of two below n (n >= 2).
constexpr int patFirstDistance(int n) {
  int d = 1;
  while (2 * d < n) d *= 2;
  return d;
}

// Bytes of scratch a PAT ReduceScatter of nRanks ranks and blockBytes per
// rank keeps its partial sums in (0 below 4 ranks): offsets 1..P-1, P the
// largest count of any round. Inline: the tuning asks it without the
// planner.
constexpr size_t patReduceScatterScratchBytes(int nRanks, size_t blockBytes) {
  if (nRanks < 2) return 0;
  int p = 0;
  for (int d = patFirstDistance(nRanks); d >= 1; d /= 2) p = std::max(p, std::min(d, nRanks - d));
  return (size_t)(p - 1) * blockBytes;
}
static_assert(patReduceScatterScratchBytes(3, 1) == 0 && patReduceScatterScratchBytes(8, 1) == 3 &&
                  patReduceScatterScratchBytes(17, 1) == 7,
              "at most ceil(n/2)-1 blocks");

// Appends the work items of rank `rank` of nRanks for the ReduceScatter `t`
// (count > 0, an op patReducesWith) to *out, and to *launchStarts each
// round's first item with the datatype whose kernel runs it. empty: the
// communicator's empty p2p item (the planner's emptyP2pWork: channels and
// slice size), which every item starts from. scratch: at least
// patReduceScatterScratchBytes of device memory no other work of the
// launches touches. ncclInternalError when an op or address cannot be
// carried in a work item (48-bit addresses: every user-space address of
// the targets).
[[nodiscard]] ncclResult_t patReduceScatterWorks(int rank, int nRanks, const dev::Work& empty, const Task& t,
                                                 void* scratch, std::vector<dev::Work>* out,
                                                 std::vector<LaunchStart>* launchStarts);

}  // namespace uniccl
