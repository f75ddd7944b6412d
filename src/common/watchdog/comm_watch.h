// What one communicator owns for the watchdog (ncclComm::watch; nullptr when
// its timeout is 0): its eager and graph trackers.
#pragma once

#include <cstdint>

#include "common/watchdog/eager_tracker.h"
#include "common/watchdog/graph_tracker.h"

namespace uniccl {

struct CommWatch {
  explicit CommWatch(int64_t timeoutMs) : timeoutMs(timeoutMs) {}
  const int64_t timeoutMs;
  EagerTracker eager;
  GraphEventTracker graphs;
  bool fired = false;            // watchdog thread only: a timeout already aborted the comm
};

}  // namespace uniccl
