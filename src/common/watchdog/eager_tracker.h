// Timeout tracking of eager (uncaptured) launches of one communicator.
//
// Each launch gets a start and an end event from a pool the tracker owns
// (not the done events: the callback queue recycles those on the user's
// thread, so the watchdog could end up querying an event that already stands
// for a later launch). The launch thread records both around the kernel and
// queues the pair; the watchdog thread retires completed pairs from the head
// (their events go back to the pool) and times the head launch once its
// start event completed. Launches of one communicator run in issue order
// (launch.cc orders them across streams), so only the head can be running:
// time spent queued behind other work never counts.
//
// One mutex guards the queue and the pool; both sides hold it briefly
// (the launch thread twice per launch, the watchdog for a few queries).
// The queue is a ring that grows by doubling and the pool recycles events,
// so the steady state neither allocates nor creates events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/enqueue/event_pool.h"
#include "common/gpu.h"
#include "common/watchdog/tracker_check.h"
#include "common/watchdog/work_desc.h"

namespace uniccl {

class EagerTracker {
 public:
  EagerTracker() : pool_(gpu::kEventDisableTiming) {}
  ~EagerTracker() = default;   // the pool destroys every event, queued or not
  EagerTracker(const EagerTracker&) = delete;
  EagerTracker& operator=(const EagerTracker&) = delete;

  // Launch thread: records the start event on `s` just before a launch.
  ncclResult_t recordStart(gpu::Stream s);
  // Launch thread: records the end event on `s` just after the launch and
  // queues the pair. A launch that failed simply never calls this: its
  // start event is reused by the next launch.
  ncclResult_t recordEnd(gpu::Stream s, const WorkDesc& desc);

  // Watchdog thread: retires completed launches; reports the head launch
  // when it has been running for more than timeoutMs (0: never).
  TrackerCheck check(int64_t nowMs, int64_t timeoutMs);

  size_t eventsCreated();   // by the pool, ever (stays flat in steady state)
  size_t inFlight();        // queued launches not yet seen complete

 private:
  struct Entry {
    gpu::Event start;
    gpu::Event end;
    WorkDesc desc;
  };
  void push(const Entry& e);   // mu_ held

  std::mutex mu_;
  EventPool pool_;
  std::vector<Entry> ring_;    // size is 0 or a power of two
  size_t head_ = 0;
  size_t count_ = 0;
  int64_t headRunningSinceMs_ = -1;   // when the head launch was first seen running

  // The launch thread's pair between recordStart and recordEnd.
  gpu::Event nextStart_ = nullptr;
  gpu::Event nextEnd_ = nullptr;
};

}  // namespace uniccl
