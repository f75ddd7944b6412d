// The answer of one tracker poll: whether some work ran past the timeout,
// and which.
#pragma once

#include <cstdint>

#include "common/watchdog/work_desc.h"

namespace uniccl {

struct TrackerCheck {
  bool timedOut = false;
  bool inGraph = false;     // the work is a node of a captured graph
  WorkDesc desc;            // of the stuck work (valid when timedOut)
  int64_t elapsedMs = 0;    // how long it has been seen running
};

}  // namespace uniccl
