// The process-wide watchdog: one thread polls every registered
// communicator's eager and graph trackers; a launch that has run longer than
// UNICCL_TIMEOUT aborts its communicator (device abort flag, host abort,
// async error ncclRemoteError) and is named in a WARN. See docs/timeouts.md.
//
// The thread starts with the first communicator that has a nonzero timeout
// and is joined when the last one goes (and at process exit).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/gpu.h"
#include "common/watchdog/comm_watch.h"
#include "common/watchdog/work_desc.h"
#include "device/dev_types.h"
#include "uniccl.h"

namespace uniccl {

// The collective timeout in milliseconds (0: off): UNICCL_TIMEOUT_MS if set,
// else UNICCL_TIMEOUT (seconds).
int64_t watchdogTimeoutMsFromEnv();

// Adds a communicator's watch (its owner filled in, trackers attached:
// core/comm_watchdog.h does both) to the thread's polls; starts the thread
// with the first.
[[nodiscard]] ncclResult_t watchdogAdd(CommWatch* watch);
// Removes it; on return the watchdog thread no longer touches it, so its
// progress words and trackers may go. Joins the thread when this was the
// last. Safe for a watch never added, and for nullptr.
void watchdogRemove(CommWatch* watch);

// launch.cc, around each kernel launch of a communicator with a watch.
// Begin gives an eager launch its id (the kernel arguments' launchId) or a
// captured launch (capture: its stream's) its graph slot and place (the
// arguments' graph); End queues an eager launch once it is on its stream.
// A failed eager launch is simply not queued (its id never reports; later
// ids pass it). `grid`: the launch's blocks; `d`: what the timeout message
// says about it (core/launch.h, describeLaunch).
struct LaunchWatch {
  uint64_t eagerId = 0;     // eager launch id (0: not tracked)
  dev::GraphTrack graph{};  // captured launch (words == nullptr: not tracked)
};
[[nodiscard]] ncclResult_t watchLaunchBegin(CommWatch* watch, bool captured, const gpu::CaptureInfo& capture, unsigned grid,
                              const WorkDesc& d, LaunchWatch* w);
void watchLaunchEnd(CommWatch* watch, unsigned grid, const WorkDesc& d, LaunchWatch* w);

// Waits until the comm's eager launches the tracker queued have all
// reported their end (launch.cc gives most launches no done event of their
// own). A launch running past UNICCL_TIMEOUT aborts the comm as the thread
// would (its kernels then stop and report); a fault on the GPU ends the wait
// with its error. Nothing to wait for without a timeout (no tracker).
[[nodiscard]] ncclResult_t watchWaitEagerLaunches(CommWatch* watch);

// One poll of every registered comm at time nowMs (what the thread does every
// UNICCL_WATCHDOG_POLL_MS); exposed so tests can drive a fake clock.
void watchdogPollOnce(int64_t nowMs);
int64_t watchdogNowMs();   // the thread's clock (steady, milliseconds)

struct WatchdogStats {
  size_t comms = 0;              // registered
  bool threadRunning = false;
  size_t eagerInFlight = 0;
  size_t graphs = 0;             // tracked graphs of the registered comms
  size_t graphReleaseFlags = 0;  // graphs alive with a release hook, process-wide
  uint64_t polls = 0;            // polls since process start
  uint64_t timeouts = 0;         // timeouts fired since process start
};
WatchdogStats watchdogStatsForTesting();

}  // namespace uniccl
