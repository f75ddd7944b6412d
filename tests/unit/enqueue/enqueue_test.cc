// Host unit tests of the work FIFO, the event-callback queue, the event pool
// and the kernel launches over them (core/launch.cc), driven by the scripted
// fake GPU (tests/unit/fake).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <thread>
#include <vector>

#include "../core/fake_comm.h"
#include "common/core/comm.h"
#include "common/core/launch.h"
#include "common/enqueue/event_callback_queue.h"
#include "common/enqueue/event_pool.h"
#include "common/enqueue/work_fifo.h"
#include "fake_gpu.h"

namespace uniccl {
namespace {

class Enqueue : public ::testing::Test {
 protected:
  void SetUp() override { fake::reset(); }
  void TearDown() override { fake::reset(); }
};

// What the "GPU" will find at a work's position: random bytes written by the
// host, checked by the consumer through (devBase, offset, mask).
struct Work {
  uint32_t offset;
  uint32_t bytes;
  std::vector<unsigned char> data;
};

struct Consumer {
  explicit Consumer(WorkFifo* f) : fifo(f) {}
  WorkFifo* fifo;
  std::deque<Work> expected;   // in submission order
  uint64_t checked = 0;
  uint64_t mismatches = 0;
  std::vector<uint64_t> order;  // callback values, in the order they ran
};

// The completion callback of one work: the device must have seen the bytes
// the host wrote (read through the device base and the mask), then the room
// is given back.
void consumeWork(void* arg, uint64_t value) {
  auto* c = static_cast<Consumer*>(arg);
  c->order.push_back(value);
  Work w = std::move(c->expected.front());
  c->expected.pop_front();
  const char* dev = static_cast<const char*>(c->fifo->devBase());
  for (uint32_t i = 0; i < w.bytes; ++i) {
    if (static_cast<unsigned char>(dev[(w.offset + i) & c->fifo->mask()]) != w.data[i]) ++c->mismatches;
  }
  ++c->checked;
  c->fifo->markConsumed(w.offset + w.bytes);
}

std::vector<unsigned char> randomBytes(std::mt19937& rng, uint32_t n) {
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng() | 1);  // never zero
  return v;
}

// Reserves, writes, and queues the completion of one work; returns its offset.
uint32_t submit(WorkFifo& fifo, EventPool& pool, EventCallbackQueue& q, Consumer& c,
                std::mt19937& rng, uint32_t bytes, uint64_t value) {
  uint32_t off = 0;
  EXPECT_EQ(fifo.reserve(bytes, &off), ncclSuccess);
  Work w{off, bytes, randomBytes(rng, bytes)};
  fifo.write(off, w.data.data(), bytes);
  c.expected.push_back(std::move(w));
  gpu::Event e = nullptr;
  EXPECT_EQ(pool.get(&e), ncclSuccess);
  EXPECT_EQ(gpu::eventRecord(e, nullptr), ncclSuccess);
  EXPECT_EQ(q.push(e, consumeWork, &c, value), ncclSuccess);
  return off;
}

TEST_F(Enqueue, FifoSizeIsNormalised) {
  EXPECT_EQ(WorkFifo::normalizeBytes(1 << 20), 1u << 20);
  EXPECT_EQ(WorkFifo::normalizeBytes(4096), 4096u);
  EXPECT_EQ(WorkFifo::normalizeBytes(5000), 8192u);
  EXPECT_EQ(WorkFifo::normalizeBytes(100), 4096u);
  EXPECT_EQ(WorkFifo::normalizeBytes(-5), 4096u);
  EXPECT_EQ(WorkFifo::normalizeBytes(int64_t(1) << 40), WorkFifo::kMaxBytes);
  setenv("NCCL_WORK_FIFO_BYTES", "65536", 1);
  EXPECT_EQ(WorkFifo::configuredBytes(), 65536u);
  setenv("NCCL_WORK_FIFO_BYTES", "70000", 1);
  EXPECT_EQ(WorkFifo::configuredBytes(), 131072u);
  unsetenv("NCCL_WORK_FIFO_BYTES");
  EXPECT_EQ(WorkFifo::configuredBytes(), WorkFifo::kDefaultBytes);

  EventCallbackQueue q;
  WorkFifo fifo;
  ASSERT_EQ(fifo.init(10000, &q), ncclSuccess);
  EXPECT_EQ(fifo.capacity(), 16384u);
  EXPECT_EQ(fifo.mask(), 16383u);
  EXPECT_EQ(fake::live().hostAllocs, 1u);
  EXPECT_EQ(fifo.init(4096, &q), ncclInternalError);  // twice
}

TEST_F(Enqueue, FifoMemoryIsFreed) {
  {
    EventCallbackQueue q;
    WorkFifo fifo;
    ASSERT_EQ(fifo.init(4096, &q), ncclSuccess);
    EXPECT_EQ(fake::callCount("hostAllocMapped"), 1u);
  }
  EXPECT_EQ(fake::live().hostAllocs, 0u);
}

TEST_F(Enqueue, FifoInitFailurePropagates) {
  fake::failNext("hostAllocMapped", ncclSystemError);
  EventCallbackQueue q;
  WorkFifo fifo;
  EXPECT_EQ(fifo.init(4096, &q), ncclSystemError);
  uint32_t off;
  EXPECT_EQ(fifo.reserve(64, &off), ncclInternalError);
}

TEST_F(Enqueue, BadReservationsAreRefused) {
  EventCallbackQueue q;
  WorkFifo fifo;
  ASSERT_EQ(fifo.init(4096, &q), ncclSuccess);
  uint32_t off = 12345;
  EXPECT_EQ(fifo.reserve(0, &off), ncclInternalError);
  EXPECT_EQ(fifo.reserve(100, &off), ncclInternalError);
  EXPECT_EQ(fifo.reserve(8192, &off), ncclInternalError);
  EXPECT_EQ(off, 12345u);
  EXPECT_EQ(fifo.produced(), 0u);
}

TEST_F(Enqueue, FullRingWithNothingPendingFailsInsteadOfHanging) {
  EventCallbackQueue q;
  WorkFifo fifo;
  ASSERT_EQ(fifo.init(4096, &q), ncclSuccess);
  uint32_t off;
  ASSERT_EQ(fifo.reserve(4096, &off), ncclSuccess);  // a full ring is allowed
  EXPECT_EQ(fifo.used(), 4096u);
  EXPECT_EQ(fifo.reserve(64, &off), ncclInternalError);
  EXPECT_EQ(fifo.produced(), 4096u);
}

TEST_F(Enqueue, MarkConsumedOnlyMovesForward) {
  EventCallbackQueue q;
  WorkFifo fifo;
  ASSERT_EQ(fifo.init(4096, &q), ncclSuccess);
  fifo.setCountersForTesting(0xFFFFFF00u);
  uint32_t off;
  ASSERT_EQ(fifo.reserve(1024, &off), ncclSuccess);
  EXPECT_EQ(off, 0xFFFFFF00u);
  EXPECT_EQ(fifo.produced(), 0x300u);  // wrapped
  fifo.markConsumed(0x100u);
  EXPECT_EQ(fifo.consumed(), 0x100u);
  fifo.markConsumed(0xFFFFFF80u);  // stale: before the current value
  EXPECT_EQ(fifo.consumed(), 0x100u);
  fifo.markConsumed(0x400u);       // beyond produced: ignored
  EXPECT_EQ(fifo.consumed(), 0x100u);
  fifo.markConsumed(0x300u);
  EXPECT_EQ(fifo.consumed(), 0x300u);
  EXPECT_EQ(fifo.used(), 0u);
}

TEST_F(Enqueue, CountersWrapAt2To32) {
  std::mt19937 rng(20251103);
  EventPool pool;
  EventCallbackQueue q(&pool);
  WorkFifo fifo;
  ASSERT_EQ(fifo.init(8192, &q), ncclSuccess);
  const uint32_t start = 0u - 8192u * 3 - 192u;  // a few laps before the wrap, unaligned to the ring
  fifo.setCountersForTesting(start);
  Consumer c(&fifo);
  fake::setSyncHook([](gpu::Event) { fake::completeOldest(); });

  uint32_t expectedOffset = start;
  bool crossed = false;
  for (uint64_t i = 0; i < 2000; ++i) {
    const uint32_t bytes = 64u * (1 + rng() % 24);
    const uint32_t off = submit(fifo, pool, q, c, rng, bytes, i);
    ASSERT_EQ(off, expectedOffset) << "work " << i;
    ASSERT_EQ(static_cast<char*>(fifo.hostPtr(off)) - static_cast<char*>(fifo.hostPtr(0)),
              static_cast<ptrdiff_t>(off & fifo.mask()));
    expectedOffset += bytes;
    crossed |= fifo.produced() < start;
    if (rng() % 3 == 0) fake::completeOldest(1 + rng() % 3);
    ASSERT_EQ(q.poll(false), ncclSuccess);
  }
  ASSERT_EQ(q.drain(), ncclSuccess);
  EXPECT_TRUE(crossed);
  EXPECT_EQ(c.checked, 2000u);
  EXPECT_EQ(c.mismatches, 0u);
  EXPECT_EQ(fifo.consumed(), fifo.produced());
  for (uint64_t i = 0; i < c.order.size(); ++i) ASSERT_EQ(c.order[i], i);
}

TEST_F(Enqueue, FullRingBlocksOnTheOldestEvent) {
  std::mt19937 rng(7);
  EventPool pool;
  EventCallbackQueue q(&pool);
  WorkFifo fifo;
  ASSERT_EQ(fifo.init(4096, &q), ncclSuccess);
  Consumer c(&fifo);
  for (uint64_t i = 0; i < 4; ++i) submit(fifo, pool, q, c, rng, 1024, i);
  EXPECT_EQ(fifo.used(), 4096u);
  EXPECT_EQ(fake::pendingEventCount(), 4u);

  // "The GPU finishes the oldest launch now", once, when the host blocks.
  std::vector<uint64_t> waitedOn;
  fake::setSyncHook([&](gpu::Event e) {
    waitedOn.push_back(fake::eventSerial(e));
    fake::completeOldest();
  });
  const uint64_t syncsBefore = fake::callCount("eventSynchronize");
  uint32_t off = 0;
  ASSERT_EQ(fifo.reserve(1024, &off), ncclSuccess);
  EXPECT_EQ(off, 4096u);
  EXPECT_EQ(fake::callCount("eventSynchronize") - syncsBefore, 1u);
  ASSERT_EQ(waitedOn.size(), 1u);
  EXPECT_EQ(waitedOn[0], 1u);  // the oldest record
  EXPECT_EQ(c.order, std::vector<uint64_t>({0}));
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(fake::pendingEventCount(), 3u);
  EXPECT_EQ(fifo.consumed(), 1024u);

  // A reservation needing two completions blocks twice, in order.
  c.expected.push_back(Work{off, 1024, std::vector<unsigned char>(1024, 0)});
  std::memset(fifo.hostPtr(off), 0, 1024);
  gpu::Event e;
  ASSERT_EQ(pool.get(&e), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(e, nullptr), ncclSuccess);
  ASSERT_EQ(q.push(e, consumeWork, &c, 4), ncclSuccess);
  ASSERT_EQ(fifo.reserve(2048, &off), ncclSuccess);
  EXPECT_EQ(off, 5120u);
  EXPECT_EQ(c.order, std::vector<uint64_t>({0, 1, 2}));
  EXPECT_EQ(waitedOn, std::vector<uint64_t>({1, 2, 3}));
  EXPECT_EQ(c.mismatches, 0u);
  fifo.markConsumed(fifo.produced());  // the un-queued 2048 bytes
  ASSERT_EQ(q.drain(), ncclSuccess);
  EXPECT_EQ(c.order, std::vector<uint64_t>({0, 1, 2, 3, 4}));
}

TEST_F(Enqueue, BlockedReserveWithAGpuThatNeverFinishesFails) {
  std::mt19937 rng(3);
  EventPool pool;
  EventCallbackQueue q(&pool);
  WorkFifo fifo;
  ASSERT_EQ(fifo.init(4096, &q), ncclSuccess);
  Consumer c(&fifo);
  submit(fifo, pool, q, c, rng, 4096, 0);
  fake::setSyncTimeoutMs(50);  // the fake's stand-in for a hang
  uint32_t off;
  EXPECT_EQ(fifo.reserve(64, &off), ncclInternalError);
  EXPECT_EQ(q.size(), 1u);
  fake::completeOldest();
  ASSERT_EQ(fifo.reserve(64, &off), ncclSuccess);
  EXPECT_EQ(off, 4096u);
}

TEST_F(Enqueue, HundredThousandSmallWorks) {
  std::mt19937 rng(12345);
  EventPool pool;
  EventCallbackQueue q(&pool);
  WorkFifo fifo;
  ASSERT_EQ(fifo.init(65536, &q), ncclSuccess);
  fifo.setCountersForTesting(0u - 1000u * 64u);
  Consumer c(&fifo);
  fake::setSyncHook([](gpu::Event) { fake::completeOldest(); });
  constexpr uint64_t kWorks = 100000;
  for (uint64_t i = 0; i < kWorks; ++i) {
    submit(fifo, pool, q, c, rng, 64u * (1 + rng() % 16), i);
    // The GPU lags behind by a varying amount.
    if (fake::pendingEventCount() > 8 + rng() % 32) fake::completeOldest(1 + rng() % 8);
    if (i % 4 == 0) {
      ASSERT_EQ(q.poll(false), ncclSuccess);
    }
    ASSERT_LE(fifo.used(), fifo.capacity());
  }
  ASSERT_EQ(q.drain(), ncclSuccess);
  EXPECT_EQ(c.checked, kWorks);
  EXPECT_EQ(c.mismatches, 0u);
  ASSERT_EQ(c.order.size(), kWorks);
  for (uint64_t i = 0; i < kWorks; ++i) ASSERT_EQ(c.order[i], i);
  EXPECT_EQ(fifo.consumed(), fifo.produced());
  EXPECT_LT(pool.created(), 64u);  // events recycled, not one per work
  EXPECT_EQ(fake::live().events, pool.created());
}

struct Recorder {
  std::vector<uint64_t> ran;
  std::vector<void*> args;
};
void record(void* arg, uint64_t value) { static_cast<Recorder*>(arg)->ran.push_back(value); }

TEST_F(Enqueue, CallbacksRunInPushOrderEvenWhenLaterEventsCompleteFirst) {
  EventPool pool;
  EventCallbackQueue q(&pool);
  Recorder r;
  std::vector<gpu::Event> ev(6);
  for (uint64_t i = 0; i < ev.size(); ++i) {
    ASSERT_EQ(pool.get(&ev[i]), ncclSuccess);
    ASSERT_EQ(gpu::eventRecord(ev[i], nullptr), ncclSuccess);
    ASSERT_EQ(q.push(ev[i], record, &r, 100 + i), ncclSuccess);
  }
  fake::completeEvent(ev[4]);
  fake::completeEvent(ev[3]);
  fake::completeEvent(ev[5]);
  ASSERT_EQ(q.poll(false), ncclSuccess);
  EXPECT_TRUE(r.ran.empty());
  EXPECT_EQ(q.size(), 6u);
  fake::completeEvent(ev[0]);
  ASSERT_EQ(q.poll(false), ncclSuccess);
  EXPECT_EQ(r.ran, std::vector<uint64_t>({100}));
  fake::completeEvent(ev[2]);
  ASSERT_EQ(q.poll(false), ncclSuccess);
  EXPECT_EQ(r.ran, std::vector<uint64_t>({100}));
  fake::completeEvent(ev[1]);
  ASSERT_EQ(q.poll(false), ncclSuccess);
  EXPECT_EQ(r.ran, std::vector<uint64_t>({100, 101, 102, 103, 104, 105}));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(pool.available(), 6u);
}

TEST_F(Enqueue, WaitSomeRunsTheOldestAndWhateverElseCompleted) {
  EventPool pool;
  EventCallbackQueue q(&pool);
  Recorder r;
  std::vector<gpu::Event> ev(4);
  for (uint64_t i = 0; i < ev.size(); ++i) {
    ASSERT_EQ(pool.get(&ev[i]), ncclSuccess);
    ASSERT_EQ(gpu::eventRecord(ev[i], nullptr), ncclSuccess);
    ASSERT_EQ(q.push(ev[i], record, &r, i), ncclSuccess);
  }
  fake::completeEvent(ev[1]);
  fake::completeEvent(ev[2]);
  int hookCalls = 0;
  fake::setSyncHook([&](gpu::Event e) {
    ++hookCalls;
    EXPECT_EQ(e, ev[0]);
    fake::completeEvent(e);
  });
  ASSERT_EQ(q.poll(true), ncclSuccess);
  EXPECT_EQ(hookCalls, 1);
  EXPECT_EQ(r.ran, std::vector<uint64_t>({0, 1, 2}));
  EXPECT_EQ(q.size(), 1u);
  // With something already complete, waitSome does not block.
  fake::completeEvent(ev[3]);
  ASSERT_EQ(q.poll(true), ncclSuccess);
  EXPECT_EQ(hookCalls, 1);
  EXPECT_EQ(r.ran.size(), 4u);
}

TEST_F(Enqueue, EventPoolReusesWithoutGrowingInSteadyState) {
  std::mt19937 rng(99);
  size_t createdAfterWarmup = 0, nodesAfterWarmup = 0;
  uint64_t createCallsAfterWarmup = 0;
  {
    EventPool pool;
    EventCallbackQueue q(&pool);
    Recorder r;
    ASSERT_EQ(pool.reserve(16), ncclSuccess);
    EXPECT_EQ(pool.created(), 16u);
    EXPECT_EQ(pool.available(), 16u);
    for (int round = 0; round < 2000; ++round) {
      // Up to 16 works in flight, then the GPU catches up.
      const int inFlight = 1 + rng() % 16;
      for (int k = 0; k < inFlight; ++k) {
        gpu::Event e;
        ASSERT_EQ(pool.get(&e), ncclSuccess);
        ASSERT_EQ(gpu::eventRecord(e, nullptr), ncclSuccess);
        ASSERT_EQ(q.push(e, record, &r, round), ncclSuccess);
      }
      fake::completeOldest(inFlight);
      ASSERT_EQ(q.poll(false), ncclSuccess);
      ASSERT_TRUE(q.empty());
      if (round == 10) {
        createdAfterWarmup = pool.created();
        nodesAfterWarmup = q.nodesAllocated();
        createCallsAfterWarmup = fake::callCount("eventCreate");
      }
    }
    EXPECT_EQ(pool.created(), 16u);
    EXPECT_EQ(pool.created(), createdAfterWarmup);
    EXPECT_EQ(q.nodesAllocated(), nodesAfterWarmup);
    EXPECT_EQ(fake::callCount("eventCreate"), createCallsAfterWarmup);
    EXPECT_EQ(pool.available(), 16u);
    // Beyond the reserve the pool grows on demand.
    std::vector<gpu::Event> held(20);
    for (auto& e : held) ASSERT_EQ(pool.get(&e), ncclSuccess);
    EXPECT_EQ(pool.created(), 20u);
    for (auto e : held) pool.put(e);
    EXPECT_EQ(fake::live().events, 20u);
  }
  EXPECT_EQ(fake::live().events, 0u);  // the pool destroyed every event it made
}

TEST_F(Enqueue, EventPoolPassesFlagsAndCreationErrors) {
  EventPool timing(gpu::kEventDefault);
  fake::failNext("eventCreate", ncclUnhandledCudaError);
  gpu::Event e = nullptr;
  EXPECT_EQ(timing.get(&e), ncclUnhandledCudaError);
  EXPECT_EQ(timing.created(), 0u);
  gpu::Event a;
  ASSERT_EQ(timing.get(&a), ncclSuccess);
  EXPECT_EQ(fake::eventFlags(a), (unsigned)gpu::kEventDefault);  // timing events really were asked for
  EventPool done;  // default flavour: timing disabled
  gpu::Event c;
  ASSERT_EQ(done.get(&c), ncclSuccess);
  EXPECT_EQ(fake::eventFlags(c), (unsigned)gpu::kEventDisableTiming);
}

TEST_F(Enqueue, EventQueryErrorPropagatesAndKeepsTheNode) {
  EventPool pool;
  EventCallbackQueue q(&pool);
  Recorder r;
  std::vector<gpu::Event> ev(3);
  for (uint64_t i = 0; i < ev.size(); ++i) {
    ASSERT_EQ(pool.get(&ev[i]), ncclSuccess);
    ASSERT_EQ(gpu::eventRecord(ev[i], nullptr), ncclSuccess);
    ASSERT_EQ(q.push(ev[i], record, &r, i), ncclSuccess);
  }
  fake::completeEvent(ev[0]);
  fake::failEvent(ev[1], ncclUnhandledCudaError);
  fake::completeEvent(ev[2]);
  EXPECT_EQ(q.poll(false), ncclUnhandledCudaError);
  EXPECT_EQ(r.ran, std::vector<uint64_t>({0}));
  EXPECT_EQ(q.size(), 2u);
  // The failure is sticky: every later poll reports it, nothing is lost.
  EXPECT_EQ(q.poll(true), ncclUnhandledCudaError);
  EXPECT_EQ(q.drain(), ncclUnhandledCudaError);
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(r.ran.size(), 1u);

  // A transient failure of the query itself: reported once, then polling resumes.
  fake::setEventState(ev[1], fake::EventState::Completed);
  fake::failNext("eventQuery", ncclUnhandledCudaError);
  EXPECT_EQ(q.poll(false), ncclUnhandledCudaError);
  EXPECT_EQ(q.size(), 2u);
  ASSERT_EQ(q.poll(false), ncclSuccess);
  EXPECT_EQ(r.ran, std::vector<uint64_t>({0, 1, 2}));
}

TEST_F(Enqueue, SynchronizeErrorPropagates) {
  EventPool pool;
  EventCallbackQueue q(&pool);
  Recorder r;
  gpu::Event e;
  ASSERT_EQ(pool.get(&e), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(e, nullptr), ncclSuccess);
  ASSERT_EQ(q.push(e, record, &r, 7), ncclSuccess);
  fake::setSyncHook([](gpu::Event ev) { fake::failEvent(ev, ncclUnhandledCudaError); });
  EXPECT_EQ(q.poll(true), ncclUnhandledCudaError);
  EXPECT_TRUE(r.ran.empty());
  EXPECT_EQ(q.size(), 1u);
}

struct Reentrant {
  Reentrant(EventCallbackQueue* queue, gpu::Event e) : q(queue), next(e) {}
  EventCallbackQueue* q;
  gpu::Event next;
  ncclResult_t pollResult = ncclSuccess;
  std::vector<uint64_t> ran;
};
void reenter(void* arg, uint64_t value) {
  auto* r = static_cast<Reentrant*>(arg);
  r->ran.push_back(value);
  if (value == 0) {
    r->pollResult = r->q->poll(false);                            // refused
    EXPECT_EQ(r->q->push(r->next, reenter, r, 1), ncclSuccess);   // allowed
  }
}

TEST_F(Enqueue, CallbacksMayPushButNotPoll) {
  EventCallbackQueue q;
  gpu::Event a, b;
  ASSERT_EQ(gpu::eventCreate(&a), ncclSuccess);
  ASSERT_EQ(gpu::eventCreate(&b), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(a, nullptr), ncclSuccess);
  ASSERT_EQ(gpu::eventRecord(b, nullptr), ncclSuccess);
  Reentrant r(&q, b);
  ASSERT_EQ(q.push(a, reenter, &r, 0), ncclSuccess);
  EXPECT_EQ(q.push(a, nullptr, &r, 0), ncclInternalError);
  fake::completeOldest(2);
  ASSERT_EQ(q.poll(false), ncclSuccess);
  EXPECT_EQ(r.pollResult, ncclInternalError);
  EXPECT_EQ(r.ran, std::vector<uint64_t>({0, 1}));
  EXPECT_TRUE(q.empty());
  ASSERT_EQ(gpu::eventDestroy(a), ncclSuccess);
  ASSERT_EQ(gpu::eventDestroy(b), ncclSuccess);
}

// The kernel launch path of core/launch.cc end to end on the fake, with the
// kernels' own argument struct: launches of 1 to 12 work items (up to
// dev::kMaxInlineWorks in the arguments, more through the work FIFO, which
// wraps), each read back by the "GPU" (launch hook) through dev::KernelArgs
// as kernel.h reads them; the done events' callbacks give the FIFO's room
// back (launchWorks blocks on them when the ring is full).
void fakeKernel() {}

TEST_F(Enqueue, LaunchWorksCarriesItsWorksToTheKernel) {
  std::mt19937 rng(5);
  ncclComm* comm = test::makeFakeComm(0, 2);
  ASSERT_EQ(comm->workFifo.init(4096, &comm->callbacks), ncclSuccess);
  comm->workFifo.setCountersForTesting(0u - 2048u);   // the 32-bit counters wrap too
  fake::setLaunchArgBytes(sizeof(dev::KernelArgs));
  std::vector<dev::Work> sent;   // the launch in progress
  unsigned wantGrid = 0;
  uint64_t read = 0, mismatches = 0, inlined = 0, viaFifo = 0;
  fake::setLaunchHook([&](const fake::Launch& l) {
    dev::KernelArgs a;
    std::memcpy(&a, l.args.data(), sizeof(a));
    EXPECT_EQ(a.nWorks, sent.size());
    EXPECT_EQ(l.gridX, wantGrid);
    EXPECT_EQ(l.blockX, (unsigned)dev::kThreadsPerBlock);
    if (a.works == nullptr) inlined++;
    else viaFifo++;
    for (uint32_t i = 0; i < a.nWorks && i < sent.size(); ++i) {
      const dev::Work* w = a.works == nullptr
                               ? &a.inlineWorks[i]
                               : reinterpret_cast<const dev::Work*>(reinterpret_cast<const char*>(a.works) +
                                                                     ((a.workOffset + i * sizeof(dev::Work)) & a.workMask));
      if (std::memcmp(w, &sent[i], sizeof(dev::Work)) != 0) ++mismatches;
      ++read;
    }
  });
  fake::setSyncHook([](gpu::Event) { fake::completeOldest(); });
  uint64_t total = 0;
  constexpr int kLaunches = 300;
  for (int i = 0; i < kLaunches; ++i) {
    const int n = 1 + (int)(rng() % 12);
    sent.assign(n, dev::Work{});
    wantGrid = 0;
    for (dev::Work& w : sent) {
      std::vector<unsigned char> bytes = randomBytes(rng, sizeof(dev::Work));
      std::memcpy(&w, bytes.data(), sizeof(w));
      w.coll = dev::kCollAllReduce;
      w.channelLo = 0;
      w.channelHi = (uint8_t)(rng() % 4);
      wantGrid = std::max(wantGrid, (unsigned)w.channelHi + 1);
    }
    total += n;
    // A plan of one launch carrying these works (what the planner makes).
    GroupPlan group(comm);
    LaunchPlan& plan = group.front().launch;
    plan.works = sent;
    KernelLaunch L;
    L.nWorks = (uint32_t)n;
    L.kernel = reinterpret_cast<const void*>(&fakeKernel);
    L.grid = wantGrid;
    plan.launches.push_back(L);
    ASSERT_EQ(launchWorks(group.front(), 0), ncclSuccess);
    if (rng() % 2) fake::completeOldest();
    ASSERT_EQ(comm->callbacks.poll(false), ncclSuccess);
  }
  ASSERT_EQ(drainLaunches(comm), ncclSuccess);
  const auto log = fake::launches();
  ASSERT_EQ(log.size(), (size_t)kLaunches);
  for (size_t i = 0; i < log.size(); ++i) {
    EXPECT_EQ(log[i].kernel, reinterpret_cast<const void*>(&fakeKernel));
    EXPECT_NE(log[i].doneSerial, 0u) << "no watchdog: every launch records its done event";
    if (i > 0) {
      EXPECT_GT(log[i].doneSerial, log[i - 1].doneSerial);
    }
  }
  EXPECT_EQ(read, total);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_GT(inlined, 0u);
  EXPECT_GT(viaFifo, 0u);
  EXPECT_EQ(comm->workFifo.used(), 0u) << "every FIFO launch's done callback gave its room back";
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// The fake is shared with threads (watchdog tests): a "GPU thread" completes
// events while the host thread blocks in poll(waitSome) and drain().
TEST_F(Enqueue, BlockingPollWithACompletingThread) {
  std::mt19937 rng(11);
  EventPool pool;
  EventCallbackQueue q(&pool);
  WorkFifo fifo;
  ASSERT_EQ(fifo.init(4096, &q), ncclSuccess);
  Consumer c(&fifo);
  std::atomic<bool> stop{false};
  std::thread gpu([&] {
    while (!stop.load()) {
      fake::completeOldest();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  for (uint64_t i = 0; i < 3000; ++i) submit(fifo, pool, q, c, rng, 64u * (1 + rng() % 16), i);
  EXPECT_EQ(q.drain(), ncclSuccess);
  stop = true;
  gpu.join();
  EXPECT_EQ(c.checked, 3000u);
  EXPECT_EQ(c.mismatches, 0u);
  for (uint64_t i = 0; i < c.order.size(); ++i) ASSERT_EQ(c.order[i], i);
}

}  // namespace
}  // namespace uniccl
