#include "common/watchdog/watchdog.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/check.h"
#include "common/core/async_error.h"
#include "common/core/comm.h"
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
  std::vector<ncclComm*> comms;
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

void fire(ncclComm* comm, const TrackerCheck& c) {
  char what[256];
  formatWorkDesc(c.desc, what, sizeof(what));
  WARN("Watchdog: rank %d/%d (comm %p, commHash 0x%llx, GPU %d): %s%s has been running for %lld ms, longer than "
       "UNICCL_TIMEOUT (%lld s); aborting the communicator. A peer probably never joined this operation (or died): "
       "compare the sequence numbers across ranks",
       comm->rank, comm->nRanks, (void*)comm, (unsigned long long)comm->commHash, comm->gpuDev, what,
       c.inGraph ? " in a graph replay" : "", (long long)c.elapsedMs, (long long)(comm->watch->timeoutMs / 1000));
  failCommAsync(comm, ncclRemoteError);
  comm->watch->fired = true;
  wd().timeouts.fetch_add(1, std::memory_order_relaxed);
}

void pollComm(ncclComm* comm, int64_t nowMs) {
  CommWatch& w = *comm->watch;
  // After a timeout the trackers still retire completed work and free
  // released graphs, but report nothing more.
  const int64_t timeout = w.fired ? 0 : w.timeoutMs;
  TrackerCheck c = w.eager.check(nowMs, timeout);
  TrackerCheck g = w.graphs.checkAll(nowMs, timeout);
  if (c.timedOut) fire(comm, c);
  else if (g.timedOut) fire(comm, g);
}

void pollLocked(int64_t nowMs) {
  for (ncclComm* comm : wd().comms) {
    const ncclResult_t r = runGuarded("watchdog thread", [&] { pollComm(comm, nowMs); });
    if (r != ncclSuccess) failCommAsync(comm, r);   // its launches can no longer be timed
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

void stopAtExit() {
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

ncclResult_t watchdogRegister(ncclComm* comm, int64_t timeoutMs) {
  if (timeoutMs <= 0) {
    INFO(kSubsysInit, "comm %p rank %d: collective timeouts are off (UNICCL_TIMEOUT=0)", (void*)comm, comm->rank);
    return ncclSuccess;
  }
  comm->watch.reset(new (std::nothrow) CommWatch(timeoutMs));
  if (!comm->watch) {
    WARN("Out of host memory creating the watchdog state of rank %d", comm->rank);
    return ncclSystemError;
  }
  // The words the kernels report their progress in: eager launches, and
  // the graph slots (allocated now: nothing may be allocated while a stream
  // captures). The device learns where they are last, once all exist.
  CommWatch& cw = *comm->watch;
  const size_t wordsBytes = GraphTracker::kSlots * sizeof(dev::GraphProgress);
  const size_t replaysBytes = GraphTracker::kSlots * dev::kMaxChannels * sizeof(uint64_t);
  ncclResult_t res = gpu::hostAllocMapped(&cw.progressHost, &cw.progressDev, sizeof(dev::LaunchProgress));
  if (res == ncclSuccess) res = gpu::hostAllocMapped(&cw.graphWordsHost, &cw.graphWordsDev, wordsBytes);
  if (res == ncclSuccess) res = gpu::deviceAlloc(&cw.graphReplaysDev, replaysBytes);
  if (res == ncclSuccess) res = gpu::memset(cw.graphReplaysDev, 0, replaysBytes);
  if (res == ncclSuccess) {
    memset(cw.progressHost, 0, sizeof(dev::LaunchProgress));
    memset(cw.graphWordsHost, 0, wordsBytes);
    if (comm->devComm != nullptr) {
      comm->devCommHost.progress = static_cast<dev::LaunchProgress*>(cw.progressDev);
      res = gpu::memcpy(comm->devComm, &comm->devCommHost, sizeof(comm->devCommHost));
    }
  }
  if (res != ncclSuccess) {
    // Without a watch launches carry id 0 and no graph slot: nothing writes
    // to the words, whatever the device copy of the pointer says.
    comm->devCommHost.progress = nullptr;
    comm->watch.reset();
    return res;
  }
  cw.eager.attach(static_cast<dev::LaunchProgress*>(cw.progressHost));
  cw.graphs.attach(static_cast<dev::GraphProgress*>(cw.graphWordsHost),
                   static_cast<dev::GraphProgress*>(cw.graphWordsDev), static_cast<uint64_t*>(cw.graphReplaysDev));
  Watchdog& w = wd();
  std::lock_guard<std::mutex> lock(w.mu);
  w.comms.push_back(comm);
  if (!w.thread.joinable()) {
    int64_t pollMs = std::max<int64_t>(1, knobInt(Knob::UNICCL_WATCHDOG_POLL_MS));
    w.stop = std::make_shared<std::atomic<bool>>(false);
    try {
      w.thread = std::thread(threadMain, w.stop, pollMs);
    } catch (const std::exception& e) {
      w.comms.pop_back();
      comm->watch.reset();
      WARN("Could not start the watchdog thread (%s)", e.what());
      return ncclSystemError;
    }
    if (!w.atexitInstalled) {
      w.atexitInstalled = true;
      std::atexit(stopAtExit);
    }
    INFO(kSubsysInit, "Watchdog thread started (poll every %lld ms)", (long long)pollMs);
  }
  INFO(kSubsysInit, "comm %p rank %d: collectives time out after %lld s (UNICCL_TIMEOUT)", (void*)comm, comm->rank,
       (long long)(timeoutMs / 1000));
  return ncclSuccess;
}

void watchdogUnregister(ncclComm* comm) {
  if (!comm->watch) return;
  Watchdog& w = wd();
  std::thread last;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    auto it = std::find(w.comms.begin(), w.comms.end(), comm);
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

ncclResult_t watchWaitEagerLaunches(ncclComm* comm) {
  if (!comm->watch) return ncclSuccess;
  CommWatch& w = *comm->watch;
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
      pollComm(comm, watchdogNowMs());
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
  for (ncclComm* c : w.comms) {
    st.eagerInFlight += c->watch->eager.inFlight();
    st.graphs += c->watch->graphs.graphCount();
  }
  st.graphReleaseFlags = GraphTracker::liveReleaseFlags();
  st.polls = w.polls.load();
  st.timeouts = w.timeouts.load();
  return st;
}

}  // namespace uniccl
