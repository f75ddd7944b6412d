// Launch helper threads (core/launch_helpers.h): every job runs exactly once
// per call, a posted job really runs on another thread at the same time as
// the caller's, a sleeping helper costs the caller nothing but its own jobs
// and is awake for the next group, failures come back by lowest index with
// their message, and callers on several threads share the helpers safely.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "common/core/launch_helpers.h"
#include "common/util/debug.h"

namespace uniccl {
namespace {

using Clock = std::chrono::steady_clock;

// How long a test waits for another thread to get somewhere: a minute, far
// past what any machine needs (a thread runs within milliseconds), so that
// no verdict depends on the machine's speed or load.
constexpr std::chrono::milliseconds kPatience(60000);

// Waits until `flag` is set, at most `limit`; true if it was.
bool waitFor(const std::atomic<bool>& flag, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (!flag.load(std::memory_order_acquire)) {
    if (Clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

// Waits until `count()` reaches `target`, at most kPatience.
template <typename Count>
bool waitForCount(Count count, uint64_t target) {
  const auto end = Clock::now() + kPatience;
  while ((uint64_t)count() < target) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

struct CountingJobs {
  std::vector<std::atomic<int>> runs;
  explicit CountingJobs(int n) : runs(n) {}
  static ncclResult_t run(void* ctx, int i) {
    static_cast<CountingJobs*>(ctx)->runs[i].fetch_add(1);
    return ncclSuccess;
  }
};

TEST(LaunchHelpers, EveryJobRunsOnce) {
  for (int n = 0; n <= 9; n++) {
    for (int rep = 0; rep < 50; rep++) {
      CountingJobs jobs(n);
      ASSERT_EQ(runOnLaunchHelpers(n, CountingJobs::run, &jobs), ncclSuccess);
      for (int i = 0; i < n; i++) ASSERT_EQ(jobs.runs[i].load(), 1) << "n=" << n << " job " << i;
    }
  }
}

// Job 0 must start while the caller's job (the last) is still running: it
// can only pass if a helper thread runs job 0.
struct OverlapJobs {
  std::atomic<bool> helperStarted{false};
  std::thread::id ranOn[2];
  bool overlapped = false;
  static ncclResult_t run(void* ctx, int i) {
    auto* o = static_cast<OverlapJobs*>(ctx);
    o->ranOn[i] = std::this_thread::get_id();
    if (i == 0) {
      o->helperStarted.store(true, std::memory_order_release);
    } else {
      o->overlapped = waitFor(o->helperStarted, kPatience);
    }
    return ncclSuccess;
  }
};

// The tests below but the sleeping one run with a helper spin window of ten
// minutes (tests/unit/core/meson.build): a helper never falls asleep between
// two groups however slowly the machine runs them.
TEST(LaunchHelpers, PostedJobRunsOnAnotherThreadAtTheSameTime) {
  CountingJobs first(2);   // starts the helper
  ASSERT_EQ(runOnLaunchHelpers(2, CountingJobs::run, &first), ncclSuccess);
  OverlapJobs o;
  const uint64_t before = launchHelperJobs();
  ASSERT_EQ(runOnLaunchHelpers(2, OverlapJobs::run, &o), ncclSuccess);
  EXPECT_TRUE(o.overlapped);
  EXPECT_NE(o.ranOn[0], std::this_thread::get_id());
  EXPECT_EQ(o.ranOn[1], std::this_thread::get_id());
  EXPECT_EQ(launchHelperJobs(), before + 1);
}

// Run on its own with the default 1 ms spin window (meson.build): it waits
// until the helper is asleep and until it woke, instead of assuming how long
// either takes.
TEST(LaunchHelpersAsleep, SleepingHelperLeavesTheJobToTheCallerAndWakesAfterTheGroup) {
  CountingJobs warm(2);   // starts the helper (it may even fall asleep before this group posts)
  ASSERT_EQ(runOnLaunchHelpers(2, CountingJobs::run, &warm), ncclSuccess);
  ASSERT_TRUE(waitForCount(launchHelpersAsleep, 1)) << "the helper never went to sleep";
  const uint64_t wakeups = launchHelperWakeups();
  struct Where {
    std::thread::id ranOn[2];
    static ncclResult_t run(void* ctx, int i) {
      static_cast<Where*>(ctx)->ranOn[i] = std::this_thread::get_id();
      return ncclSuccess;
    }
  } where;
  ASSERT_EQ(runOnLaunchHelpers(2, Where::run, &where), ncclSuccess);
  EXPECT_EQ(where.ranOn[0], std::this_thread::get_id()) << "a sleeping helper must not be waited for";
  EXPECT_EQ(where.ranOn[1], std::this_thread::get_id());
  EXPECT_TRUE(waitForCount(launchHelperWakeups, wakeups + 1)) << "the caller did not wake the helper after the group";
}

struct FailingJobs {
  std::vector<ncclResult_t> results;
  static ncclResult_t run(void* ctx, int i) {
    auto* f = static_cast<FailingJobs*>(ctx);
    if (f->results[i] != ncclSuccess) WARN("job %d failed on purpose", i);
    return f->results[i];
  }
};

TEST(LaunchHelpers, FirstFailureByIndexWithItsMessage) {
  for (int rep = 0; rep < 20; rep++) {
    FailingJobs f{{ncclSuccess, ncclInvalidArgument, ncclSuccess, ncclSystemError}};
    clearLastError();
    EXPECT_EQ(runOnLaunchHelpers(4, FailingJobs::run, &f), ncclInvalidArgument);
    EXPECT_NE(strstr(lastErrorMessage(), "job 1 failed on purpose"), nullptr) << lastErrorMessage();
    // Only the caller's own job fails.
    FailingJobs last{{ncclSuccess, ncclSuccess, ncclInternalError}};
    clearLastError();
    EXPECT_EQ(runOnLaunchHelpers(3, FailingJobs::run, &last), ncclInternalError);
    EXPECT_NE(strstr(lastErrorMessage(), "job 2 failed on purpose"), nullptr) << lastErrorMessage();
    FailingJobs none{{ncclSuccess, ncclSuccess}};
    EXPECT_EQ(runOnLaunchHelpers(2, FailingJobs::run, &none), ncclSuccess);
  }
}

// A job that throws on a helper thread fails with a message instead of
// ending the process, and the helper goes on serving.
struct ThrowingJobs {
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> helperStarted{false};
  bool onHelper = false;
  static ncclResult_t run(void* ctx, int i) {
    auto* t = static_cast<ThrowingJobs*>(ctx);
    if (i == 1) {   // the caller's: holds the group until the helper took job 0
      waitFor(t->helperStarted, kPatience);
      return ncclSuccess;
    }
    t->onHelper = std::this_thread::get_id() != t->caller;
    t->helperStarted.store(true, std::memory_order_release);
    if (t->onHelper) throw std::bad_alloc();
    return ncclSuccess;   // taken back by the caller: no throw on the API's thread
  }
};

TEST(LaunchHelpers, ThrowingJobOnAHelperFailsTheGroup) {
  for (int rep = 0; rep < 5; rep++) {
    CountingJobs wake(2);   // a group before: the helper is started and free
    ASSERT_EQ(runOnLaunchHelpers(2, CountingJobs::run, &wake), ncclSuccess);
    ThrowingJobs t;
    clearLastError();
    const ncclResult_t r = runOnLaunchHelpers(2, ThrowingJobs::run, &t);
    ASSERT_TRUE(t.helperStarted.load());
    if (!t.onHelper) {
      EXPECT_EQ(r, ncclSuccess);
      continue;
    }
    EXPECT_EQ(r, ncclSystemError);
    EXPECT_NE(strstr(lastErrorMessage(), "launch helper thread: out of host memory"), nullptr) << lastErrorMessage();
    OverlapJobs o;   // and the helper still runs jobs
    ASSERT_EQ(runOnLaunchHelpers(2, OverlapJobs::run, &o), ncclSuccess);
    EXPECT_TRUE(o.overlapped);
    return;
  }
  ADD_FAILURE() << "job 0 never ran on a helper thread in 5 groups";
}

TEST(LaunchHelpers, SeveralCallingThreadsShareTheHelpers) {
  constexpr int kThreads = 4, kCalls = 2000;
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; t++) {
    callers.emplace_back([&, t] {
      for (int k = 0; k < kCalls; k++) {
        const int n = 2 + (k + t) % 4;
        CountingJobs jobs(n);
        if (runOnLaunchHelpers(n, CountingJobs::run, &jobs) != ncclSuccess) bad++;
        for (int i = 0; i < n; i++)
          if (jobs.runs[i].load() != 1) bad++;
      }
    });
  }
  for (std::thread& c : callers) c.join();
  EXPECT_EQ(bad.load(), 0);
}

// A forked child has none of the parent's helper threads: it must neither
// wait for them nor lose jobs, and it gets helpers of its own.
TEST(LaunchHelpers, ForkedChildStartsItsOwnHelpers) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support starting threads after a multi-threaded fork";
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  GTEST_SKIP() << "ThreadSanitizer does not support starting threads after a multi-threaded fork";
#endif
#endif
  CountingJobs warm(2);
  ASSERT_EQ(runOnLaunchHelpers(2, CountingJobs::run, &warm), ncclSuccess);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    OverlapJobs o;
    const bool ok = runOnLaunchHelpers(2, OverlapJobs::run, &o) == ncclSuccess && o.overlapped &&
                    o.ranOn[0] != std::this_thread::get_id();
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace uniccl
