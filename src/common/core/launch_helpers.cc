#include "common/core/launch_helpers.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>

#include "common/util/cpu_relax.h"
#include "common/util/debug.h"
#include "common/util/guarded.h"
#include "common/util/knobs.h"

namespace uniccl {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxHelpers = 63;
constexpr int kErrorBytes = 1024;   // as the last-error text (util/debug.cc)

struct Settings {
  int maxHelpers;
  std::chrono::microseconds spin;   // awake after the last job
};

const Settings& settings() {
  static const Settings s{
      (int)std::clamp<int64_t>(knobInt(Knob::UNICCL_LAUNCH_HELPERS), 0, kMaxHelpers),
      std::chrono::microseconds(std::max<int64_t>(0, knobInt(Knob::UNICCL_LAUNCH_HELPER_SPIN_US))),
  };
  return s;
}

// A helper's hand-off word. The caller moves Idle -> Claimed -> Posted and,
// after the job, Done -> Idle, or takes a job back with Posted -> Idle; the
// helper moves Posted -> Running -> Done, and Idle -> Asleep under its mutex
// (the caller wakes it with Asleep -> Idle under the same mutex).
enum State : int { kIdle, kClaimed, kPosted, kRunning, kDone, kAsleep };

struct alignas(64) Helper {
  std::atomic<int> state{kIdle};
  // Written by the caller before Posted, read by the helper after it.
  HelperJob job = nullptr;
  void* ctx = nullptr;
  int index = 0;
  // Written by the helper before Done, read by the caller after it.
  ncclResult_t result = ncclSuccess;
  char error[kErrorBytes] = "";
  std::mutex mutex;
  std::condition_variable wake;
};

std::atomic<uint64_t> gJobsOnHelpers{0};
std::atomic<uint64_t> gHelperWakeups{0};

void helperMain(Helper* h) {
  const Settings& cfg = settings();
  // Polling with one pause between looks for the first part of the window,
  // then with yields, so that a helper on a busy machine gives way. A
  // pause is 20-30 ns; looking only every 16 pauses would add about 0.4 us
  // to a group of two 3 us launches (launch_helpers_bench): the job waits
  // for the helper's next look, and the caller for the result.
  const auto pauseFor = std::min(cfg.spin, std::chrono::microseconds(50));
  Clock::time_point lastJob = Clock::now();
  for (;;) {
    int s = h->state.load(std::memory_order_acquire);
    if (s == kPosted) {
      if (!h->state.compare_exchange_strong(s, kRunning, std::memory_order_acq_rel)) continue;
      clearLastError();
      h->result = runGuarded("launch helper thread", [h] { return h->job(h->ctx, h->index); });
      if (h->result != ncclSuccess) snprintf(h->error, sizeof(h->error), "%s", lastErrorMessage());
      gJobsOnHelpers.fetch_add(1, std::memory_order_relaxed);
      h->state.store(kDone, std::memory_order_release);
      lastJob = Clock::now();
      continue;
    }
    const auto idleFor = Clock::now() - lastJob;
    if (s == kIdle && idleFor >= cfg.spin) {
      std::unique_lock<std::mutex> lock(h->mutex);
      int idle = kIdle;
      if (h->state.compare_exchange_strong(idle, kAsleep, std::memory_order_acq_rel)) {
        h->wake.wait(lock, [h] { return h->state.load(std::memory_order_acquire) != kAsleep; });
        gHelperWakeups.fetch_add(1, std::memory_order_relaxed);
        lastJob = Clock::now();
      }
      continue;
    }
    if (idleFor < pauseFor) {
      cpuRelax();
    } else {
      sched_yield();
    }
  }
}

// Helpers and their threads are never destroyed: a thread may still sleep in
// its condition variable while static destructors run at exit.
struct Pool {
  std::mutex growMutex;
  std::atomic<int> count{0};
  Helper* helpers[kMaxHelpers] = {};
};

std::atomic<Pool*> gPool{nullptr};
std::once_flag gPoolOnce;

// A forked child has none of its parent's threads: it starts a pool of its
// own (the parent's helpers are left behind, never used).
void forgetHelpersInChild() { gPool.store(new Pool(), std::memory_order_release); }

Pool* pool() {
  std::call_once(gPoolOnce, [] {
    gPool.store(new Pool(), std::memory_order_release);
    pthread_atfork(nullptr, nullptr, forgetHelpersInChild);
  });
  return gPool.load(std::memory_order_acquire);
}

// The i-th helper, started on first use; nullptr when it cannot be started.
Helper* helperAt(Pool* p, int i) {
  if (i < p->count.load(std::memory_order_acquire)) return p->helpers[i];
  std::lock_guard<std::mutex> lock(p->growMutex);
  while (p->count.load(std::memory_order_relaxed) <= i) {
    Helper* h = new Helper();
    try {
      std::thread t(helperMain, h);
      pthread_setname_np(t.native_handle(), "uniccl-launch");
      t.detach();
    } catch (const std::system_error& e) {
      delete h;
      INFO(kSubsysInit, "launch helpers: cannot start a thread (%s); launches stay on the calling thread", e.what());
      return nullptr;
    }
    p->helpers[p->count.load(std::memory_order_relaxed)] = h;
    p->count.fetch_add(1, std::memory_order_release);
  }
  return p->helpers[i];
}

void wakeHelper(Helper* h) {
  {
    std::lock_guard<std::mutex> lock(h->mutex);
    int asleep = kAsleep;
    if (!h->state.compare_exchange_strong(asleep, kIdle, std::memory_order_acq_rel)) return;
  }
  h->wake.notify_one();
}

// Waits for a posted job: takes it back if the helper has not started it.
// A failure's message goes to `error`.
[[nodiscard]] ncclResult_t finishPosted(Helper* h, HelperJob job, void* ctx, int index, char* error) {
  int posted = kPosted;
  if (h->state.compare_exchange_strong(posted, kIdle, std::memory_order_acq_rel)) {
    const ncclResult_t res = job(ctx, index);
    if (res != ncclSuccess) snprintf(error, kErrorBytes, "%s", lastErrorMessage());
    return res;
  }
  const Clock::time_point start = Clock::now();
  while (h->state.load(std::memory_order_acquire) != kDone) {
    if (Clock::now() - start < std::chrono::microseconds(100)) {
      cpuRelax();
    } else {
      sched_yield();   // a long job (a launch that waits for FIFO space)
    }
  }
  const ncclResult_t res = h->result;
  if (res != ncclSuccess) snprintf(error, kErrorBytes, "%s", h->error);
  h->state.store(kIdle, std::memory_order_release);
  return res;
}

// The lowest-index failure of a group of jobs and its message (filled only
// on a failure: nothing to clear on the launch path).
struct FirstFailure {
  int index = -1;
  ncclResult_t result = ncclSuccess;
  char error[kErrorBytes];
  void note(int i, ncclResult_t r, const char* message) {
    if (r == ncclSuccess || (index >= 0 && index < i)) return;
    index = i;
    result = r;
    snprintf(error, sizeof(error), "%s", message);
  }
};

}  // namespace

ncclResult_t runOnLaunchHelpers(int n, HelperJob job, void* ctx) {
  const int nHelped = std::min(n - 1, settings().maxHelpers);
  if (nHelped <= 0) {
    for (int i = 0; i < n; i++) {
      const ncclResult_t r = job(ctx, i);
      if (r != ncclSuccess) return r;   // its message is already this thread's
    }
    return ncclSuccess;
  }
  Pool* p = pool();
  Helper* posted[kMaxHelpers];
  Helper* asleep[kMaxHelpers];
  for (int i = 0; i < nHelped; i++) {
    posted[i] = asleep[i] = nullptr;
    Helper* h = helperAt(p, i);
    if (h == nullptr) continue;   // could not be started: the caller runs job i
    int idle = kIdle;
    if (h->state.compare_exchange_strong(idle, kClaimed, std::memory_order_acquire)) {
      h->job = job;
      h->ctx = ctx;
      h->index = i;
      h->state.store(kPosted, std::memory_order_release);
      posted[i] = h;
    } else if (idle == kAsleep) {
      asleep[i] = h;   // busy helpers (another thread's group) are left alone
    }
  }
  // The caller's part first: the jobs past the helpers' share, then those no
  // helper took; then it collects (or takes back) the posted ones.
  FirstFailure failure;
  for (int i = nHelped; i < n; i++) failure.note(i, job(ctx, i), lastErrorMessage());
  for (int i = 0; i < nHelped; i++) {
    if (posted[i]) continue;
    failure.note(i, job(ctx, i), lastErrorMessage());
  }
  char error[kErrorBytes];
  for (int i = 0; i < nHelped; i++) {
    if (!posted[i]) continue;
    const ncclResult_t r = finishPosted(posted[i], job, ctx, i, error);
    failure.note(i, r, error);
  }
  for (int i = 0; i < nHelped; i++)
    if (asleep[i]) wakeHelper(asleep[i]);
  if (failure.result != ncclSuccess) setLastErrorMessage(failure.error);
  return failure.result;
}

uint64_t launchHelperJobs() { return gJobsOnHelpers.load(std::memory_order_relaxed); }
int launchHelpersAsleep() {
  Pool* p = pool();
  int asleep = 0;
  for (int i = 0; i < p->count.load(std::memory_order_acquire); i++)
    asleep += p->helpers[i]->state.load(std::memory_order_acquire) == kAsleep;
  return asleep;
}
uint64_t launchHelperWakeups() { return gHelperWakeups.load(std::memory_order_relaxed); }

}  // namespace uniccl
