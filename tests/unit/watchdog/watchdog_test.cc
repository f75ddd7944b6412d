// Host unit tests of the collective-timeout machinery (src/common/watchdog)
// against the scripted fake GPU: the eager tracker, the graph event tracker's
// state machine (completed / not reached / in progress, replay-counter reset,
// deferred cleanup, destroy-all), and the watchdog thread aborting a comm.
// Tracker tests drive a fake clock (nowMs arguments); the thread tests use a
// short real timeout and poll interval.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

#include "common/core/comm.h"
#include "common/watchdog/eager_tracker.h"
#include "common/watchdog/graph_tracker.h"
#include "common/watchdog/watchdog.h"
#include "fake_gpu.h"

namespace uniccl {
namespace {

class Watch : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    ASSERT_EQ(gpu::streamCreate(&stream), ncclSuccess);
  }
  void TearDown() override { fake::reset(); }
  gpu::Stream stream = nullptr;
};

WorkDesc descFor(uint64_t seq) {
  WorkDesc d;
  d.coll = dev::kCollAllReduce;
  d.dtype = ncclFloat32;
  d.count = 1000 + seq;
  d.seq = seq;
  d.nWorks = 1;
  d.sendPeer = 1;
  d.recvPeer = 1;
  return d;
}

// ------------------------------------------------------------------ eager
// The kernels' side of the launch progress words, played by the test.
struct FakeKernels {
  dev::LaunchProgress words{};
  void start(uint64_t id) { __atomic_store_n(&words.started, id, __ATOMIC_RELAXED); }
  void finish(uint64_t id, unsigned grid, unsigned firstBlock = 0) {
    for (unsigned b = firstBlock; b < grid; b++) __atomic_store_n(&words.done[b], id, __ATOMIC_RELAXED);
  }
};

TEST_F(Watch, EagerUnattachedTracksNothing) {
  EagerTracker t;
  EXPECT_EQ(t.nextId(), 0u);
  t.launched(0, 1, descFor(1));
  EXPECT_EQ(t.inFlight(), 0u);
  EXPECT_FALSE(t.check(100000, 1).timedOut);
}

TEST_F(Watch, EagerQueuedWorkNeverTimesOut) {
  FakeKernels k;
  EagerTracker t;
  t.attach(&k.words);
  t.launched(t.nextId(), 4, descFor(1));
  // Not started: the launch waits behind other work, however long.
  for (int64_t now = 0; now <= 100000; now += 1000) EXPECT_FALSE(t.check(now, 50).timedOut);
  EXPECT_EQ(t.inFlight(), 1u);
}

TEST_F(Watch, EagerTimesOutOnlyAfterStartPlusTimeout) {
  FakeKernels k;
  EagerTracker t;
  t.attach(&k.words);
  const uint64_t id = t.nextId();
  EXPECT_EQ(id, 1u);
  t.launched(id, 2, descFor(7));
  EXPECT_FALSE(t.check(1000, 50).timedOut);      // queued from t=0 to t=1000
  k.start(id);                                    // running from now on
  EXPECT_FALSE(t.check(2000, 50).timedOut);       // first seen running
  k.finish(id, 1);                                // block 0 ended, block 1 did not
  EXPECT_FALSE(t.check(2050, 50).timedOut);       // exactly the timeout: not yet
  TrackerCheck c = t.check(2051, 50);
  ASSERT_TRUE(c.timedOut);
  EXPECT_FALSE(c.inGraph);
  EXPECT_EQ(c.desc.seq, 7u);
  EXPECT_EQ(c.desc.count, 1007u);
  EXPECT_EQ(c.elapsedMs, 51);
  EXPECT_FALSE(t.check(5000, 0).timedOut);        // timeout 0: never
  k.finish(id, 2, 1);                             // the last block ends (abort): retired
  EXPECT_FALSE(t.check(6000, 50).timedOut);
  EXPECT_EQ(t.inFlight(), 0u);
}

TEST_F(Watch, EagerCompletedInTimeRetires) {
  FakeKernels k;
  EagerTracker t;
  t.attach(&k.words);
  std::mt19937 rng(12345);
  int64_t now = 0;
  for (int i = 0; i < 500; i++) {
    int batch = 1 + (int)(rng() % 5);
    std::vector<std::pair<uint64_t, unsigned>> ids;
    for (int b = 0; b < batch; b++) {
      uint64_t id = t.nextId();
      unsigned grid = 1 + (unsigned)(rng() % dev::kMaxChannels);
      t.launched(id, grid, descFor(i));
      ids.push_back({id, grid});
    }
    // The GPU runs them one after another, each within the timeout; a later
    // launch with fewer blocks leaves older ids in the higher done words.
    for (auto [id, grid] : ids) {
      k.start(id);
      now += 10;
      EXPECT_FALSE(t.check(now, 50).timedOut);
      now += 30;
      EXPECT_FALSE(t.check(now, 50).timedOut);
      k.finish(id, grid);
    }
    now += 1000;   // idle: nothing runs, nothing times out
    EXPECT_FALSE(t.check(now, 50).timedOut);
    EXPECT_EQ(t.inFlight(), 0u);
  }
}

TEST_F(Watch, EagerTimerFollowsTheHeadLaunch) {
  FakeKernels k;
  EagerTracker t;
  t.attach(&k.words);
  uint64_t ids[3];
  for (int i = 0; i < 3; i++) {
    ids[i] = t.nextId();
    t.launched(ids[i], 3, descFor(100 + i));
  }
  k.start(ids[0]);                                 // #100 starts
  EXPECT_FALSE(t.check(0, 100).timedOut);
  k.finish(ids[0], 3);                             // #100 ends
  EXPECT_FALSE(t.check(90, 100).timedOut);         // #101 queued (not started): no timer
  k.start(ids[1]);                                 // #101 starts
  EXPECT_FALSE(t.check(150, 100).timedOut);        // 0 ms for #101, though 150 since #100 began
  EXPECT_FALSE(t.check(250, 100).timedOut);
  TrackerCheck c = t.check(251, 100);
  ASSERT_TRUE(c.timedOut);
  EXPECT_EQ(c.desc.seq, 101u);
  EXPECT_EQ(t.inFlight(), 2u);
}

// ------------------------------------------------------------------ graphs

// Captures `n` tracked launches of one comm into a fresh graph.
gpu::Graph captureLaunches(GraphEventTracker* t, gpu::Stream s, int n, uint64_t firstSeq = 0) {
  gpu::Graph g = fake::beginCapture(s);
  EXPECT_NE(g, nullptr);
  gpu::CaptureInfo cap;
  EXPECT_EQ(gpu::streamGetCaptureInfo(s, &cap), ncclSuccess);
  EXPECT_EQ(cap.status, gpu::CaptureStatus::Active);
  for (int i = 0; i < n; i++) {
    GraphEventTracker::Captured c;
    EXPECT_EQ(t->recordStart(s, cap, &c), ncclSuccess);
    EXPECT_NE(c.start, nullptr);
    gpu::LaunchConfig cfg;
    cfg.stream = s;
    static int kernel;
    EXPECT_EQ(gpu::launchWithDoneEvent(&kernel, cfg, nullptr, nullptr), ncclSuccess);
    EXPECT_EQ(t->recordEnd(s, &c, descFor(firstSeq + i)), ncclSuccess);
  }
  EXPECT_EQ(fake::endCapture(s), g);
  return g;
}

TEST_F(Watch, GraphBeforeReplayEverythingIsCompleted) {
  GraphEventTracker t;
  gpu::Graph g = captureLaunches(&t, stream, 2);
  EXPECT_EQ(t.graphCount(), 1u);
  EXPECT_EQ(t.eventCount(), 4u);
  EXPECT_EQ(fake::pendingEventCount(), 0u);
  for (int64_t now = 0; now < 10000; now += 1000) EXPECT_FALSE(t.checkAll(now, 10).timedOut);
  fake::destroyGraph(g);
}

TEST_F(Watch, GraphStateTransitionsAndTimeout) {
  GraphEventTracker t;
  gpu::Graph g = captureLaunches(&t, stream, 2, 40);
  fake::replayGraph(g);                               // host node, then 4 external records pending
  EXPECT_EQ(fake::pendingEventCount(), 4u);
  // Not reached: both pending, for any time.
  EXPECT_FALSE(t.checkAll(0, 100).timedOut);
  EXPECT_FALSE(t.checkAll(5000, 100).timedOut);
  // First launch in progress.
  fake::completeOldest(1);
  EXPECT_FALSE(t.checkAll(6000, 100).timedOut);
  EXPECT_FALSE(t.checkAll(6100, 100).timedOut);
  // Completed: timer off; the second is not reached yet.
  fake::completeOldest(1);
  EXPECT_FALSE(t.checkAll(6150, 100).timedOut);
  EXPECT_FALSE(t.checkAll(9000, 100).timedOut);
  // Second in progress, then stuck past the timeout.
  fake::completeOldest(1);
  EXPECT_FALSE(t.checkAll(9000, 100).timedOut);
  EXPECT_FALSE(t.checkAll(9100, 100).timedOut);
  TrackerCheck c = t.checkAll(9101, 100);
  ASSERT_TRUE(c.timedOut);
  EXPECT_TRUE(c.inGraph);
  EXPECT_EQ(c.desc.seq, 41u);
  EXPECT_EQ(c.elapsedMs, 101);
  // It completes: no more reports.
  fake::completeOldest(1);
  EXPECT_FALSE(t.checkAll(20000, 100).timedOut);
  fake::destroyGraph(g);
}

TEST_F(Watch, GraphReplayCounterResetsTimers) {
  GraphEventTracker t;
  gpu::Graph g = captureLaunches(&t, stream, 1);
  int64_t now = 0;
  // Every replay is seen in progress for 80 ms of a 100 ms timeout, and the
  // next replay begins before its end is observed: time must not add up.
  fake::replayGraph(g);
  fake::completeOldest(1);   // start of replay 1
  for (int r = 0; r < 50; r++) {
    EXPECT_FALSE(t.checkAll(now, 100).timedOut) << "replay " << r;
    now += 80;
    EXPECT_FALSE(t.checkAll(now, 100).timedOut) << "replay " << r;
    now += 15;
    // The next replay's host node runs (counter moves); its records re-arm
    // the events: the start completes at once, the end stays pending.
    fake::completeOldest(1);   // end of this replay
    fake::replayGraph(g);
    fake::completeOldest(1);   // start of the next replay
  }
  // Without a new replay the same stuck launch does time out.
  EXPECT_FALSE(t.checkAll(now, 100).timedOut);
  now += 101;
  EXPECT_TRUE(t.checkAll(now, 100).timedOut);
  fake::completeOldest(1);
  fake::destroyGraph(g);
}

TEST_F(Watch, GraphCounterMovedWhileStillInProgressRestartsTimer) {
  GraphEventTracker t;
  gpu::Graph g = captureLaunches(&t, stream, 1);
  fake::replayGraph(g);
  fake::completeOldest(1);
  EXPECT_FALSE(t.checkAll(0, 100).timedOut);
  EXPECT_FALSE(t.checkAll(90, 100).timedOut);
  fake::completeOldest(1);                          // end of replay 1
  fake::replayGraph(g);                             // replay 2: counter moves
  fake::completeOldest(1);                          // start of replay 2
  EXPECT_FALSE(t.checkAll(150, 100).timedOut);      // 150 ms since the first start, but a new replay
  EXPECT_FALSE(t.checkAll(250, 100).timedOut);
  EXPECT_TRUE(t.checkAll(251, 100).timedOut);
  fake::completeOldest(1);
  fake::destroyGraph(g);
}

TEST_F(Watch, GraphCleanupIsDeferredToThePoll) {
  fake::Live before = fake::live();
  size_t graphEventsBefore = GraphEventTracker::liveEventsAllTrackers();
  GraphEventTracker t;
  gpu::Graph g = captureLaunches(&t, stream, 3);
  fake::replayGraph(g);
  fake::completeOldest(6);
  EXPECT_EQ(fake::live().events, before.events + 6);
  EXPECT_EQ(GraphEventTracker::liveEventsAllTrackers(), graphEventsBefore + 6);
  fake::destroyGraph(g);                            // the user object's destructor: a flag only
  EXPECT_EQ(t.graphCount(), 1u);
  EXPECT_EQ(fake::live().events, before.events + 6);
  EXPECT_FALSE(t.checkAll(0, 100).timedOut);        // the poll frees it
  EXPECT_EQ(t.graphCount(), 0u);
  EXPECT_EQ(fake::live().events, before.events);
  EXPECT_EQ(GraphEventTracker::liveEventsAllTrackers(), graphEventsBefore);
}

TEST_F(Watch, GraphManyCaptureDestroyCyclesDoNotGrow) {
  GraphEventTracker t;
  fake::Live before = fake::live();
  for (int i = 0; i < 100; i++) {
    gpu::Graph g = captureLaunches(&t, stream, 1 + i % 3);
    fake::replayGraph(g);
    fake::completeOldest(2 * (1 + i % 3));
    EXPECT_FALSE(t.checkAll(i, 100).timedOut);
    fake::destroyGraph(g);
    if (i % 2 == 0) {
      EXPECT_FALSE(t.checkAll(i, 100).timedOut);   // otherwise two graphs await cleanup
    }
  }
  EXPECT_FALSE(t.checkAll(1000, 100).timedOut);
  EXPECT_EQ(t.graphCount(), 0u);
  EXPECT_EQ(fake::live().events, before.events);
  EXPECT_EQ(fake::live().graphs, before.graphs);
}

TEST_F(Watch, GraphDestroyAllFreesEverythingAndGraphsMayOutliveTheTracker) {
  fake::Live before = fake::live();
  gpu::Graph g1, g2;
  {
    GraphEventTracker t;
    g1 = captureLaunches(&t, stream, 2);
    g2 = captureLaunches(&t, stream, 1);
    fake::destroyGraph(g2);                         // released, not yet polled
    EXPECT_EQ(t.graphCount(), 2u);
    t.destroyAll();
    EXPECT_EQ(t.graphCount(), 0u);
    EXPECT_EQ(fake::live().events, before.events);
  }
  // The comm went first; destroying its graph later only flips the slot's flag.
  fake::destroyGraph(g1);
  // Slots are reused afterwards.
  GraphEventTracker t2;
  gpu::Graph g3 = captureLaunches(&t2, stream, 1);
  fake::destroyGraph(g3);
  EXPECT_FALSE(t2.checkAll(0, 10).timedOut);
  EXPECT_EQ(fake::live().events, before.events);
}

TEST_F(Watch, GraphTwoCommsInOneGraphAreTrackedSeparately) {
  GraphEventTracker a, b;
  gpu::Graph g = fake::beginCapture(stream);
  gpu::CaptureInfo cap;
  ASSERT_EQ(gpu::streamGetCaptureInfo(stream, &cap), ncclSuccess);
  for (GraphEventTracker* t : {&a, &b}) {
    GraphEventTracker::Captured c;
    ASSERT_EQ(t->recordStart(stream, cap, &c), ncclSuccess);
    ASSERT_EQ(t->recordEnd(stream, &c, descFor(t == &a ? 1 : 2)), ncclSuccess);
  }
  fake::endCapture(stream);
  fake::replayGraph(g);
  fake::completeOldest(3);                          // a done, b started
  EXPECT_FALSE(a.checkAll(0, 10).timedOut);
  EXPECT_FALSE(b.checkAll(0, 10).timedOut);
  EXPECT_FALSE(a.checkAll(100, 10).timedOut);
  TrackerCheck c = b.checkAll(100, 10);
  ASSERT_TRUE(c.timedOut);
  EXPECT_EQ(c.desc.seq, 2u);
  fake::completeOldest(1);
  fake::destroyGraph(g);
  EXPECT_FALSE(a.checkAll(200, 10).timedOut);
  EXPECT_FALSE(b.checkAll(200, 10).timedOut);
  EXPECT_EQ(a.graphCount() + b.graphCount(), 0u);
}

TEST_F(Watch, GraphHookFailureTurnsTrackingOffForThatGraphOnly) {
  GraphEventTracker t;
  fake::Live before = fake::live();
  fake::failNext("captureAddHostNode", ncclUnhandledCudaError);
  gpu::Graph g = fake::beginCapture(stream);
  gpu::CaptureInfo cap;
  ASSERT_EQ(gpu::streamGetCaptureInfo(stream, &cap), ncclSuccess);
  GraphEventTracker::Captured c;
  ASSERT_EQ(t.recordStart(stream, cap, &c), ncclSuccess);   // capture goes on
  EXPECT_EQ(c.start, nullptr);
  ASSERT_EQ(t.recordEnd(stream, &c, descFor(1)), ncclSuccess);
  fake::endCapture(stream);
  EXPECT_EQ(fake::live().events, before.events);
  fake::destroyGraph(g);
  EXPECT_FALSE(t.checkAll(0, 10).timedOut);
  EXPECT_EQ(t.graphCount(), 0u);
  // The next graph is tracked again.
  gpu::Graph g2 = captureLaunches(&t, stream, 1);
  EXPECT_EQ(t.eventCount(), 2u);
  fake::destroyGraph(g2);
}

// ------------------------------------------------------------------ watchdog

class WatchdogThread : public Watch {
 protected:
  void SetUp() override {
    Watch::SetUp();
    comm.reset(new ncclComm());
    comm->rank = 0;
    comm->nRanks = 2;
    comm->gpuDev = 0;
    comm->commHash = 0xabcdef;
    comm->channelsHost[0].ringNext = 1;
    comm->channelsHost[0].ringPrev = 1;
    abortWord = 0;
    comm->abortFlagHost = &abortWord;
    comm->asyncError.store(ncclSuccess);
    comm->state.store(CommState::Ready);
  }
  void TearDown() override {
    watchdogUnregister(comm.get());
    comm->abortFlagHost = nullptr;
    comm.reset();
    unsetenv("UNICCL_WATCHDOG_POLL_MS");
    Watch::TearDown();
  }
  ncclResult_t launch(uint64_t seq) {
    comm->tasks.colls.clear();
    Task t{};
    t.kind = TaskKind::AllReduce;
    t.seq = seq;
    comm->tasks.colls.push_back(t);
    comm->workScratch.assign(1, dev::Work{});
    dev::Work& w = comm->workScratch[0];
    w.coll = dev::kCollAllReduce;
    w.c.dtype = ncclFloat32;
    w.c.count = 4096;
    LaunchStreams s;
    s.launch = stream;
    LaunchWatch lw;
    ncclResult_t res = watchLaunchBegin(comm.get(), s, &lw);
    if (res != ncclSuccess) return res;
    lastId = lw.eagerId;
    return watchLaunchEnd(comm.get(), s, comm->workScratch.data(), 1, kGrid, &lw);
  }
  // The kernel of launch `id` starts / ends (what its blocks write).
  dev::LaunchProgress* words() { return static_cast<dev::LaunchProgress*>(comm->watch->progressHost); }
  void kernelStarts(uint64_t id) { __atomic_store_n(&words()->started, id, __ATOMIC_RELAXED); }
  void kernelEnds(uint64_t id) {
    for (unsigned b = 0; b < kGrid; b++) __atomic_store_n(&words()->done[b], id, __ATOMIC_RELAXED);
  }
  static constexpr unsigned kGrid = 2;
  uint64_t lastId = 0;
  bool waitFor(std::function<bool()> pred, int ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return pred();
  }
  std::unique_ptr<ncclComm> comm;
  volatile uint32_t abortWord = 0;
};

TEST_F(WatchdogThread, TimeoutAbortsTheComm) {
  setenv("UNICCL_WATCHDOG_POLL_MS", "5", 1);
  uint64_t timeoutsBefore = watchdogStatsForTesting().timeouts;
  ASSERT_EQ(watchdogRegister(comm.get(), 60), ncclSuccess);
  EXPECT_TRUE(watchdogStatsForTesting().threadRunning);
  ASSERT_EQ(launch(42), ncclSuccess);
  kernelStarts(lastId);                             // it starts, never ends
  auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(waitFor([&] { return comm->asyncError.load() != ncclSuccess; }, 5000));
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  EXPECT_GE(ms, 55.0);                              // not before the timeout
  EXPECT_EQ(comm->asyncError.load(), ncclRemoteError);
  EXPECT_EQ(comm->hostAbort.load(), 1u);
  EXPECT_EQ(__atomic_load_n(&abortWord, __ATOMIC_ACQUIRE), 1u);
  EXPECT_EQ(watchdogStatsForTesting().timeouts, timeoutsBefore + 1);
  // The kernel exits (abort flag): the launch is retired, no second report.
  kernelEnds(lastId);
  ASSERT_TRUE(waitFor([&] { return watchdogStatsForTesting().eagerInFlight == 0; }, 2000));
  EXPECT_EQ(watchdogStatsForTesting().timeouts, timeoutsBefore + 1);
  watchdogUnregister(comm.get());
  EXPECT_FALSE(watchdogStatsForTesting().threadRunning);
  EXPECT_EQ(watchdogStatsForTesting().comms, 0u);
}

TEST_F(WatchdogThread, NoFalseTimeoutWhenWorkCompletesInTime) {
  setenv("UNICCL_WATCHDOG_POLL_MS", "2", 1);
  // 25 ms of work against a 250 ms timeout: a margin that survives a loaded
  // 2-core CI machine oversleeping (a 40 ms timeout once fired there).
  ASSERT_EQ(watchdogRegister(comm.get(), 250), ncclSuccess);
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
  uint64_t seq = 0;
  while (std::chrono::steady_clock::now() < end) {
    ASSERT_EQ(launch(seq++), ncclSuccess);
    kernelStarts(lastId);
    std::this_thread::sleep_for(std::chrono::milliseconds(seq % 3 == 0 ? 25 : 1));   // under the timeout
    kernelEnds(lastId);
  }
  ASSERT_TRUE(waitFor([&] { return watchdogStatsForTesting().eagerInFlight == 0; }, 2000));
  EXPECT_EQ(comm->asyncError.load(), ncclSuccess);
  EXPECT_EQ(comm->hostAbort.load(), 0u);
  EXPECT_EQ(__atomic_load_n(&abortWord, __ATOMIC_ACQUIRE), 0u);
  EXPECT_EQ(fake::pendingEventCount(), 0u);         // eager tracking records no events
}

TEST_F(WatchdogThread, FakeClockPollAndQueuedWork) {
  setenv("UNICCL_WATCHDOG_POLL_MS", "1000000", 1);    // the thread stays asleep: the test polls
  ASSERT_EQ(watchdogRegister(comm.get(), 1000), ncclSuccess);
  ASSERT_EQ(launch(5), ncclSuccess);
  const uint64_t id5 = lastId;
  ASSERT_EQ(launch(6), ncclSuccess);
  const uint64_t id6 = lastId;
  watchdogPollOnce(0);
  watchdogPollOnce(50000);                          // queued: no timer
  EXPECT_EQ(comm->asyncError.load(), ncclSuccess);
  kernelStarts(id5);                                // #5 ran and completed
  kernelEnds(id5);
  kernelStarts(id6);                                // #6 started
  watchdogPollOnce(60000);
  watchdogPollOnce(61000);
  EXPECT_EQ(comm->asyncError.load(), ncclSuccess);
  watchdogPollOnce(61001);
  EXPECT_EQ(comm->asyncError.load(), ncclRemoteError);
  EXPECT_EQ(__atomic_load_n(&abortWord, __ATOMIC_ACQUIRE), 1u);
  kernelEnds(id6);
}

TEST_F(WatchdogThread, DescribeLaunchNamesTheCollective) {
  comm->tasks.colls.clear();
  Task t{};
  t.seq = 77;
  comm->tasks.colls.push_back(t);
  comm->tasks.colls.push_back(t);
  comm->tasks.colls[1].seq = 78;
  comm->workScratch.assign(3, dev::Work{});
  comm->workScratch[1].coll = dev::kCollAllGather;
  comm->workScratch[1].c.dtype = ncclFloat32;
  comm->workScratch[1].c.count = 123;
  comm->workScratch[2].coll = dev::kCollP2p;
  WorkDesc d;
  describeLaunch(comm.get(), &comm->workScratch[1], 2, &d);
  EXPECT_EQ(d.seq, 78u);
  EXPECT_EQ(d.nWorks, 2);
  char buf[256];
  formatWorkDesc(d, buf, sizeof(buf));
  EXPECT_NE(strstr(buf, "AllGather"), nullptr) << buf;
  EXPECT_NE(strstr(buf, "count 123"), nullptr) << buf;
  EXPECT_NE(strstr(buf, "seq 78"), nullptr) << buf;
  EXPECT_NE(strstr(buf, "+1 more"), nullptr) << buf;
}

TEST_F(WatchdogThread, TimeoutZeroRegistersNothing) {
  ASSERT_EQ(watchdogRegister(comm.get(), 0), ncclSuccess);
  EXPECT_EQ(comm->watch, nullptr);
  ASSERT_EQ(launch(1), ncclSuccess);
  EXPECT_EQ(fake::pendingEventCount(), 0u);         // no events recorded at all
}

// Last: turns graph tracking off for the rest of the process.
TEST_F(Watch, ZzGraphWithoutExternalRecordsRunsUntracked) {
  GraphEventTracker t;
  fake::Live before = fake::live();
  fake::failNext("eventRecordExternal", ncclInvalidUsage);
  gpu::Graph g = fake::beginCapture(stream);
  gpu::CaptureInfo cap;
  ASSERT_EQ(gpu::streamGetCaptureInfo(stream, &cap), ncclSuccess);
  GraphEventTracker::Captured c;
  ASSERT_EQ(t.recordStart(stream, cap, &c), ncclSuccess);
  EXPECT_EQ(c.start, nullptr);
  ASSERT_EQ(t.recordEnd(stream, &c, descFor(1)), ncclSuccess);
  EXPECT_TRUE(GraphEventTracker::externalRecordsUnsupported());
  ASSERT_EQ(t.recordStart(stream, cap, &c), ncclSuccess);   // no second attempt
  EXPECT_EQ(fake::callCount("eventRecordExternal"), 1u);
  fake::endCapture(stream);
  fake::destroyGraph(g);
  EXPECT_FALSE(t.checkAll(0, 10).timedOut);
  EXPECT_EQ(fake::live().events, before.events);
}

}  // namespace
}  // namespace uniccl
