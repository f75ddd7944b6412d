// One communicator rank's trace: what the plugin's entry points need of it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "uniccl_profiler.h"

namespace trace {

class RankTrace;

struct TraceContext {
  uint64_t commId = 0;
  int rank = 0, nRanks = 0, nNodes = 0;
  std::string commName;
  std::string path;
  ncclDebugLogger_t log = nullptr;
  uint16_t slot = 0;   // its index among the tracer's contexts: start records name their context by it
  pid_t pid = 0;       // getpid() at init: ProxyOp descriptors of other processes are told apart without a syscall
  // Starts dropped because the thread's ring was full (the writer fell
  // behind): counted by the threads that dropped them, rarely.
  std::atomic<uint64_t> droppedRingFull{0};
  RankTrace* trace = nullptr;   // the writer's side (rank_trace.h)
};

}  // namespace trace
