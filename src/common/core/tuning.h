// Choices the planner makes per collective: algorithm, protocol, channels,
// slice size. Defaults follow measurements on NVLink-connected GPUs (the
// tree's size/rank rule is provisional: not yet measured); across hosts the
// topology's cost model (topo/cost.h) says up to which size AllReduce takes
// the tree. NCCL_ALGO,
// NCCL_PROTO, NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS override them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/core/tasks.h"
#include "common/topo/cost.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

class GroupPlan;

// What the tuning derives once per communicator and then only reads
// (ncclComm::tuningCache): each -1 until first computed. Relaxed atomics
// suffice: every computation gives the same value, so a reader that still
// finds -1 computes it again.
struct TuningCache {
  // Whether a tree edge crosses the network: known once the transports are
  // wired, asked per tree collective.
  std::atomic<int8_t> treeUsesNet{-1};
  // Across hosts, the largest AllReduce on the tree (from the topology's
  // cost model).
  std::atomic<int64_t> treeMaxBytes{-1};
  // One rank per host: the largest AllGather or ReduceScatter run as PAT
  // rounds by default (from the cost model).
  std::atomic<int64_t> patMaxBytes{-1};
};

struct CollTuning {
  uint8_t algo;         // dev::Algo (kAlgoTree: AllReduce only)
  uint8_t proto;        // dev::Proto
  int nChannels;        // blocks that share the data
  uint32_t sliceBytes;  // bytes per pipeline step
  bool exchange = false;  // AllReduce ring on 2 ranks with LL: one exchange step (UNICCL_ALLREDUCE_EXCHANGE)
};

// Reads NCCL_PROTO / NCCL_ALGO / UNICCL_TREE_* once per process and warns
// about values this build does not implement.
void loadTuningEnv();

// The cost model's figures per link class (topo/cost.h): the defaults with
// UNICCL_LINK_COSTS applied, read once per process (bad text warns and
// keeps the defaults).
const topo::LinkCosts& linkCosts();

// Which algorithms an NCCL_ALGO value allows (NCCL's syntax: a comma list,
// case-insensitive, a leading '^' excludes). Names NCCL knows but uniccl does
// not implement are ignored (INFO); unknown names, per-collective lists and
// values that leave no implemented algorithm warn and allow all.
struct AlgoMask {
  bool ring = true;
  bool tree = true;
  bool pat = true;   // AllGather and ReduceScatter by log-depth rounds (core/allgather_pat.h, core/reducescatter_pat.h)
};
AlgoMask parseAlgoList(const char* value);

// Which protocols an NCCL_PROTO value allows (NCCL's syntax: a comma list,
// names whole and ignoring case, a leading '^' excludes). A value that
// leaves none warns and allows all three. LL128 runs only where the
// communicator has LL128 slots (Transports::ll128()); NCCL_PROTO=LL128
// alone forces it there, and falls back to LL and Simple elsewhere.
struct ProtoMask {
  bool ll = true;
  bool simple = true;
  bool ll128 = true;
};
ProtoMask parseProtoList(const char* value);
// The protocol of a collective of `bytes` that does not touch the network
// (tuneCollective asks this with the process's knobs): LL up to
// llThreshold (llThresholdUnderLL128 where LL128 runs), LL128 above it up
// to ll128PerRankBytes x nRanks on
// communicators of ll128MinRanks+ ranks that have LL128 slots
// (Transports::ll128()), Simple above. A protocol the mask excludes gives
// way to the next toward the preferred one's side: LL -> LL128 -> Simple
// for small messages, Simple -> LL128 -> LL for large ones (so LL128
// alone forces LL128); a mask that leaves nothing this communicator can
// run (LL128 alone without LL128 slots) falls back to LL and Simple (INFO
// once per process).
struct ProtoChoice {
  ProtoMask mask;
  size_t llThreshold = 0;
  // Where LL128 runs (allowed, LL128 slots, ll128MinRanks+ ranks), LL stops
  // here instead: LL128 is faster from 1 MiB on 2 and 4 H200s.
  size_t llThresholdUnderLL128 = 0;
  size_t ll128PerRankBytes = 0;
  int ll128MinRanks = 2;
};
uint8_t chooseCollProto(const ncclComm* comm, const ProtoChoice& pc, size_t bytes);
// "LL", "LL128", "Simple" (NCCL's names; the profiler's and the logs').
const char* protoName(uint8_t proto);

// Whether AllReduce on nRanks ranks may ever pick the tree under this
// process's settings. Ranks must share the settings.
bool treeAlgoPossible(int nRanks);
// Whether an AllReduce of `bytes` (planner.h's tuningBytes) runs on the
// tree: its connections to the tree parents and children are made when the
// first such collective is planned (each connection costs buffer memory on
// every channel). The same answer on every rank.
bool allReduceUsesTree(const ncclComm* comm, size_t bytes);

// Tuning decisions made in this process per (collective, algorithm) since
// countTuningDecisions() (tests: which algorithm ran; ncclGroupSimulateEnd's
// estimates count too). Off by default: nothing is counted.
void countTuningDecisions();
uint64_t tuningDecisions(TaskKind kind, int algo);
// AllGathers and ReduceScatters the planner ran as PAT rounds (counted as
// tuningDecisions are).
uint64_t patDecisions(TaskKind kind);
void countPatDecision(TaskKind kind);

// Whether the collective `t` runs as PAT rounds: an AllGather
// (core/allgather_pat.h), or a ReduceScatter (core/reducescatter_pat.h)
// with sum, prod, max or min whose partial sums fit
// UNICCL_PAT_SCRATCH_MAX_BYTES of scratch. NCCL_ALGO allows PAT and,
// unless it allows PAT without Ring (forced, any communicator of 2+
// ranks), the communicator has one rank per host on more than 2 hosts and
// the cost model (topo/cost.h) puts PAT below the ring at this size. The
// same answer on every rank.
bool collUsesPat(const ncclComm* comm, const Task& t);
// The same per protocol (dev::Proto) of the collectives (not p2p messages).
uint64_t tuningProtoDecisions(int proto);
// Number of channels a communicator wires at init: the transport's default
// or NCCL_MIN/MAX_NCHANNELS and the config's CTA bounds, at most
// comm->channelFit (every rank's blocks resident together, gpu_sharing.h).
// ncclInvalidUsage when the minimum asked for does not fit.
[[nodiscard]] ncclResult_t chooseChannelCount(const ncclComm* comm, int* nChannels);
CollTuning tuneCollective(const ncclComm* comm, TaskKind kind, size_t bytes);
uint32_t p2pSliceBytes(const ncclComm* comm);
// AllReduce, AllGather and ReduceScatter through symmetric windows
// (docs/device_api.md, "Symmetric collectives"): when UNICCL_SYMMETRIC
// allows it, the whole communicator is one LSA team of 2+ ranks with the
// collective barrier, an AllReduce's or ReduceScatter's op has no scalar
// (sum, prod, max, min), the message
// (tuningBytes) is at most UNICCL_SYMMETRIC_MAX_BYTES and both buffers lie
// in NCCL_WIN_COLL_SYMMETRIC windows of this rank, fills *w as a
// kAlgoSymmetric item and returns true (counted as that algorithm). The
// user's contract, as NCCL's: the buffers lie at the same offsets of the
// same windows on every rank.
bool tuneSymmetric(const ncclComm* comm, const Task& t, dev::Work* w);
// Protocol of one point-to-point message of `bytes` with `peer`: LL up to
// NCCL_P2P_LL_THRESHOLD bytes (latency), Simple above it and always over
// the network; LL128 only when NCCL_PROTO allows nothing else and the
// communicator has LL128 slots. Both ends compute the same answer.
uint8_t p2pProto(const ncclComm* comm, int peer, size_t bytes);

// ---- Side streams (tuning_side_streams.cc; docs/architecture.md, "Side
// streams and copy engines"): which tasks of a group leave its kernels.

// The knobs of the side-stream paths.
struct SideStreamKnobs {
  bool copyEngine = true;            // UNICCL_COPY_ENGINE: send/recv pairs, 2-rank Broadcast and AllReduce
  size_t copyEngineMinBytes = 0;     // UNICCL_COPY_ENGINE_MIN_BYTES: send/recv pairs, 2-rank Broadcast
  size_t allReduceMinBytes = 0;      // UNICCL_COPY_ENGINE_ALLREDUCE_MIN_BYTES
  unsigned selfCopyBlocks = 0;       // UNICCL_SELF_COPY_BLOCKS (0: messages to itself stay on the kernels)
  size_t selfCopyMinBytes = 0;       // UNICCL_SELF_COPY_MIN_BYTES (eager)
  size_t selfCopyGraphMinBytes = 0;  // UNICCL_SELF_COPY_GRAPH_MIN_BYTES (in graph capture)
};
// Reads the knobs now (tests); sideStreamKnobs(): read once per process.
SideStreamKnobs readSideStreamKnobs();
const SideStreamKnobs& sideStreamKnobs();

// Decides, for the communicators of a group this thread ends, which tasks
// leave the group's kernels, and records it in each one's plan (CommPlan::side,
// core/launch_plan.h) through the mechanisms' plan functions:
//   - a send/recv pair with both ends in the group: one copy-engine copy
//     (core/ce_sendrecv.h);
//   - a 2-rank Broadcast with both ranks in the group: copy-engine copies
//     (core/ce_broadcast.h);
//   - a 2-rank AllReduce with both ranks in the group: ReduceScatter on the
//     kernels, the halves by copy engine after them (core/allreduce_ce_split.h);
//   - a large message to itself when the kernels have other work: a kernel
//     of its own on the side stream (core/self_copy_kernel.h).
// Reads the counts of tasks posted before the group (call it before
// countPostedTasks). SidePlan::ceMatched marks the plans whose tasks were
// matched across the group for copy engines, when some copy was chosen (a
// failed copy takes them all off the path). Queues nothing; fails only
// when it cannot learn a stream's capture state.
[[nodiscard]] ncclResult_t planSideStreams(GroupPlan& group, const SideStreamKnobs& knobs);

}  // namespace uniccl
