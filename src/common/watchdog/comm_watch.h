// What one communicator owns for the watchdog (ncclComm::watch; nullptr when
// its timeout is 0): its eager and graph trackers and the host-mapped launch
// progress words its kernels write (dev::LaunchProgress).
#pragma once

#include <cstdint>

#include "common/gpu.h"
#include "common/watchdog/eager_tracker.h"
#include "common/watchdog/graph_tracker.h"

namespace uniccl {

struct CommWatch {
  explicit CommWatch(int64_t timeoutMs) : timeoutMs(timeoutMs) {}
  // Runs after the communicator's kernels ended (commFree drains them first).
  ~CommWatch() {
    if (progressHost != nullptr) gpu::hostFree(progressHost);
  }
  CommWatch(const CommWatch&) = delete;
  CommWatch& operator=(const CommWatch&) = delete;

  const int64_t timeoutMs;
  EagerTracker eager;
  GraphEventTracker graphs;
  void* progressHost = nullptr;  // dev::LaunchProgress, host view
  void* progressDev = nullptr;   // the same, as the kernels see it
  bool fired = false;            // watchdog thread only: a timeout already aborted the comm
};

}  // namespace uniccl
