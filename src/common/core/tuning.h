// Choices the planner makes per collective: algorithm, protocol, channels,
// slice size. Defaults follow measurements on NVLink-connected GPUs (the
// tree's size/rank rule is provisional: not yet measured); NCCL_ALGO,
// NCCL_PROTO, NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS override them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/core/tasks.h"

struct ncclComm;

namespace uniccl {

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

// Which algorithms an NCCL_ALGO value allows (NCCL's syntax: a comma list,
// case-insensitive, a leading '^' excludes). Names NCCL knows but uniccl does
// not implement are ignored (INFO); unknown names, per-collective lists and
// values that leave no implemented algorithm warn and allow both.
struct AlgoMask {
  bool ring = true;
  bool tree = true;
};
AlgoMask parseAlgoList(const char* value);

// Whether AllReduce on nRanks ranks may ever pick the tree under this
// process's settings: init connects tree peers only then (each connection
// costs buffer memory on every channel). Ranks must share the settings.
bool treeAlgoPossible(int nRanks);

// Tuning decisions made in this process per (collective, algorithm) since
// countTuningDecisions() (tests: which algorithm ran; ncclGroupSimulateEnd's
// estimates count too). Off by default: nothing is counted.
void countTuningDecisions();
uint64_t tuningDecisions(TaskKind kind, int algo);
// Number of channels a communicator wires at init: the transport's default
// or NCCL_MIN/MAX_NCHANNELS and the config's CTA bounds, at most
// comm->channelFit (every rank's blocks resident together, gpu_sharing.h).
// ncclInvalidUsage when the minimum asked for does not fit.
ncclResult_t chooseChannelCount(const ncclComm* comm, int* nChannels);
CollTuning tuneCollective(const ncclComm* comm, TaskKind kind, size_t bytes);
uint32_t p2pSliceBytes(const ncclComm* comm);
// Protocol of one point-to-point message of `bytes` with `peer`: LL up to
// NCCL_P2P_LL_THRESHOLD bytes (latency), Simple above it and always over
// the network. Both ends compute the same answer.
uint8_t p2pProto(const ncclComm* comm, int peer, size_t bytes);

}  // namespace uniccl
