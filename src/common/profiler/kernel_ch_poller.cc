#include "common/profiler/kernel_ch_poller.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "common/profiler/kernel_ch.h"
#include "common/util/debug.h"
#include "common/util/guarded.h"

namespace uniccl::kernel_ch_poller {

namespace {

constexpr auto kPollInterval = std::chrono::microseconds(50);
constexpr auto kIdleAfter = std::chrono::milliseconds(2);     // nothing pending this long: sleep
constexpr auto kSleepCheck = std::chrono::milliseconds(100);  // safety net while asleep

// One run of the thread; its own stop flag, so that a thread being joined
// after the last remove() never mistakes a new run's start for its own.
struct Run {
  bool stop = false;
};

struct Poller {
  std::mutex mu;   // everything below; held while polling (remove() waits for a poll in progress)
  std::condition_variable cv;
  std::vector<KernelChTracker*> trackers;
  std::vector<KernelChTracker*> failed;   // threw once: not polled again (their comm's destroy still polls)
  std::thread thread;
  Run* run = nullptr;   // of `thread`
  bool kicked = false;
  std::atomic<bool> sleeping{false};
};

Poller& poller() {
  static Poller* p = new Poller();   // never destroyed: comms may go during exit
  return *p;
}

// Stamps still expected, over the trackers that have not failed. A tracker
// that throws (the profiler plugin, out of memory) loses its KernelCh events
// from then on; its communicator is unaffected: profiling is advisory.
int pollAll(Poller* p) {
  int left = 0;
  for (KernelChTracker* t : p->trackers) {
    if (std::find(p->failed.begin(), p->failed.end(), t) != p->failed.end()) continue;
    int n = 0;
    if (runGuarded("profiler KernelCh thread", [&] { n = t->poll(); }) != ncclSuccess) {
      WARN("profiler: KernelCh events of this communicator stop here");
      p->failed.push_back(t);
    }
    left += n;
  }
  return left;
}

void runLoop(Poller* p, Run* r) {
  std::unique_lock<std::mutex> lk(p->mu);
  auto lastPending = std::chrono::steady_clock::now();
  while (!r->stop) {
    int left = pollAll(p);
    const auto now = std::chrono::steady_clock::now();
    if (left > 0 || p->kicked) lastPending = now;
    p->kicked = false;
    if (now - lastPending < kIdleAfter) {
      p->cv.wait_for(lk, kPollInterval, [r] { return r->stop; });
      continue;
    }
    // Idle: say so, look once more (a launch may have expected items before
    // it saw the flag), then sleep until kicked.
    p->sleeping.store(true, std::memory_order_seq_cst);
    left = pollAll(p);
    if (left == 0) p->cv.wait_for(lk, kSleepCheck, [p, r] { return r->stop || p->kicked; });
    p->sleeping.store(false, std::memory_order_seq_cst);
    lastPending = std::chrono::steady_clock::now();
  }
}

}  // namespace

void add(KernelChTracker* t) {
  Poller& p = poller();
  std::lock_guard<std::mutex> lk(p.mu);
  p.trackers.push_back(t);
  if (p.run != nullptr) return;
  Run* r = new Run();
  try {
    // What escapes the loop itself (a wait that threw) is logged by the
    // guard; the loop starts over (its lock was released on the way out).
    p.thread = std::thread([pp = &p, r] {
      while (runGuarded("profiler KernelCh thread", [&] { runLoop(pp, r); }) != ncclSuccess) {
      }
    });
  } catch (...) {
    // No thread: the stamps are still reported when the communicator goes
    // (its destroy polls), only later.
    delete r;
    p.trackers.pop_back();
    return;
  }
  p.run = r;
}

void remove(KernelChTracker* t) {
  Poller& p = poller();
  std::thread last;
  Run* run = nullptr;
  {
    std::lock_guard<std::mutex> lk(p.mu);
    auto it = std::find(p.trackers.begin(), p.trackers.end(), t);
    if (it == p.trackers.end()) return;
    p.trackers.erase(it);
    p.failed.erase(std::remove(p.failed.begin(), p.failed.end(), t), p.failed.end());
    if (!p.trackers.empty() || p.run == nullptr) return;
    p.run->stop = true;
    run = p.run;
    p.run = nullptr;
    last = std::move(p.thread);
  }
  p.cv.notify_all();
  if (last.joinable()) last.join();
  delete run;
}

void kick() {
  Poller& p = poller();
  if (!p.sleeping.load(std::memory_order_seq_cst)) return;
  {
    std::lock_guard<std::mutex> lk(p.mu);
    p.kicked = true;
  }
  p.cv.notify_one();
}

bool threadRunning() {
  Poller& p = poller();
  std::lock_guard<std::mutex> lk(p.mu);
  return p.run != nullptr;
}

}  // namespace uniccl::kernel_ch_poller
