// Kernel launches of a planned group: where the work items travel (kernel
// arguments, work FIFO, or a graph-owned persistent buffer), the done event
// and its callback, and ordering across the streams of a group.
#pragma once

#include <cstddef>

#include "common/core/launch_plan.h"
#include "common/gpu.h"
#include "device/dev_types.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

struct CommPlan;

constexpr size_t kMaxWorksPerLaunch = 512;   // 32 KiB of FIFO per launch

// Finds the group's streams (p.launch.streams, .otherStreams) and orders
// the launch stream after the other streams of the group and after the
// communicator's previous launch.
[[nodiscard]] ncclResult_t collectStreams(CommPlan& p);
// Launch k of p.launch.
[[nodiscard]] ncclResult_t launchWorks(CommPlan& p, size_t k);

// Whether a launch of `grid` blocks lets the next programmatic launch of its
// stream start once it passed its own wait (KernelArgs::releaseEarly).
// `shortLaunch`: the launch ends soon whatever its grid (shortP2pLaunch).
bool releaseEarly(const ncclComm* comm, unsigned grid, bool shortLaunch = false);
// Whether works[0..n) are p2p items whose messages are all at most
// kShortP2pBytes: however many blocks such a launch has, it is over within
// a few microseconds.
constexpr uint64_t kShortP2pBytes = 64 << 10;
bool shortP2pLaunch(const dev::Work* works, int n);
// Orders the group's other streams after its launches.
[[nodiscard]] ncclResult_t finishStreams(CommPlan& p);

// Waits until every launch of the communicator ended and ran its callbacks:
// those with a done event through the callback queue, the others through
// the watchdog's progress words (ncclCommFinalize, destroy, abort).
[[nodiscard]] ncclResult_t drainLaunches(ncclComm* comm);

}  // namespace uniccl
