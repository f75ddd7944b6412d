// One communicator rank's trace: what the plugin's entry points need of it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "uniccl_profiler.h"

namespace trace {

// Contexts traced at once (a start record names its context by its slot).
constexpr uint32_t kMaxTracedContexts = 4096;

struct TraceContext {
  uint64_t commId = 0;
  int rank = 0, nRanks = 0, nNodes = 0;
  std::string commName;
  std::string path;
  ncclDebugLogger_t log = nullptr;
  uint16_t slot = 0;   // its index among the tracer's contexts: start records name their context by it
  // Set by the writer once it has taken the rank's maxEvents starts: the
  // threads then record each further start as a skipped start (counted,
  // without an id, so that no stop or state of it follows).
  std::atomic<bool> atMaxEvents{false};
  pid_t pid = 0;       // getpid() at init: ProxyOp descriptors of other processes are told apart without a syscall
  // Starts dropped because the thread's ring was full (the writer fell
  // behind): counted by the threads that dropped them, rarely.
  std::atomic<uint64_t> droppedRingFull{0};
};

}  // namespace trace
