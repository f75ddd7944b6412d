// Choices the planner makes per collective: protocol, channels, slice size.
// Defaults follow measurements on NVLink-connected GPUs; NCCL_PROTO,
// NCCL_ALGO, NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS override them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/core/tasks.h"

struct ncclComm;

namespace uniccl {

struct CollTuning {
  uint8_t proto;        // dev::Proto
  int nChannels;        // blocks that share the data
  uint32_t sliceBytes;  // bytes per pipeline step
};

// Reads NCCL_PROTO / NCCL_ALGO once per process and warns about values this
// build does not implement.
void loadTuningEnv();
// Number of channels a communicator wires at init.
int defaultChannelCount(const ncclComm* comm);
CollTuning tuneCollective(const ncclComm* comm, TaskKind kind, size_t bytes);
uint32_t p2pSliceBytes(const ncclComm* comm);

}  // namespace uniccl
