// The proxy in one process: CPU producer -> conn FIFO -> proxy -> loopback
// net -> proxy -> conn FIFO -> CPU consumer, with the loopback playing a busy
// network; backpressure, abort, transport errors, bad slots, refcounting.
#include <sys/resource.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "common/proxy/ll_lines.h"
#include "common/proxy/proxy.h"
#include "loopback_net.h"
#include "proxy_harness.h"

namespace uniccl::test {
namespace {

constexpr int64_t kStep = 512;

struct Completion {
  std::atomic<int> calls{0};
  std::atomic<int> result{-1};
  static void fn(void* arg, ncclResult_t r) {
    auto* c = static_cast<Completion*>(arg);
    c->result.store(r);
    c->calls.fetch_add(1);
  }
};

bool waitFinished(const ProxyOp& op, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!op.finished()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

class ProxyLoopback : public ::testing::Test {
 protected:
  void SetUp() override {
    loopbackSetChaos(1, 0);
    loopbackFailIsendAfter(0);
    net = loopbackNet();
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    ASSERT_EQ(net->listen(0, handle, &listen), ncclSuccess);
    void* sc = nullptr;
    void* rc = nullptr;
    void* none = nullptr;
    ncclNetDeviceHandle_v8_t* dev = nullptr;
    ASSERT_EQ(net->accept(listen, &none, &dev), ncclSuccess);
    EXPECT_EQ(none, nullptr);  // nothing connected yet: non-blocking "call again"
    ASSERT_EQ(connectLoop(net, handle, &sc), ncclSuccess);
    ASSERT_EQ(acceptLoop(net, listen, &rc), ncclSuccess);
    ASSERT_EQ(tx.setup(net, sc, true, kStep), ncclSuccess);
    ASSERT_EQ(rx.setup(net, rc, false, kStep), ncclSuccess);
    ASSERT_EQ(ProxyRef::acquire(&proxy), ncclSuccess);
  }
  void TearDown() override {
    proxy.release();
    tx.close();
    rx.close();
    net->closeListen(listen);
    LoopbackCounts c = loopbackCounts();
    EXPECT_EQ(c.comms, 0);
    EXPECT_EQ(c.requests, 0);
    EXPECT_EQ(c.mrs, 0);
    loopbackSetChaos(1, 0);
    loopbackFailIsendAfter(0);
    loopbackThrowIsendAfter(0);
  }
  static void initOp(ProxyOp& op, Endpoint& e, uint64_t nsteps) {
    op.conn = &e.conn;
    op.kind = e.isSend ? ProxyOpKind::kSend : ProxyOpKind::kRecv;
    op.tag = 7;
    op.nsteps = nsteps;
  }

  const ncclNet_v8_t* net = nullptr;
  void* listen = nullptr;
  Endpoint tx, rx;
  ProxyRef proxy;
  uint32_t stop = 0;
};

// Random sizes over 4000 steps (the 8 slots wrap 500 times), split into four
// consecutive ops per side, with a network that is busy 30% of the time and
// a receive side that needs a flush.
TEST_F(ProxyLoopback, IntegrityOverManyWraps) {
  constexpr uint64_t kOps = 4, kPerOp = 1000, kTotal = kOps * kPerOp;
  loopbackSetChaos(12345, 30);
  rx.conn.needFlush = true;
  const int flushesBefore = loopbackCounts().flushes;
  ProxyOp sends[kOps], recvs[kOps];
  Completion done[kOps];
  for (uint64_t i = 0; i < kOps; i++) {
    sends[i].conn = &tx.conn;
    sends[i].kind = ProxyOpKind::kSend;
    sends[i].tag = 3;
    sends[i].nsteps = kPerOp;
    recvs[i].conn = &rx.conn;
    recvs[i].kind = ProxyOpKind::kRecv;
    recvs[i].tag = 3;
    recvs[i].nsteps = kPerOp;
    recvs[i].onComplete = Completion::fn;
    recvs[i].onCompleteArg = &done[i];
    ASSERT_EQ(proxy.post(&recvs[i]), ncclSuccess);
    ASSERT_EQ(proxy.post(&sends[i]), ncclSuccess);
  }
  ConsumerResult cr;
  ProducerResult pr;
  std::thread consumer([&] { cr = consume(rx, 99, kTotal, 0, &stop); });
  std::thread producer([&] { pr = produce(tx, 99, kTotal, &stop); });
  producer.join();
  consumer.join();
  EXPECT_FALSE(pr.timedOut);
  EXPECT_FALSE(cr.timedOut);
  EXPECT_EQ(pr.produced, kTotal);
  EXPECT_EQ(cr.consumed, kTotal);
  EXPECT_EQ(cr.badSteps, 0u);
  EXPECT_EQ(pr.overwrites, 0u);
  EXPECT_LE(pr.maxInFlight, static_cast<uint64_t>(kConnSteps));
  for (uint64_t i = 0; i < kOps; i++) {
    ASSERT_TRUE(waitFinished(sends[i], std::chrono::seconds(5)));
    ASSERT_TRUE(waitFinished(recvs[i], std::chrono::seconds(5)));
    EXPECT_EQ(sends[i].status.load(), kProxyOpDone);
    EXPECT_EQ(recvs[i].status.load(), kProxyOpDone);
    EXPECT_EQ(sends[i].base, i * kPerOp);  // each op continues where the previous ended
    EXPECT_EQ(recvs[i].base, i * kPerOp);
    EXPECT_EQ(sends[i].posted, kPerOp);
    EXPECT_EQ(sends[i].transmitted, kPerOp);
    EXPECT_EQ(sends[i].done, kPerOp);
    EXPECT_EQ(recvs[i].posted, kPerOp);
    EXPECT_EQ(recvs[i].received, kPerOp);
    EXPECT_EQ(recvs[i].transmitted, kPerOp);
    EXPECT_EQ(recvs[i].done, kPerOp);
    EXPECT_EQ(done[i].calls.load(), 1);
    EXPECT_EQ(done[i].result.load(), ncclSuccess);
  }
  EXPECT_EQ(tx.fifo.host()->tail, kTotal);
  EXPECT_EQ(tx.fifo.host()->head, kTotal);
  EXPECT_EQ(rx.fifo.host()->tail, kTotal);
  EXPECT_EQ(rx.fifo.host()->head, kTotal);
  for (const ConnFifoSlot& s : tx.fifo.host()->slots) EXPECT_EQ(s.size, -1);
  EXPECT_EQ(loopbackCounts().flushes - flushesBefore, static_cast<int>(kTotal));
}

// A slow consumer: the producer has to wait for freed slots and never
// refills a slot that is still in use.
TEST_F(ProxyLoopback, SlowConsumerBackpressuresProducer) {
  constexpr uint64_t kTotal = 200;
  ProxyOp send, recv;
  initOp(send, tx, kTotal);
  initOp(recv, rx, kTotal);
  ASSERT_EQ(proxy.post(&send), ncclSuccess);
  ASSERT_EQ(proxy.post(&recv), ncclSuccess);
  ConsumerResult cr;
  ProducerResult pr;
  std::thread consumer([&] { cr = consume(rx, 5, kTotal, 200, &stop); });
  std::thread producer([&] { pr = produce(tx, 5, kTotal, &stop); });
  producer.join();
  consumer.join();
  EXPECT_EQ(cr.consumed, kTotal);
  EXPECT_EQ(cr.badSteps, 0u);
  EXPECT_EQ(pr.overwrites, 0u);
  EXPECT_GT(pr.waits, kTotal / 8);  // it had to wait for the consumer, again and again
  EXPECT_EQ(pr.maxInFlight, static_cast<uint64_t>(kConnSteps));  // the FIFO ran full, never over
  EXPECT_EQ(proxyOpWait(&send), ncclSuccess);
  EXPECT_EQ(proxyOpWait(&recv), ncclSuccess);
}

// Abort in mid-transfer: both ops stop within a few poll intervals, report
// ncclRemoteError, and closing the comms frees the abandoned requests.
TEST_F(ProxyLoopback, AbortMidTransferStopsPromptly) {
  constexpr uint64_t kTotal = 1000, kMade = 100;
  ProxyOp send, recv;
  initOp(send, tx, kTotal);
  initOp(recv, rx, kTotal);
  Completion sendDone, recvDone;
  send.onComplete = recv.onComplete = Completion::fn;
  send.onCompleteArg = &sendDone;
  recv.onCompleteArg = &recvDone;
  ASSERT_EQ(proxy.post(&send), ncclSuccess);
  ASSERT_EQ(proxy.post(&recv), ncclSuccess);
  ConsumerResult cr = {};
  std::thread consumer([&] { cr = consume(rx, 8, kTotal, 0, &stop); });
  ProducerResult pr = produce(tx, 8, kMade, &stop);  // the "kernel" stalls after 100 steps
  EXPECT_EQ(pr.produced, kMade);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (connLoadAcquire(&rx.fifo.host()->head) < kMade && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  EXPECT_EQ(connLoadAcquire(&rx.fifo.host()->head), kMade);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the proxy fall asleep
  EXPECT_FALSE(send.finished());
  EXPECT_FALSE(recv.finished());

  auto t0 = std::chrono::steady_clock::now();
  __atomic_store_n(&tx.abortFlag, 1u, __ATOMIC_RELEASE);
  __atomic_store_n(&rx.abortFlag, 1u, __ATOMIC_RELEASE);
  ASSERT_TRUE(waitFinished(send, std::chrono::seconds(2)));
  ASSERT_TRUE(waitFinished(recv, std::chrono::seconds(2)));
  auto took = std::chrono::steady_clock::now() - t0;
  // Promptly: the proxy looks at the flags every poll (100 us by default);
  // 1 s leaves a loaded machine's scheduling delays room (the waits above
  // give up after 2 s).
  EXPECT_LT(took, std::chrono::seconds(1));
  __atomic_store_n(&stop, 1u, __ATOMIC_RELEASE);
  consumer.join();
  EXPECT_EQ(cr.consumed, kMade);
  EXPECT_EQ(cr.badSteps, 0u);
  EXPECT_EQ(send.status.load(), kProxyOpAborted);
  EXPECT_EQ(recv.status.load(), kProxyOpAborted);
  EXPECT_EQ(send.result, ncclRemoteError);
  EXPECT_EQ(sendDone.calls.load(), 1);
  EXPECT_EQ(recvDone.result.load(), ncclRemoteError);
  EXPECT_EQ(send.done, kMade);
  EXPECT_GT(recv.posted, recv.received);  // irecvs were in flight: abandoned, freed by closeRecv
  EXPECT_GT(loopbackCounts().requests, 0);
  // TearDown closes the comms and checks that nothing leaked.
}

// A transport error fails the op (result + callback) and every later op on
// that connection; the other direction is stopped with the abort flag.
TEST_F(ProxyLoopback, TransportErrorIsReported) {
  constexpr uint64_t kTotal = 50;
  loopbackFailIsendAfter(5);
  ProxyOp send, later, recv;
  initOp(send, tx, kTotal);
  initOp(later, tx, 10);
  initOp(recv, rx, kTotal);
  Completion sendDone, laterDone;
  send.onComplete = later.onComplete = Completion::fn;
  send.onCompleteArg = &sendDone;
  later.onCompleteArg = &laterDone;
  ASSERT_EQ(proxy.post(&send), ncclSuccess);
  ASSERT_EQ(proxy.post(&later), ncclSuccess);
  ASSERT_EQ(proxy.post(&recv), ncclSuccess);
  ConsumerResult cr;
  std::thread consumer([&] { cr = consume(rx, 3, kTotal, 0, &stop); });
  std::thread producer([&] { produce(tx, 3, kTotal, &stop); });
  ASSERT_TRUE(waitFinished(send, std::chrono::seconds(5)));
  ASSERT_TRUE(waitFinished(later, std::chrono::seconds(5)));
  EXPECT_EQ(send.status.load(), kProxyOpFailed);
  EXPECT_EQ(send.result, ncclSystemError);
  EXPECT_EQ(sendDone.result.load(), ncclSystemError);
  EXPECT_EQ(send.transmitted, 4u);
  EXPECT_EQ(later.status.load(), kProxyOpFailed);
  EXPECT_EQ(laterDone.result.load(), ncclSystemError);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (connLoadAcquire(&rx.fifo.host()->head) < 4 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  __atomic_store_n(&rx.abortFlag, 1u, __ATOMIC_RELEASE);
  proxy.wake();
  ASSERT_TRUE(waitFinished(recv, std::chrono::seconds(2)));
  __atomic_store_n(&stop, 1u, __ATOMIC_RELEASE);
  producer.join();
  consumer.join();
  EXPECT_EQ(cr.badSteps, 0u);
  EXPECT_EQ(cr.consumed, 4u);
}

// An exception thrown inside the net (here std::bad_alloc from an isend)
// fails the op like a transport error instead of ending the process; the
// proxy thread goes on serving the other direction.
TEST_F(ProxyLoopback, ExceptionInTheNetFailsTheOp) {
  constexpr uint64_t kTotal = 50;
  loopbackThrowIsendAfter(5);
  ProxyOp send, later, recv;
  initOp(send, tx, kTotal);
  initOp(later, tx, 10);
  initOp(recv, rx, kTotal);
  Completion sendDone, laterDone;
  send.onComplete = later.onComplete = Completion::fn;
  send.onCompleteArg = &sendDone;
  later.onCompleteArg = &laterDone;
  ASSERT_EQ(proxy.post(&send), ncclSuccess);
  ASSERT_EQ(proxy.post(&later), ncclSuccess);
  ASSERT_EQ(proxy.post(&recv), ncclSuccess);
  ConsumerResult cr;
  std::thread consumer([&] { cr = consume(rx, 3, kTotal, 0, &stop); });
  std::thread producer([&] { produce(tx, 3, kTotal, &stop); });
  ASSERT_TRUE(waitFinished(send, std::chrono::seconds(5)));
  ASSERT_TRUE(waitFinished(later, std::chrono::seconds(5)));
  EXPECT_EQ(send.status.load(), kProxyOpFailed);
  EXPECT_EQ(sendDone.result.load(), ncclSystemError);
  EXPECT_EQ(send.transmitted, 4u);
  EXPECT_EQ(later.status.load(), kProxyOpFailed);
  EXPECT_EQ(laterDone.result.load(), ncclSystemError);
  EXPECT_TRUE(proxyThreadRunning());
  // The receive side still progresses: the 4 sent steps arrive.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (connLoadAcquire(&rx.fifo.host()->head) < 4 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  __atomic_store_n(&rx.abortFlag, 1u, __ATOMIC_RELEASE);
  proxy.wake();
  ASSERT_TRUE(waitFinished(recv, std::chrono::seconds(2)));
  __atomic_store_n(&stop, 1u, __ATOMIC_RELEASE);
  producer.join();
  consumer.join();
  EXPECT_EQ(cr.badSteps, 0u);
  EXPECT_EQ(cr.consumed, 4u);
}

// A poller that throws is called no more and its owner hears of it once
// (GIN turns that into its communicator's async error); the other pollers
// go on being called.
TEST_F(ProxyLoopback, ThrowingPollerIsDroppedAndReported) {
  struct Probe {
    bool throws = false;
    std::atomic<int> polls{0};
    std::atomic<int> fails{0};
    std::atomic<int> failResult{-1};
  } bad, good;
  bad.throws = true;
  auto poll = [](void* arg) -> bool {
    auto* p = static_cast<Probe*>(arg);
    p->polls.fetch_add(1);
    if (p->throws) throw std::runtime_error("poller bug");
    return false;
  };
  auto fail = [](void* arg, ncclResult_t r) {
    auto* p = static_cast<Probe*>(arg);
    p->failResult.store(r);
    p->fails.fetch_add(1);
  };
  ProxyPoller pb, pg;
  pb.poll = pg.poll = poll;
  pb.fail = pg.fail = fail;
  pb.arg = &bad;
  pg.arg = &good;
  ASSERT_EQ(proxy.addPoller(&pg), ncclSuccess);
  ASSERT_EQ(proxy.addPoller(&pb), ncclSuccess);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (bad.fails.load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(bad.fails.load(), 1);
  EXPECT_EQ(bad.failResult.load(), ncclInternalError);
  const int badPolls = bad.polls.load();
  EXPECT_EQ(badPolls, 1);
  // The good one keeps being polled (the thread wakes on its own at least
  // every UNICCL_PROXY_SLEEP_US; wake() makes it look now).
  const int goodBefore = good.polls.load();
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (good.polls.load() <= goodBefore + 2 && std::chrono::steady_clock::now() < deadline) {
    proxy.wake();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GT(good.polls.load(), goodBefore + 2);
  EXPECT_EQ(bad.polls.load(), badPolls);
  EXPECT_EQ(good.fails.load(), 0);
  proxy.removePoller(&pb);   // the owner still removes it: harmless
  proxy.removePoller(&pg);
  EXPECT_TRUE(proxyThreadRunning());
}

// A producer that publishes more bytes than a slot holds fails the op; nothing is sent.
TEST_F(ProxyLoopback, OversizedSlotFailsTheOp) {
  ProxyOp send;
  initOp(send, tx, 4);
  ASSERT_EQ(proxy.post(&send), ncclSuccess);
  connFifoPublish(tx.fifo.host(), 0, kStep + 1);
  EXPECT_EQ(proxyOpWait(&send), ncclInternalError);
  EXPECT_EQ(send.status.load(), kProxyOpFailed);
  EXPECT_EQ(send.transmitted, 0u);
}

TEST_F(ProxyLoopback, BadPostsAreRejected) {
  ProxyOp op;
  initOp(op, tx, 0);
  EXPECT_EQ(proxy.post(&op), ncclInvalidArgument);  // no steps
  op.nsteps = 3;
  op.conn = nullptr;
  EXPECT_EQ(proxy.post(&op), ncclInvalidArgument);
  EXPECT_EQ(proxy.post(nullptr), ncclInvalidArgument);
  ProxyOp recv;
  initOp(recv, rx, 1);
  ProxyConnection broken = tx.conn;
  broken.fifo = nullptr;
  op.conn = &broken;
  EXPECT_EQ(proxy.post(&op), ncclInvalidArgument);
  op.conn = &tx.conn;
  ASSERT_EQ(proxy.post(&op), ncclSuccess);
  EXPECT_EQ(proxy.post(&op), ncclInvalidUsage);  // still pending
  ProxyRef none;
  EXPECT_EQ(none.post(&recv), ncclInvalidUsage);
  EXPECT_EQ(proxyOpWait(&recv), ncclInvalidUsage);  // never posted: an error, not a hang
  __atomic_store_n(&tx.abortFlag, 1u, __ATOMIC_RELEASE);
  proxy.wake();
  EXPECT_EQ(proxyOpWait(&op), ncclRemoteError);
}

// Ops waiting on a stalled producer must not burn a core: after the spin
// and yield phases the thread sleeps between polls.
TEST_F(ProxyLoopback, IdleProxyBacksOff) {
  ProxyOp recv;  // no sender: waits forever
  initOp(recv, rx, 10);
  ASSERT_EQ(proxy.post(&recv), ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  getrusage(RUSAGE_SELF, &r1);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto secs = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  double cpu = secs(r1.ru_utime) - secs(r0.ru_utime) + secs(r1.ru_stime) - secs(r0.ru_stime);
  EXPECT_LT(cpu, 0.5 * wall);
  EXPECT_FALSE(recv.finished());
  __atomic_store_n(&rx.abortFlag, 1u, __ATOMIC_RELEASE);
  EXPECT_EQ(proxyOpWait(&recv), ncclRemoteError);  // noticed within a poll interval, no wake needed
}

// Which thread called a poller, once it has.
struct PolledOn {
  std::mutex mu;
  std::thread::id id;
  bool seen = false;
  static bool poll(void* arg) {
    auto* w = static_cast<PolledOn*>(arg);
    std::lock_guard<std::mutex> lk(w->mu);
    w->id = std::this_thread::get_id();
    w->seen = true;
    return false;
  }
  std::thread::id wait() {
    for (int i = 0; i < 5000; i++) {
      {
        std::lock_guard<std::mutex> lk(mu);
        if (seen) return id;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return std::thread::id();
  }
};

TEST(ProxyThread, GroupsHaveThreadsOfTheirOwn) {
  int groupA = 0, groupB = 0;
  ProxyRef proc, a1, a2, b;
  ASSERT_EQ(ProxyRef::acquire(&proc), ncclSuccess);
  ASSERT_EQ(ProxyRef::acquire(&a1, &groupA), ncclSuccess);
  ASSERT_EQ(ProxyRef::acquire(&a2, &groupA), ncclSuccess);
  ASSERT_EQ(ProxyRef::acquire(&b, &groupB), ncclSuccess);
  EXPECT_EQ(proxyRefCount(), 1);   // the process's thread counts its own references only
  PolledOn onProc, onA1, onA2, onB;
  ProxyPoller pProc{&PolledOn::poll, nullptr, &onProc}, pA1{&PolledOn::poll, nullptr, &onA1},
      pA2{&PolledOn::poll, nullptr, &onA2}, pB{&PolledOn::poll, nullptr, &onB};
  ASSERT_EQ(proc.addPoller(&pProc), ncclSuccess);
  ASSERT_EQ(a1.addPoller(&pA1), ncclSuccess);
  ASSERT_EQ(a2.addPoller(&pA2), ncclSuccess);
  ASSERT_EQ(b.addPoller(&pB), ncclSuccess);
  const std::thread::id none, tProc = onProc.wait(), tA1 = onA1.wait(), tA2 = onA2.wait(), tB = onB.wait();
  ASSERT_NE(tProc, none);
  ASSERT_NE(tA1, none);
  ASSERT_NE(tB, none);
  EXPECT_EQ(tA1, tA2);   // one group, one thread
  EXPECT_NE(tA1, tProc);
  EXPECT_NE(tB, tProc);
  EXPECT_NE(tA1, tB);
  EXPECT_NE(tA1, std::this_thread::get_id());
  proc.removePoller(&pProc);
  a1.removePoller(&pA1);
  a2.removePoller(&pA2);
  b.removePoller(&pB);
  a1.release();
  ProxyRef moved(std::move(a2));   // a moved reference keeps its group
  moved.release();
  b.release();
  EXPECT_TRUE(proxyThreadRunning());
  proc.release();
  EXPECT_FALSE(proxyThreadRunning());
  // A group stopped by its last release starts again on the next acquire.
  ProxyRef again;
  ASSERT_EQ(ProxyRef::acquire(&again, &groupA), ncclSuccess);
  PolledOn onAgain;
  ProxyPoller pAgain{&PolledOn::poll, nullptr, &onAgain};
  ASSERT_EQ(again.addPoller(&pAgain), ncclSuccess);
  EXPECT_NE(onAgain.wait(), none);
  again.removePoller(&pAgain);
  again.release();
  EXPECT_FALSE(proxyThreadRunning());
}

// Receives progress on a thread of their own, per key; with
// UNICCL_PROXY_RECV_THREAD=0 on the key's one thread.
TEST(ProxyThread, ReceiveLaneIsAThreadOfItsOwnUnlessTurnedOff) {
  int group = 0;
  const std::thread::id none;
  for (const char* knob : {"1", "0"}) {
    setenv("UNICCL_PROXY_RECV_THREAD", knob, 1);
    const bool own = knob[0] == '1';
    ProxyRef main, recv, groupMain, groupRecv;
    ASSERT_EQ(ProxyRef::acquire(&main), ncclSuccess);
    ASSERT_EQ(ProxyRef::acquire(&recv, nullptr, ProxyLane::kReceive), ncclSuccess);
    ASSERT_EQ(ProxyRef::acquire(&groupMain, &group), ncclSuccess);
    ASSERT_EQ(ProxyRef::acquire(&groupRecv, &group, ProxyLane::kReceive), ncclSuccess);
    EXPECT_EQ(proxyRefCount(), 2);   // the process's threads, both lanes
    PolledOn onMain, onRecv, onGroupMain, onGroupRecv;
    ProxyPoller pMain{&PolledOn::poll, nullptr, &onMain}, pRecv{&PolledOn::poll, nullptr, &onRecv},
        pGroupMain{&PolledOn::poll, nullptr, &onGroupMain}, pGroupRecv{&PolledOn::poll, nullptr, &onGroupRecv};
    ASSERT_EQ(main.addPoller(&pMain), ncclSuccess);
    ASSERT_EQ(recv.addPoller(&pRecv), ncclSuccess);
    ASSERT_EQ(groupMain.addPoller(&pGroupMain), ncclSuccess);
    ASSERT_EQ(groupRecv.addPoller(&pGroupRecv), ncclSuccess);
    const std::thread::id tMain = onMain.wait(), tRecv = onRecv.wait(), tGroupMain = onGroupMain.wait(),
                          tGroupRecv = onGroupRecv.wait();
    ASSERT_NE(tMain, none);
    ASSERT_NE(tRecv, none);
    ASSERT_NE(tGroupMain, none);
    ASSERT_NE(tGroupRecv, none);
    EXPECT_EQ(tMain != tRecv, own) << "UNICCL_PROXY_RECV_THREAD=" << knob;
    EXPECT_EQ(tGroupMain != tGroupRecv, own) << "UNICCL_PROXY_RECV_THREAD=" << knob;
    EXPECT_NE(tGroupRecv, tRecv);   // a group's receive thread is not the process's
    main.removePoller(&pMain);
    recv.removePoller(&pRecv);
    groupMain.removePoller(&pGroupMain);
    groupRecv.removePoller(&pGroupRecv);
    main.release();
    EXPECT_TRUE(proxyThreadRunning());   // the receive reference still holds its thread
    recv.release();
    EXPECT_FALSE(proxyThreadRunning());
    EXPECT_EQ(proxyRefCount(), 0);
  }
  unsetenv("UNICCL_PROXY_RECV_THREAD");
}

TEST(ProxyThread, RefcountStartsAndStopsTheThread) {
  EXPECT_FALSE(proxyThreadRunning());
  EXPECT_EQ(proxyRefCount(), 0);
  {
    ProxyRef a, b;
    ASSERT_EQ(ProxyRef::acquire(&a), ncclSuccess);
    EXPECT_TRUE(proxyThreadRunning());
    ASSERT_EQ(ProxyRef::acquire(&b), ncclSuccess);
    EXPECT_EQ(proxyRefCount(), 2);
    a.release();
    EXPECT_TRUE(proxyThreadRunning());
    EXPECT_EQ(proxyRefCount(), 1);
    ProxyRef c(std::move(b));
    EXPECT_FALSE(b);
    EXPECT_TRUE(c);
    EXPECT_EQ(proxyRefCount(), 1);
  }
  EXPECT_FALSE(proxyThreadRunning());
  EXPECT_EQ(proxyRefCount(), 0);
  ProxyRef again;
  ASSERT_EQ(ProxyRef::acquire(&again), ncclSuccess);  // restarts after a full stop
  EXPECT_TRUE(proxyThreadRunning());
  again.release();
  EXPECT_FALSE(proxyThreadRunning());
  EXPECT_EQ(ProxyRef::acquire(nullptr), ncclInvalidArgument);
}

// Releasing the last reference with an op still pending finishes it as aborted (nobody waits forever).
TEST(ProxyThread, ShutdownAbortsPendingOps) {
  const ncclNet_v8_t* net = loopbackNet();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  void *sc = nullptr, *rc = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listen), ncclSuccess);
  ASSERT_EQ(connectLoop(net, handle, &sc), ncclSuccess);
  ASSERT_EQ(acceptLoop(net, listen, &rc), ncclSuccess);
  {
    Endpoint rx;
    ASSERT_EQ(rx.setup(net, rc, false, 64), ncclSuccess);
    net->closeSend(sc);
    ProxyOp recv;
    recv.conn = &rx.conn;
    recv.kind = ProxyOpKind::kRecv;
    recv.nsteps = 5;
    ProxyRef p;
    ASSERT_EQ(ProxyRef::acquire(&p), ncclSuccess);
    ASSERT_EQ(p.post(&recv), ncclSuccess);
    p.release();
    EXPECT_EQ(recv.status.load(), kProxyOpAborted);
    EXPECT_EQ(recv.result, ncclRemoteError);
  }
  net->closeListen(listen);
  EXPECT_EQ(loopbackCounts().requests, 0);
  EXPECT_EQ(loopbackCounts().comms, 0);
}

// LL steps through the proxy (common/proxy/ll_lines.h), mixed with Simple
// steps on one connection as launches of either protocol follow each other.
// The producer plays an LL kernel: it publishes an LL step's size before its
// lines and never advances the tail for it; a later Simple step's tail
// passes it. The consumer polls an LL step's lines in the receive side's LL
// slots and frees the step without waiting when it has no lines (a
// zero-byte part), so the head runs ahead of the proxy's receives.
constexpr int64_t kLLStep = 256;   // LL slot: 16 lines
enum class StepKind { kSimple, kLL, kLLEmpty };
StepKind kindOf(uint64_t seed, uint64_t step) {
  const uint64_t r = mix(seed * 31 + step) % 8;
  return r < 3 ? StepKind::kSimple : r < 7 ? StepKind::kLL : StepKind::kLLEmpty;
}
int64_t linesOf(uint64_t seed, uint64_t step) {
  return kindOf(seed, step) == StepKind::kLL ? 1 + (int64_t)(mix(seed + step * 977) % (kLLStep / kLLLineBytes)) : 0;
}
uint64_t lineData(uint64_t seed, uint64_t step, int64_t line) { return mix((seed << 32) ^ (step << 12) ^ (uint64_t)line); }

struct LLSlots {
  std::vector<char> bytes = std::vector<char>(kLLStep * kConnSteps, 0);
  void* mh = nullptr;
  void attach(Endpoint& e) {
    ASSERT_EQ(e.net->regMr(e.comm, bytes.data(), bytes.size(), NCCL_PTR_HOST, &mh), ncclSuccess);
    e.conn.llStaging = bytes.data();
    e.conn.llStepBytes = kLLStep;
    e.conn.llMhandle = mh;
  }
  void detach(Endpoint& e) {
    if (mh != nullptr) e.net->deregMr(e.comm, mh);
    mh = nullptr;
  }
};

TEST_F(ProxyLoopback, LLStepsAndSimpleStepsShareAConnection) {
  constexpr uint64_t kSeed = 5, kTotal = 3000;
  loopbackSetChaos(777, 20);
  LLSlots txLL, rxLL;
  txLL.attach(tx);
  rxLL.attach(rx);
  ProxyOp send, recv;
  initOp(send, tx, kTotal);
  initOp(recv, rx, kTotal);
  ASSERT_EQ(proxy.post(&recv), ncclSuccess);
  ASSERT_EQ(proxy.post(&send), ncclSuccess);
  std::atomic<uint64_t> badSteps{0}, done{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto late = [&] { return std::chrono::steady_clock::now() > deadline; };
  std::thread producer([&] {
    ConnFifo* f = tx.fifo.host();
    for (uint64_t step = 0; step < kTotal && !late(); step++) {
      while (!connFifoCanFill(f, step) && !late()) std::this_thread::yield();
      const int slot = (int)(step % kConnSteps);
      if (kindOf(kSeed, step) == StepKind::kSimple) {
        const int64_t n = stepBytesOf(kSeed, step, kStep);
        char* p = tx.staging.data() + slot * kStep;
        for (int64_t i = 0; i < n; i++) p[i] = static_cast<char>(byteOf(kSeed, step, i));
        connFifoPublish(f, step, n);
        continue;
      }
      // The size first, then the lines, half of them after a pause: the
      // proxy must wait for every flag.
      const int64_t lines = linesOf(kSeed, step);
      __atomic_store_n(&f->slots[slot].size, kConnSizeLL | (lines * kLLLineBytes), __ATOMIC_RELAXED);
      uint32_t* w = reinterpret_cast<uint32_t*>(txLL.bytes.data() + slot * kLLStep);
      for (int64_t l = 0; l < lines; l++) {
        if (l == lines / 2) std::this_thread::yield();
        const uint64_t d = lineData(kSeed, step, l);
        const uint64_t lo = (uint32_t)d | ((uint64_t)llFlag(step) << 32), hi = (d >> 32) | ((uint64_t)llFlag(step) << 32);
        __atomic_store_n(reinterpret_cast<uint64_t*>(w + 4 * l), lo, __ATOMIC_RELEASE);
        __atomic_store_n(reinterpret_cast<uint64_t*>(w + 4 * l + 2), hi, __ATOMIC_RELEASE);
      }
    }
  });
  std::thread consumer([&] {
    ConnFifo* f = rx.fifo.host();
    for (uint64_t step = 0; step < kTotal && !late(); step++) {
      const int slot = (int)(step % kConnSteps);
      if (kindOf(kSeed, step) == StepKind::kSimple) {
        while (!connFifoReady(f, step) && !late()) std::this_thread::yield();
        const int64_t n = connLoadSize(f->slots[slot]);
        const char* p = rx.staging.data() + slot * kStep;
        bool ok = n == stepBytesOf(kSeed, step, kStep);
        for (int64_t i = 0; ok && i < n; i++) ok = static_cast<uint8_t>(p[i]) == byteOf(kSeed, step, i);
        badSteps += !ok;
        connFifoFree(f, step);
      } else {
        const uint64_t* h = reinterpret_cast<const uint64_t*>(rxLL.bytes.data() + slot * kLLStep);
        for (int64_t l = 0; l < linesOf(kSeed, step); l++) {
          uint64_t lo, hi;   // as a kernel polls a line: until both halves carry the step's flag
          do {
            lo = __atomic_load_n(&h[2 * l], __ATOMIC_ACQUIRE);
            hi = __atomic_load_n(&h[2 * l + 1], __ATOMIC_ACQUIRE);
          } while ((llHalfFlag(lo) != llFlag(step) || llHalfFlag(hi) != llFlag(step)) && !late() &&
                   (std::this_thread::yield(), true));
          const uint64_t d = lineData(kSeed, step, l);
          badSteps += (uint32_t)lo != (uint32_t)d || (uint32_t)hi != (uint32_t)(d >> 32);
        }
        connStoreRelease(&f->head, step + 1);   // an LL consumer frees by head alone
      }
      done++;
    }
  });
  producer.join();
  consumer.join();
  EXPECT_FALSE(late()) << done.load() << " of " << kTotal << " steps consumed";
  EXPECT_EQ(done.load(), kTotal);
  EXPECT_EQ(badSteps.load(), 0u);
  ASSERT_TRUE(waitFinished(send, std::chrono::seconds(5)));
  ASSERT_TRUE(waitFinished(recv, std::chrono::seconds(5)));
  EXPECT_EQ(send.status.load(), kProxyOpDone);
  EXPECT_EQ(recv.status.load(), kProxyOpDone);
  for (const ConnFifoSlot& s : tx.fifo.host()->slots) EXPECT_EQ(s.size, -1);   // every step sent and freed
  txLL.detach(tx);
  rxLL.detach(rx);
}

// An LL step whose published size is no whole number of lines, or larger
// than an LL slot, fails the op (a corrupted slot, never sent as is).
void expectBadLLSizeFails(ProxyRef& proxy, Endpoint& tx, int64_t bad) {
  LLSlots txLL;
  txLL.attach(tx);
  tx.fifo.host()->slots[0].size = kConnSizeLL | bad;
  ProxyOp send;
  send.conn = &tx.conn;
  send.kind = ProxyOpKind::kSend;
  send.tag = 7;
  send.nsteps = 1;
  ASSERT_EQ(proxy.post(&send), ncclSuccess);
  ASSERT_TRUE(waitFinished(send, std::chrono::seconds(5)));
  EXPECT_EQ(send.status.load(), kProxyOpFailed) << bad;
  EXPECT_EQ(send.result, ncclInternalError);
  txLL.detach(tx);
}
TEST_F(ProxyLoopback, LLStepOfPartLinesFailsTheOp) { expectBadLLSizeFails(proxy, tx, 24); }
TEST_F(ProxyLoopback, LLStepLargerThanItsSlotFailsTheOp) { expectBadLLSizeFails(proxy, tx, kLLStep + kLLLineBytes); }

TEST(ConnFifo, HostBufferStartsFreeAndMoves) {
  ConnFifoBuffer a;
  ASSERT_EQ(a.allocateHost(), ncclSuccess);
  ASSERT_NE(a.host(), nullptr);
  EXPECT_EQ(a.device(), a.host());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.host()) % 64, 0u);
  for (const ConnFifoSlot& s : a.host()->slots) EXPECT_EQ(s.size, -1);
  EXPECT_TRUE(connFifoCanFill(a.host(), 7));
  EXPECT_FALSE(connFifoCanFill(a.host(), 8));
  connFifoPublish(a.host(), 0, 10);
  EXPECT_TRUE(connFifoReady(a.host(), 0));
  EXPECT_FALSE(connFifoReady(a.host(), 1));
  connFifoFree(a.host(), 0);
  EXPECT_TRUE(connFifoCanFill(a.host(), 8));
  // A consumer may free steps ahead of the producer (an LL part without lines).
  connStoreRelease(&a.host()->head, 5);
  EXPECT_TRUE(connFifoCanFill(a.host(), 2));
  EXPECT_TRUE(connFifoCanFill(a.host(), 12));
  EXPECT_FALSE(connFifoCanFill(a.host(), 13));
  ConnFifo* p = a.host();
  ConnFifoBuffer b(std::move(a));
  EXPECT_EQ(b.host(), p);
  EXPECT_EQ(a.host(), nullptr);
  EXPECT_EQ(b.allocate(nullptr, nullptr), ncclInvalidArgument);
}

}  // namespace
}  // namespace uniccl::test
