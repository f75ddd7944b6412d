#include "common/profiler/kernel_ch_poller.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "common/profiler/kernel_ch.h"

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
  std::thread thread;
  Run* run = nullptr;   // of `thread`
  bool kicked = false;
  std::atomic<bool> sleeping{false};
};

Poller& poller() {
  static Poller* p = new Poller();   // never destroyed: comms may go during exit
  return *p;
}

void runLoop(Poller* p, Run* r) {
  std::unique_lock<std::mutex> lk(p->mu);
  auto lastPending = std::chrono::steady_clock::now();
  while (!r->stop) {
    int left = 0;
    for (KernelChTracker* t : p->trackers) left += t->poll();
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
    left = 0;
    for (KernelChTracker* t : p->trackers) left += t->poll();
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
    p.thread = std::thread(runLoop, &p, r);
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
