// Timeout tracking of eager (uncaptured) launches of one communicator.
//
// The kernels report their own progress in host-mapped words
// (dev::LaunchProgress): block 0 stores a launch's id when it starts, every
// block stores it when it ends. The launch thread gives each launch the next
// id and queues (id, grid, description); the watchdog thread retires the
// queued launches whose blocks all reported and times the head launch once
// it has started. Launches of one communicator run in issue order
// (launch.cc orders them across streams), so ids only grow in the words and
// only the head can be running: time spent queued behind other work never
// counts. No event is recorded or queried (an event pair per launch cost
// about 3 us of host time per launch and held the driver's locks).
//
// A launch that failed on the GPU never reports its end. The fault is sticky:
// it reaches the user at the next launch or event query (a done event, one
// launch in UNICCL_DONE_EVENT_INTERVAL, or drainLaunches' probe), and the
// watchdog times the launch out if nobody looks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/watchdog/tracker_check.h"
#include "common/watchdog/work_desc.h"
#include "device/dev_types.h"

namespace uniccl {

class EagerTracker {
 public:
  EagerTracker() = default;
  EagerTracker(const EagerTracker&) = delete;
  EagerTracker& operator=(const EagerTracker&) = delete;

  // The words the kernels write for eager launches (host view of
  // host-mapped memory, zeroed); nullptr: launches are not tracked (nextId()
  // returns 0).
  void attach(dev::LaunchProgress* words) { words_ = words; }

  // Launch thread: the id the next launch reports (0: not tracked).
  uint64_t nextId() { return words_ != nullptr ? ++lastId_ : 0; }
  // Launch thread: launch `id` (from nextId) of `grid` blocks is on its stream.
  void launched(uint64_t id, unsigned grid, const WorkDesc& desc);

  // Watchdog thread: retires completed launches; reports the head launch
  // when it has been running for more than timeoutMs (0: never).
  TrackerCheck check(int64_t nowMs, int64_t timeoutMs);

  size_t inFlight();        // queued launches not yet seen complete

 private:
  struct Entry {
    uint64_t id;
    unsigned grid;
    WorkDesc desc;
  };
  void push(const Entry& e);   // mu_ held
  bool started(const Entry& e) const;
  bool done(const Entry& e) const;

  dev::LaunchProgress* words_ = nullptr;
  uint64_t lastId_ = 0;        // launch thread only
  std::mutex mu_;
  std::vector<Entry> ring_;    // size is 0 or a power of two
  size_t head_ = 0;
  size_t count_ = 0;
  int64_t headRunningSinceMs_ = -1;   // when the head launch was first seen running
};

}  // namespace uniccl
