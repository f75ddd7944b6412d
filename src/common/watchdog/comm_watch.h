// What one communicator owns for the watchdog (ncclComm::watch; nullptr when
// its timeout is 0; made by core/comm_watchdog.cc): its identity and abort
// hook, its eager and graph trackers, the host-mapped launch
// progress words its kernels write (dev::LaunchProgress for eager launches,
// dev::GraphProgress per tracked graph) and the graphs' replay counters.
#pragma once

#include <cstdint>
#include <functional>

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
  // Who this is, for the timeout message, and how a timeout (or a poll that
  // failed) ends the communicator: set by its owner before watchdogAdd.
  struct Owner {
    const void* comm = nullptr;
    int rank = 0, nRanks = 0, gpuDev = -1;
    uint64_t commHash = 0;
    std::function<void(ncclResult_t)> fail;   // raises the communicator's async error and abort flags
  } owner;
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
