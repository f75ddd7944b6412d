// Host unit tests of the collective-timeout machinery (src/common/watchdog)
// against the scripted fake GPU: the eager tracker, the graph tracker (the
// ids captured launches make per replay, timers, slots and their reuse,
// deferred cleanup, destroy-all), and the watchdog thread aborting a comm.
// Tracker tests drive a fake clock (nowMs arguments); the thread tests use a
// short real timeout and poll interval.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "common/core/comm.h"
#include "common/core/comm_watchdog.h"
#include "common/core/describe_launch.h"
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
// The slot memory of one comm's graph tracker (host and "device" views are
// the same here) and the kernels' side of the graph progress words, played
// by the test exactly as kernel.h computes them.
struct GraphSlots {
  std::vector<dev::GraphProgress> words = std::vector<dev::GraphProgress>(GraphTracker::kSlots);
  std::vector<uint64_t> replays = std::vector<uint64_t>(GraphTracker::kSlots * dev::kMaxChannels, 0);
  void attach(GraphTracker* t) { t->attach(words.data(), words.data(), replays.data()); }
};

struct SimLaunch {
  dev::GraphTrack track{};
  unsigned grid = 0;
  uint64_t ids[dev::kMaxChannels] = {};
  // Block b enters (block range [b0, b1), default all).
  void start(unsigned b0 = 0, unsigned b1 = ~0u) {
    for (unsigned b = b0; b < std::min(b1, grid); b++) {
      uint64_t* counter = &track.replays[b < track.replayBlocks ? b : 0];
      const uint64_t replay = track.index == 1 ? ++*counter : *counter;
      ids[b] = (replay << dev::kGraphIndexBits) | track.index;
      __atomic_store_n(&track.words->started[b], ids[b], __ATOMIC_RELAXED);
    }
  }
  void end(unsigned b0 = 0, unsigned b1 = ~0u) {
    for (unsigned b = b0; b < std::min(b1, grid); b++) __atomic_store_n(&track.words->done[b], ids[b], __ATOMIC_RELAXED);
  }
  void run() { start(); end(); }
};

// Captures launches of the given grids (one comm) into a fresh graph.
gpu::Graph captureLaunches(GraphTracker* t, gpu::Stream s, std::vector<unsigned> grids, std::vector<SimLaunch>* out,
                           uint64_t firstSeq = 0) {
  gpu::Graph g = fake::beginCapture(s);
  EXPECT_NE(g, nullptr);
  gpu::CaptureInfo cap;
  EXPECT_EQ(gpu::streamGetCaptureInfo(s, &cap), ncclSuccess);
  EXPECT_EQ(cap.status, gpu::CaptureStatus::Active);
  out->clear();
  for (size_t i = 0; i < grids.size(); i++) {
    SimLaunch l;
    l.grid = grids[i];
    EXPECT_EQ(t->captured(cap, grids[i], descFor(firstSeq + i), &l.track), ncclSuccess);
    out->push_back(l);
  }
  EXPECT_EQ(fake::endCapture(s), g);
  return g;
}

// One comm's graph tracker with its slot memory attached.
class GraphWatch : public Watch {
 protected:
  void SetUp() override {
    Watch::SetUp();
    mem.attach(&t);
  }
  GraphSlots mem;
  GraphTracker t;
  std::vector<SimLaunch> l;
};

TEST_F(Watch, GraphUnattachedTracksNothing) {
  GraphTracker t;
  std::vector<SimLaunch> l;
  gpu::Graph g = captureLaunches(&t, stream, {2}, &l);
  EXPECT_EQ(l[0].track.words, nullptr);
  EXPECT_EQ(t.graphCount(), 0u);
  fake::destroyGraph(g);
}

TEST_F(GraphWatch, GraphLaunchesGetTheirPlaceAndTheFirstGrid) {
  gpu::Graph g = captureLaunches(&t, stream, {3, 8, 2}, &l);
  ASSERT_NE(l[0].track.words, nullptr);
  for (int i = 0; i < 3; i++) {
    EXPECT_EQ(l[i].track.index, (uint32_t)i + 1);
    EXPECT_EQ(l[i].track.replayBlocks, 3u);
    EXPECT_EQ(l[i].track.words, l[0].track.words);      // one slot per graph
    EXPECT_EQ(l[i].track.replays, l[0].track.replays);
  }
  EXPECT_EQ(t.graphCount(), 1u);
  EXPECT_EQ(fake::pendingEventCount(), 0u);             // no events
  EXPECT_EQ(fake::callCount("eventCreate"), 0u);         // (gpu.h has no host-function node to add)
  for (int64_t now = 0; now < 10000; now += 1000) EXPECT_FALSE(t.checkAll(now, 10).timedOut);   // not replayed
  fake::destroyGraph(g);
}

TEST_F(GraphWatch, GraphStateTransitionsAndTimeout) {
  gpu::Graph g = captureLaunches(&t, stream, {2, 2}, &l, 40);
  EXPECT_FALSE(t.checkAll(0, 100).timedOut);
  EXPECT_FALSE(t.checkAll(5000, 100).timedOut);        // replay not begun: nothing runs
  l[0].start();                                         // first launch in progress
  EXPECT_FALSE(t.checkAll(6000, 100).timedOut);
  EXPECT_FALSE(t.checkAll(6100, 100).timedOut);
  l[0].end();                                           // completed: timer off
  EXPECT_FALSE(t.checkAll(6150, 100).timedOut);
  EXPECT_FALSE(t.checkAll(9000, 100).timedOut);
  l[1].start();                                         // second in progress, then stuck past the timeout
  EXPECT_FALSE(t.checkAll(9000, 100).timedOut);
  EXPECT_FALSE(t.checkAll(9100, 100).timedOut);
  TrackerCheck c = t.checkAll(9101, 100);
  ASSERT_TRUE(c.timedOut);
  EXPECT_TRUE(c.inGraph);
  EXPECT_EQ(c.desc.seq, 41u);
  EXPECT_EQ(c.elapsedMs, 101);
  l[1].end();                                           // it completes: no more reports
  EXPECT_FALSE(t.checkAll(20000, 100).timedOut);
  fake::destroyGraph(g);
}

TEST_F(GraphWatch, GraphEveryReplayRestartsTheTimer) {
  gpu::Graph g = captureLaunches(&t, stream, {4}, &l);
  int64_t now = 0;
  // Every replay of the one-launch graph is seen running for 80 ms of a
  // 100 ms timeout, and the next begins before any poll sees it idle: the
  // ids differ per replay, so time never adds up.
  uint64_t lastId = 0;
  for (int r = 0; r < 50; r++) {
    l[0].start();
    EXPECT_NE(l[0].ids[0], lastId);
    lastId = l[0].ids[0];
    EXPECT_FALSE(t.checkAll(now, 100).timedOut) << "replay " << r;
    now += 80;
    EXPECT_FALSE(t.checkAll(now, 100).timedOut) << "replay " << r;
    now += 15;
    l[0].end();
  }
  l[0].start();                                         // a replay that gets stuck does time out
  EXPECT_FALSE(t.checkAll(now, 100).timedOut);
  now += 101;
  EXPECT_TRUE(t.checkAll(now, 100).timedOut);
  l[0].end();
  fake::destroyGraph(g);
}

TEST_F(GraphWatch, GraphBlocksBeyondTheFirstGridAreTrackedToo) {
  // The first launch has 1 block; the second 4: blocks 1-3 take the replay from counter 0.
  gpu::Graph g = captureLaunches(&t, stream, {1, 4}, &l, 7);
  l[0].run();
  l[1].run();
  const uint64_t firstReplayId = l[1].ids[3];
  EXPECT_FALSE(t.checkAll(0, 100).timedOut);
  l[0].run();                                           // replay 2: block 3 of launch 2 hangs
  l[1].start();
  l[1].end(0, 3);
  EXPECT_NE(l[1].ids[3], firstReplayId);
  EXPECT_FALSE(t.checkAll(1000, 100).timedOut);
  TrackerCheck c = t.checkAll(1101, 100);
  ASSERT_TRUE(c.timedOut);
  EXPECT_EQ(c.desc.seq, 8u);
  l[1].end(3, 4);
  EXPECT_FALSE(t.checkAll(5000, 100).timedOut);
  fake::destroyGraph(g);
}

TEST_F(GraphWatch, GraphCleanupIsDeferredToThePoll) {
  const size_t flagsBefore = GraphTracker::liveReleaseFlags();
  gpu::Graph g = captureLaunches(&t, stream, {2, 2, 2}, &l);
  EXPECT_EQ(GraphTracker::liveReleaseFlags(), flagsBefore + 1);
  fake::destroyGraph(g);                               // the user object's destructor: a flag only
  EXPECT_EQ(t.graphCount(), 1u);
  EXPECT_FALSE(t.checkAll(0, 100).timedOut);          // the poll frees it
  EXPECT_EQ(t.graphCount(), 0u);
  EXPECT_EQ(GraphTracker::liveReleaseFlags(), flagsBefore);
}

TEST_F(GraphWatch, GraphSlotsRunOutThenAreReusedFromIdle) {
  std::vector<gpu::Graph> graphs;
  std::vector<SimLaunch> first;
  for (int i = 0; i < GraphTracker::kSlots; i++) {
    graphs.push_back(captureLaunches(&t, stream, {2}, &l, i));
    ASSERT_NE(l[0].track.words, nullptr) << i;
    if (i == 0) first = l;
  }
  gpu::Graph extra = captureLaunches(&t, stream, {2}, &l);
  EXPECT_EQ(l[0].track.words, nullptr);                // no slot left: untracked
  fake::destroyGraph(extra);
  // The first graph's launch is stuck when its graph goes: its slot must not
  // report for the next graph.
  first[0].start();
  fake::destroyGraph(graphs[0]);
  EXPECT_FALSE(t.checkAll(0, 100).timedOut);
  gpu::Graph reuse = captureLaunches(&t, stream, {2}, &l, 999);
  ASSERT_EQ(l[0].track.words, first[0].track.words);  // the freed slot
  EXPECT_FALSE(t.checkAll(500, 100).timedOut);
  EXPECT_FALSE(t.checkAll(1000, 100).timedOut);
  l[0].start();                                         // and it tracks the new graph
  EXPECT_FALSE(t.checkAll(2000, 100).timedOut);
  TrackerCheck c = t.checkAll(2101, 100);
  ASSERT_TRUE(c.timedOut);
  EXPECT_EQ(c.desc.seq, 999u);
  l[0].end();
  fake::destroyGraph(reuse);
  for (size_t i = 1; i < graphs.size(); i++) fake::destroyGraph(graphs[i]);
  EXPECT_FALSE(t.checkAll(3000, 100).timedOut);
  EXPECT_EQ(t.graphCount(), 0u);
}

TEST_F(Watch, GraphDestroyAllFreesEverythingAndGraphsMayOutliveTheTracker) {
  const size_t flagsBefore = GraphTracker::liveReleaseFlags();
  GraphSlots mem;
  gpu::Graph g1, g2;
  std::vector<SimLaunch> l;
  {
    GraphTracker t;
    mem.attach(&t);
    g1 = captureLaunches(&t, stream, {2, 2}, &l);
    g2 = captureLaunches(&t, stream, {1}, &l);
    fake::destroyGraph(g2);                         // released, not yet polled
    EXPECT_EQ(t.graphCount(), 2u);
    t.destroyAll();
    EXPECT_EQ(t.graphCount(), 0u);
  }
  // The comm went first; destroying its graph later only flips its flag.
  fake::destroyGraph(g1);
  GraphTracker t2;
  mem.attach(&t2);
  gpu::Graph g3 = captureLaunches(&t2, stream, {1}, &l);
  fake::destroyGraph(g3);
  EXPECT_FALSE(t2.checkAll(0, 10).timedOut);
  EXPECT_EQ(GraphTracker::liveReleaseFlags(), flagsBefore);
}

TEST_F(Watch, GraphTwoCommsInOneGraphAreTrackedSeparately) {
  GraphSlots memA, memB;
  GraphTracker a, b;
  memA.attach(&a);
  memB.attach(&b);
  gpu::Graph g = fake::beginCapture(stream);
  gpu::CaptureInfo cap;
  ASSERT_EQ(gpu::streamGetCaptureInfo(stream, &cap), ncclSuccess);
  SimLaunch la, lb;
  la.grid = lb.grid = 2;
  ASSERT_EQ(a.captured(cap, 2, descFor(1), &la.track), ncclSuccess);
  ASSERT_EQ(b.captured(cap, 2, descFor(2), &lb.track), ncclSuccess);
  EXPECT_EQ(la.track.index, 1u);
  EXPECT_EQ(lb.track.index, 1u);
  fake::endCapture(stream);
  la.run();
  lb.start();                                       // a done, b stuck
  EXPECT_FALSE(a.checkAll(0, 10).timedOut);
  EXPECT_FALSE(b.checkAll(0, 10).timedOut);
  EXPECT_FALSE(a.checkAll(100, 10).timedOut);
  TrackerCheck c = b.checkAll(100, 10);
  ASSERT_TRUE(c.timedOut);
  EXPECT_EQ(c.desc.seq, 2u);
  lb.end();
  fake::destroyGraph(g);
  EXPECT_FALSE(a.checkAll(200, 10).timedOut);
  EXPECT_FALSE(b.checkAll(200, 10).timedOut);
  EXPECT_EQ(a.graphCount() + b.graphCount(), 0u);
}

TEST_F(GraphWatch, GraphHookFailureLeavesThatGraphUntracked) {
  fake::failNext("graphRetainNewUserObject", ncclUnhandledCudaError);
  gpu::Graph g = captureLaunches(&t, stream, {2}, &l);   // capture goes on
  EXPECT_EQ(l[0].track.words, nullptr);
  fake::destroyGraph(g);
  EXPECT_FALSE(t.checkAll(0, 10).timedOut);
  EXPECT_EQ(t.graphCount(), 0u);
  gpu::Graph g2 = captureLaunches(&t, stream, {2}, &l);  // the next graph is tracked again
  EXPECT_NE(l[0].track.words, nullptr);
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
    // The plan the planner would make: one AllReduce, one launch.
    LaunchPlan plan;
    dev::Work w{};
    w.coll = dev::kCollAllReduce;
    w.c.dtype = ncclFloat32;
    w.c.count = 4096;
    plan.works.push_back(w);
    plan.workSeq.push_back(seq);
    plan.workTask.push_back(0);
    plan.nColl = 1;
    KernelLaunch L;
    L.nWorks = 1;
    L.grid = kGrid;
    plan.launches.push_back(L);
    plan.streams.launch = stream;
    LaunchWatch lw;
    if (!comm->watch) return ncclSuccess;   // launch.cc asks the watchdog only when the comm has a watch
    WorkDesc d;
    describeLaunch(plan, 0, comm->channelsHost[0].ringNext, comm->channelsHost[0].ringPrev, &d);
    ncclResult_t res = watchLaunchBegin(comm->watch.get(), /*captured=*/false, gpu::CaptureInfo{}, kGrid, d, &lw);
    if (res != ncclSuccess) return res;
    lastId = lw.eagerId;
    watchLaunchEnd(comm->watch.get(), kGrid, d, &lw);
    return ncclSuccess;
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
  // Read before the kernel starts: the watchdog times the launch from a
  // poll that saw it running, which a preempted test thread could
  // otherwise read the clock after (then less than the timeout measures).
  auto started = std::chrono::steady_clock::now();
  kernelStarts(lastId);                             // it starts, never ends
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

// Launches with no done event of their own (launch.cc): finalize/destroy
// wait for their progress words.
TEST_F(WatchdogThread, DrainWaitsForTheProgressWords) {
  setenv("UNICCL_WATCHDOG_POLL_MS", "1000000", 1);    // the thread stays asleep
  ASSERT_EQ(watchdogRegister(comm.get(), 10000), ncclSuccess);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(launch(i), ncclSuccess);
    ids.push_back(lastId);
  }
  // Set just before the last launch reports its end: a drain that returns
  // sees it set (a store after kernelEnds raced with the drain's return;
  // TSan's slower run lost that race once).
  std::atomic<bool> ended{false};
  std::thread gpu([&] {
    for (size_t i = 0; i < ids.size(); i++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      kernelStarts(ids[i]);
      if (i + 1 == ids.size()) ended.store(true);
      kernelEnds(ids[i]);
    }
  });
  EXPECT_EQ(watchWaitEagerLaunches(comm->watch.get()), ncclSuccess);
  EXPECT_TRUE(ended.load());                        // not before the last launch reported
  gpu.join();
  EXPECT_EQ(watchdogStatsForTesting().eagerInFlight, 0u);
  EXPECT_EQ(comm->asyncError.load(), ncclSuccess);
  EXPECT_EQ(fake::live().events, 0u);               // the probe event is gone
}

TEST_F(WatchdogThread, DrainAbortsALaunchPastTheTimeoutAndWaitsForItToStop) {
  setenv("UNICCL_WATCHDOG_POLL_MS", "1000000", 1);    // the wait itself must time it
  ASSERT_EQ(watchdogRegister(comm.get(), 50), ncclSuccess);
  ASSERT_EQ(launch(7), ncclSuccess);
  kernelStarts(lastId);                             // stuck until the abort flag rises
  const uint64_t id = lastId;
  std::thread gpu([&] {
    while (__atomic_load_n(&abortWord, __ATOMIC_ACQUIRE) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    kernelEnds(id);                                 // the blocks stop on the flag and report
  });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(watchWaitEagerLaunches(comm->watch.get()), ncclSuccess);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  gpu.join();
  EXPECT_GE(ms, 45.0);
  EXPECT_EQ(comm->asyncError.load(), ncclRemoteError);
  EXPECT_EQ(comm->hostAbort.load(), 1u);
  EXPECT_EQ(watchdogStatsForTesting().eagerInFlight, 0u);
}

TEST_F(WatchdogThread, DrainStopsAtAFaultOnTheGpu) {
  setenv("UNICCL_WATCHDOG_POLL_MS", "1000000", 1);
  ASSERT_EQ(watchdogRegister(comm.get(), 10000), ncclSuccess);
  ASSERT_EQ(launch(9), ncclSuccess);
  kernelStarts(lastId);                             // faulted: never reports its end
  fake::failNext("eventQuery", ncclUnhandledCudaError, 1000000);   // the fault is sticky
  EXPECT_EQ(watchWaitEagerLaunches(comm->watch.get()), ncclUnhandledCudaError);
  fake::failNext("eventQuery", ncclUnhandledCudaError, 0);
  EXPECT_EQ(comm->asyncError.load(), ncclSuccess);  // no timeout fired
  EXPECT_EQ(fake::live().events, 0u);
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
  // Two launches: an AllReduce (seq 77), then an AllGather (seq 78) with a
  // p2p item (seq 90) riding along.
  LaunchPlan plan;
  plan.works.assign(3, dev::Work{});
  plan.works[1].coll = dev::kCollAllGather;
  plan.works[1].c.dtype = ncclFloat32;
  plan.works[1].c.count = 123;
  plan.works[2].coll = dev::kCollP2p;
  plan.workSeq = {77, 78, 90};
  plan.workTask = {0, 1, 2};
  plan.nColl = 2;
  KernelLaunch first, second;
  first.nWorks = 1;
  second.firstWork = 1;
  second.nWorks = 2;
  plan.launches = {first, second};
  WorkDesc d;
  describeLaunch(plan, 1, comm->channelsHost[0].ringNext, comm->channelsHost[0].ringPrev, &d);
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

}  // namespace
}  // namespace uniccl
