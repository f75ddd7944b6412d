// What one communicator owns for the watchdog (ncclComm::watch; nullptr when
// its timeout is 0): its eager and graph trackers, the host-mapped launch
// progress words its kernels write (dev::LaunchProgress for eager launches,
// dev::GraphProgress per tracked graph) and the graphs' replay counters.
#pragma once

#include <cstdint>

#include "common/gpu.h"
#include "common/watchdog/eager_tracker.h"
#include "common/watchdog/graph_tracker.h"

namespace uniccl {

struct CommWatch {
  explicit CommWatch(int64_t timeoutMs) : timeoutMs(timeoutMs) {}
  // Runs after the communicator's kernels ended (commFree drains them first).
  // A release that fails was logged by the backend; the others still run.
  ~CommWatch() {
    if (progressHost != nullptr) (void)gpu::hostFree(progressHost);
    if (graphWordsHost != nullptr) (void)gpu::hostFree(graphWordsHost);
    if (graphReplaysDev != nullptr) (void)gpu::deviceFree(graphReplaysDev);
  }
  CommWatch(const CommWatch&) = delete;
  CommWatch& operator=(const CommWatch&) = delete;

  const int64_t timeoutMs;
  EagerTracker eager;
  GraphTracker graphs;
  void* progressHost = nullptr;  // dev::LaunchProgress, host view
  void* progressDev = nullptr;   // the same, as the kernels see it
  void* graphWordsHost = nullptr;   // GraphTracker::kSlots dev::GraphProgress, host view
  void* graphWordsDev = nullptr;    // the same, as the kernels see it
  void* graphReplaysDev = nullptr;  // GraphTracker::kSlots * kMaxChannels counters (device memory)
  bool fired = false;            // watchdog thread only: a timeout already aborted the comm
};

}  // namespace uniccl
