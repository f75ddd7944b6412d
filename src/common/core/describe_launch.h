// What the watchdog says about a kernel launch of a plan when it runs past
// UNICCL_TIMEOUT (watchdog/work_desc.h): the launch is described on the
// launching thread, from the plan, and the watchdog keeps the description.
#pragma once

#include <cstddef>

#include "common/core/launch_plan.h"
#include "common/watchdog/work_desc.h"

namespace uniccl {

// Launch k of `plan`: its first work item's operation, size, sequence
// number and peers (ringNext, ringPrev: the communicator's channel 0 ring,
// for collectives), and how many items it carries.
void describeLaunch(const LaunchPlan& plan, size_t k, int ringNext, int ringPrev, WorkDesc* d);

}  // namespace uniccl
