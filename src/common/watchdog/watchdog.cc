#include "common/watchdog/watchdog.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/check.h"
#include "common/util/debug.h"
#include "common/util/guarded.h"
#include "common/util/knobs.h"

namespace uniccl {

namespace {

constexpr int64_t kDefaultTimeoutSec = knobSpec(Knob::UNICCL_TIMEOUT).intDefault;
constexpr int64_t kDefaultPollMs = knobSpec(Knob::UNICCL_WATCHDOG_POLL_MS).intDefault;

// Registry and thread. The poll runs with `mu` held, so unregistering
// (which takes `mu`) waits for a running poll and the comm is never touched
// afterwards.
struct Watchdog {
  std::mutex mu;
  std::vector<CommWatch*> comms;
  std::thread thread;
  std::shared_ptr<std::atomic<bool>> stop;   // of the running thread
  std::mutex wakeMu;
  std::condition_variable wake;
  bool atexitInstalled = false;
  std::atomic<uint64_t> polls{0};
  std::atomic<uint64_t> timeouts{0};
};

Watchdog& wd() {
  // Never destroyed: comms may be freed during exit, after static destructors.
  static Watchdog* w = new Watchdog();
  return *w;
}

void fire(CommWatch& w, const TrackerCheck& c) {
  char what[256];
  formatWorkDesc(c.desc, what, sizeof(what));
  const CommWatch::Owner& o = w.owner;
  WARN("Watchdog: rank %d/%d (comm %p, commHash 0x%llx, GPU %d): %s%s has been running for %lld ms, longer than "
       "UNICCL_TIMEOUT (%lld s); aborting the communicator. A peer probably never joined this operation (or died): "
       "compare the sequence numbers across ranks",
       o.rank, o.nRanks, o.comm, (unsigned long long)o.commHash, o.gpuDev, what, c.inGraph ? " in a graph replay" : "",
       (long long)c.elapsedMs, (long long)(w.timeoutMs / 1000));
  if (o.fail) o.fail(ncclRemoteError);
  w.fired = true;
  wd().timeouts.fetch_add(1, std::memory_order_relaxed);
}

void pollWatch(CommWatch& w, int64_t nowMs) {
  // After a timeout the trackers still retire completed work and free
  // released graphs, but report nothing more.
  const int64_t timeout = w.fired ? 0 : w.timeoutMs;
  TrackerCheck c = w.eager.check(nowMs, timeout);
  TrackerCheck g = w.graphs.checkAll(nowMs, timeout);
  if (c.timedOut) fire(w, c);
  else if (g.timedOut) fire(w, g);
}

void pollLocked(int64_t nowMs) {
  for (CommWatch* w : wd().comms) {
    const ncclResult_t r = runGuarded("watchdog thread", [&] { pollWatch(*w, nowMs); });
    if (r != ncclSuccess && w->owner.fail) w->owner.fail(r);   // its launches can no longer be timed
  }
  wd().polls.fetch_add(1, std::memory_order_relaxed);
}

void watchLoop(const std::atomic<bool>& stop, int64_t pollMs) {
  Watchdog& w = wd();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(w.wakeMu);
      w.wake.wait_for(lock, std::chrono::milliseconds(pollMs), [&] { return stop.load(); });
    }
    if (stop.load()) return;
    std::lock_guard<std::mutex> lock(w.mu);
    pollLocked(watchdogNowMs());
  }
}

void threadMain(std::shared_ptr<std::atomic<bool>> stop, int64_t pollMs) {
  // A failure outside a comm's poll (a lock or wait that threw) is logged by
  // the guard; the thread goes on watching after a poll interval.
  while (runGuarded("watchdog thread", [&] { watchLoop(*stop, pollMs); }) != ncclSuccess)
    std::this_thread::sleep_for(std::chrono::milliseconds(pollMs));
}

// Takes the running thread out of the registry (w.mu held) for joining outside the lock.
std::thread detachThreadLocked(Watchdog& w) {
  if (w.stop) w.stop->store(true);
  w.stop.reset();
  return std::move(w.thread);
}

void joinStopped(std::thread t) {
  if (!t.joinable()) return;
  { std::lock_guard<std::mutex> lock(wd().wakeMu); }
  wd().wake.notify_all();
  t.join();
}

void stopWatchdogAtExit() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(wd().mu);
    t = detachThreadLocked(wd());
  }
  joinStopped(std::move(t));
}

}  // namespace

int64_t watchdogNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t watchdogTimeoutMsFromEnv() {
  // Milliseconds, for tests and fine control; wins over UNICCL_TIMEOUT.
  if (knobValue(Knob::UNICCL_TIMEOUT_MS) != nullptr) {
    int64_t ms = knobInt(Knob::UNICCL_TIMEOUT_MS);
    if (ms < 0) {
      WARN("UNICCL_TIMEOUT_MS=%lld is negative; collective timeouts are off", (long long)ms);
      return 0;
    }
    return ms;
  }
  int64_t sec = knobInt(Knob::UNICCL_TIMEOUT);
  if (sec < 0) {
    WARN("UNICCL_TIMEOUT=%lld is negative; collective timeouts are off (use 0 to turn them off, or seconds)",
         (long long)sec);
    return 0;
  }
  if (sec > INT64_MAX / 1000) sec = INT64_MAX / 1000;
  return sec * 1000;
}

ncclResult_t watchdogAdd(CommWatch* watch) {
  Watchdog& w = wd();
  std::lock_guard<std::mutex> lock(w.mu);
  w.comms.push_back(watch);
  if (!w.thread.joinable()) {
    int64_t pollMs = std::max<int64_t>(1, knobInt(Knob::UNICCL_WATCHDOG_POLL_MS));
    w.stop = std::make_shared<std::atomic<bool>>(false);
    try {
      w.thread = std::thread(threadMain, w.stop, pollMs);
    } catch (const std::exception& e) {
      w.comms.pop_back();
      WARN("Could not start the watchdog thread (%s)", e.what());
      return ncclSystemError;
    }
    if (!w.atexitInstalled) {
      w.atexitInstalled = true;
      std::atexit(stopWatchdogAtExit);
    }
    INFO(kSubsysInit, "Watchdog thread started (poll every %lld ms)", (long long)pollMs);
  }
  return ncclSuccess;
}

void watchdogRemove(CommWatch* watch) {
  if (watch == nullptr) return;
  Watchdog& w = wd();
  std::thread last;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    auto it = std::find(w.comms.begin(), w.comms.end(), watch);
    if (it == w.comms.end()) return;
    w.comms.erase(it);
    if (w.comms.empty()) last = detachThreadLocked(w);
  }
  joinStopped(std::move(last));
}

ncclResult_t watchLaunchBegin(CommWatch* watch, bool captured, const gpu::CaptureInfo& capture, unsigned grid,
                              const WorkDesc& d, LaunchWatch* w) {
  *w = LaunchWatch{};
  if (captured) return watch->graphs.captured(capture, grid, d, &w->graph);
  w->eagerId = watch->eager.nextId();
  return ncclSuccess;
}

void watchLaunchEnd(CommWatch* watch, unsigned grid, const WorkDesc& d, LaunchWatch* w) {
  if (w->eagerId != 0) watch->eager.launched(w->eagerId, grid, d);
}

ncclResult_t watchWaitEagerLaunches(CommWatch* watch) {
  if (watch == nullptr) return ncclSuccess;
  CommWatch& w = *watch;
  if (w.eager.inFlight() == 0) return ncclSuccess;
  // A kernel that faulted never reports its end, but the fault is sticky:
  // creating and querying an event fails from then on.
  gpu::Event probe = nullptr;
  UCHECK(gpu::eventCreate(&probe));
  ncclResult_t res = ncclSuccess;
  for (;;) {
    {
      // The thread's poll, under its lock (ncclCommFinalize: the thread may
      // poll this comm too; only one of the two fires). Past the timeout the
      // launches are stopped (abort flag) and still waited for.
      std::lock_guard<std::mutex> lock(wd().mu);
      pollWatch(w, watchdogNowMs());
    }
    if (w.eager.inFlight() == 0) break;
    res = gpu::eventQuery(probe);
    if (res != ncclSuccess) break;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  (void)gpu::eventDestroy(probe);   // res is what the wait found; the backend logs a failed destroy
  return res;
}

void watchdogPollOnce(int64_t nowMs) {
  std::lock_guard<std::mutex> lock(wd().mu);
  pollLocked(nowMs);
}

WatchdogStats watchdogStatsForTesting() {
  Watchdog& w = wd();
  WatchdogStats st;
  std::lock_guard<std::mutex> lock(w.mu);
  st.comms = w.comms.size();
  st.threadRunning = w.thread.joinable();
  for (CommWatch* c : w.comms) {
    st.eagerInFlight += c->eager.inFlight();
    st.graphs += c->graphs.graphCount();
  }
  st.graphReleaseFlags = GraphTracker::liveReleaseFlags();
  st.polls = w.polls.load();
  st.timeouts = w.timeouts.load();
  return st;
}

}  // namespace uniccl
