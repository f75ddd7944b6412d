// NetLink (the NET transport's per-peer resources) end to end on the CPU:
// the real socket transport on loopback, the real proxy thread, and the fake
// GPU backend (host-mapped memory is plain host memory, so the device
// pointers fillPeer() hands the kernels are usable by CPU threads). CPU
// threads play the kernels with exactly the protocol of device/prims.h:
//   send: wait head + 8 > s; write the slot; size; release tail = s + 1
//   recv: acquire tail > s; read the slot; size = -1; release head = s + 1
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/core/comm.h"
#include "common/core/comm_transport.h"
#include "common/transport/net_link.h"
#include "fake_gpu.h"
#include "fake_verbs.h"
#include "net/ib/ib_transport.h"

namespace uniccl {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kChannels = 2;
constexpr size_t kStepBytes = 4096;

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Step sizes 0..kStepBytes (0 happens: a ring step whose chunk is empty).
int64_t sizeOf(uint64_t seed, uint64_t step) { return (int64_t)(mix(seed * 31 + step) % (kStepBytes + 1)); }
uint8_t byteOf(uint64_t seed, uint64_t step, int64_t i) { return (uint8_t)(mix((seed << 32) ^ (step << 16) ^ i) >> 7); }

uint64_t loadAcq(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void storeRel(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// A minimal communicator: what NetLink reads (rank, device, net name, abort
// flags, async error).
struct TestComm {
  ncclComm* comm = new ncclComm();
  uint32_t abortWord = 0;
  explicit TestComm(int rank) {
    comm->rank = rank;
    comm->nRanks = 2;
    comm->gpuDev = 0;
    comm->config.netName = "Socket";
    comm->abortFlagHost = &abortWord;
    comm->asyncError.store(ncclSuccess);
  }
  ~TestComm() { delete comm; }
  bool aborted() const { return __atomic_load_n(&abortWord, __ATOMIC_ACQUIRE) != 0; }
};

// Plays a sending kernel on one channel: steps [first, first + nsteps),
// stops on abort. Like the kernels' persistent step counter, a later call
// continues where the previous one ended.
bool playSender(const dev::Peer& p, uint64_t seed, uint64_t nsteps, const uint32_t* abortWord, uint64_t first = 0) {
  char* buf = p.send.buffs[dev::kProtoSimple];
  for (uint64_t s = first; s < first + nsteps; s++) {
    while (loadAcq(p.send.head) + dev::kSteps <= s) {
      if (__atomic_load_n(abortWord, __ATOMIC_ACQUIRE)) return false;
      std::this_thread::yield();
    }
    char* slot = buf + (s % dev::kSteps) * kStepBytes;
    const int64_t n = sizeOf(seed, s);
    for (int64_t i = 0; i < n; i++) slot[i] = (char)byteOf(seed, s, i);
    __atomic_store_n(&p.send.fifo[s % dev::kSteps].size, n, __ATOMIC_RELAXED);
    storeRel(p.send.remoteTail, s + 1);
  }
  return true;
}

// Plays a receiving kernel; returns the number of bad bytes (or -1 on abort).
int64_t playReceiver(const dev::Peer& p, uint64_t seed, uint64_t nsteps, const uint32_t* abortWord) {
  const char* buf = p.recv.buffs[dev::kProtoSimple];
  int64_t bad = 0;
  for (uint64_t s = 0; s < nsteps; s++) {
    while (loadAcq(p.recv.tail) <= s) {
      if (__atomic_load_n(abortWord, __ATOMIC_ACQUIRE)) return -1;
      std::this_thread::yield();
    }
    const char* slot = buf + (s % dev::kSteps) * kStepBytes;
    const int64_t n = sizeOf(seed, s);
    const int64_t got = __atomic_load_n(&p.recv.fifo[s % dev::kSteps].size, __ATOMIC_RELAXED);
    if (got != n) bad += 1000000;
    for (int64_t i = 0; i < n; i++) bad += (uint8_t)slot[i] != byteOf(seed, s, i);
    __atomic_store_n(&p.recv.fifo[s % dev::kSteps].size, int64_t{-1}, __ATOMIC_RELAXED);
    storeRel(p.recv.remoteHead, s + 1);
  }
  return bad;
}

class NetLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
    setenv("NCCL_IB_DISABLE", "1", 1);
  }
  void TearDown() override {
    unsetenv("UNICCL_NET_CONNECT_TIMEOUT_MS");
    fake::reset();
  }
  // The three phases, all from this one thread (as a group connecting both
  // ends does): none may wait on a later phase of the peer.
  static void connectPair(TestComm& a, TestComm& b, NetLink& la, NetLink& lb) {
    std::vector<char> ha, hb;
    ASSERT_EQ(la.listen(transportComm(a.comm), 1, kChannels, kStepBytes, &ha), ncclSuccess);
    ASSERT_EQ(lb.listen(transportComm(b.comm), 0, kChannels, kStepBytes, &hb), ncclSuccess);
    ASSERT_EQ(la.setPeerHandles(hb), ncclSuccess);
    ASSERT_EQ(lb.setPeerHandles(ha), ncclSuccess);
    ASSERT_EQ(NetLink::connectAll({&la, &lb}), ncclSuccess);
    ASSERT_EQ(la.start(transportComm(a.comm)), ncclSuccess);
    ASSERT_EQ(lb.start(transportComm(b.comm)), ncclSuccess);
    ASSERT_TRUE(la.connected());
    ASSERT_TRUE(lb.connected());
  }
};

TEST_F(NetLinkTest, BothDirectionsOfEveryChannelCarryExactBytesAcrossManyWraps) {
  TestComm a(0), b(1);
  {
    NetLink la, lb;
    ASSERT_NO_FATAL_FAILURE(connectPair(a, b, la, lb));
    constexpr uint64_t kSteps = 1500;   // 187 wraps of the 8 slots
    std::vector<std::thread> threads;
    std::atomic<int64_t> bad{0};
    std::atomic<int> senderFailures{0};
    for (int c = 0; c < kChannels; c++) {
      dev::Peer pa, pb;
      la.fillPeer(c, &pa);
      lb.fillPeer(c, &pb);
      ASSERT_EQ(pa.send.buffs[dev::kProtoLL], nullptr);   // the network carries Simple only
      const uint64_t seedAB = 100 + c, seedBA = 200 + c;
      threads.emplace_back([&, pa, seedAB] { if (!playSender(pa, seedAB, kSteps, &a.abortWord)) senderFailures++; });
      threads.emplace_back([&, pb, seedAB] { bad += playReceiver(pb, seedAB, kSteps, &b.abortWord); });
      threads.emplace_back([&, pb, seedBA] { if (!playSender(pb, seedBA, kSteps, &b.abortWord)) senderFailures++; });
      threads.emplace_back([&, pa, seedBA] { bad += playReceiver(pa, seedBA, kSteps, &a.abortWord); });
      la.wakeProxy();
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(senderFailures.load(), 0);
    // A second "launch" continues at the running step on the same links.
    dev::Peer pa, pb;
    la.fillPeer(0, &pa);
    lb.fillPeer(0, &pb);
    EXPECT_EQ(loadAcq(pa.send.head), kSteps);
    EXPECT_EQ(loadAcq(pb.recv.tail), kSteps);
  }
  // Normal teardown is not a failure.
  EXPECT_EQ(a.comm->asyncError.load(), ncclSuccess);
  EXPECT_EQ(b.comm->asyncError.load(), ncclSuccess);
  EXPECT_FALSE(a.aborted());
  EXPECT_FALSE(proxyThreadRunning());
  EXPECT_EQ(proxyRefCount(), 0);
}

TEST_F(NetLinkTest, APeerThatGoesAwayAbortsTheCommunicatorWithAnError) {
  TestComm a(0), b(1);
  NetLink la;
  auto lb = std::make_unique<NetLink>();
  ASSERT_NO_FATAL_FAILURE(connectPair(a, b, la, *lb));
  dev::Peer pa;
  la.fillPeer(0, &pa);
  ASSERT_TRUE(playSender(pa, 7, 4, &a.abortWord));   // a little traffic first
  lb.reset();                                         // the peer's links close
  // Rank 0 keeps sending: its proxy's socket I/O fails and the failure
  // must reach the communicator without any call from the user.
  std::thread sender([&] { playSender(pa, 7, 1u << 20, &a.abortWord, /*first=*/4); });
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!a.aborted() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  sender.join();
  EXPECT_TRUE(a.aborted());
  EXPECT_NE(a.comm->asyncError.load(), ncclSuccess);
  EXPECT_EQ(a.comm->hostAbort.load(), 1u);
}

TEST_F(NetLinkTest, APeerThatClosesWhileIdleIsRememberedNotFatal) {
  // What an ordinary ncclCommDestroy on the peer looks like: no error, no
  // abort (this rank may be destroying its communicator next), but the link
  // knows, so the next launch can refuse with a clear message.
  TestComm a(0), b(1);
  NetLink la;
  auto lb = std::make_unique<NetLink>();
  ASSERT_NO_FATAL_FAILURE(connectPair(a, b, la, *lb));
  EXPECT_FALSE(la.peerGone());
  lb.reset();
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!la.peerGone() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_TRUE(la.peerGone());
  EXPECT_EQ(la.peer(), 1);
  EXPECT_EQ(a.comm->asyncError.load(), ncclSuccess);
  EXPECT_FALSE(a.aborted());
}

TEST_F(NetLinkTest, APeerThatNeverConnectsFailsWithinTheTimeout) {
  setenv("UNICCL_NET_CONNECT_TIMEOUT_MS", "300", 1);
  TestComm a(0), b(1);
  NetLink la, lb;
  std::vector<char> ha, hb;
  ASSERT_EQ(la.listen(transportComm(a.comm), 1, kChannels, kStepBytes, &ha), ncclSuccess);
  ASSERT_EQ(lb.listen(transportComm(b.comm), 0, kChannels, kStepBytes, &hb), ncclSuccess);
  ASSERT_EQ(la.setPeerHandles(hb), ncclSuccess);
  // b never connects to a.
  const auto t0 = Clock::now();
  EXPECT_EQ(NetLink::connectAll({&la}), ncclRemoteError);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(s, 5.0);
  EXPECT_FALSE(la.connected());
  EXPECT_STRNE(ncclGetLastError(nullptr), "");
}

TEST_F(NetLinkTest, AbortEndsAWaitingSetupPromptly) {
  TestComm a(0), b(1);
  NetLink la, lb;
  std::vector<char> ha, hb;
  ASSERT_EQ(la.listen(transportComm(a.comm), 1, kChannels, kStepBytes, &ha), ncclSuccess);
  ASSERT_EQ(lb.listen(transportComm(b.comm), 0, kChannels, kStepBytes, &hb), ncclSuccess);
  ASSERT_EQ(la.setPeerHandles(hb), ncclSuccess);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    a.comm->hostAbort.store(1);
  });
  const auto t0 = Clock::now();
  EXPECT_EQ(NetLink::connectAll({&la}), ncclRemoteError);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  aborter.join();
}

TEST_F(NetLinkTest, MismatchedHandlesAreRefused) {
  TestComm a(0);
  NetLink la;
  std::vector<char> ha;
  ASSERT_EQ(la.listen(transportComm(a.comm), 1, kChannels, kStepBytes, &ha), ncclSuccess);
  std::vector<char> wrong(NetLink::kHandleBytes);   // one channel's worth for two channels
  EXPECT_EQ(la.setPeerHandles(wrong), ncclInternalError);
}

// A transport whose connect completes only once the peer's accept has
// answered it (IB: the QP numbers travel in the handshake), both ends driven
// by this one thread: connectAll progresses connects and accepts together
// (connecting every link before accepting any would wait forever). IB on the
// in-process fake fabric.
TEST_F(NetLinkTest, HandshakesThatWaitForThePeersAcceptCompleteFromOneThread) {
  ib::fake::FakeVerbs fv;   // outlives the links, which close their verbs objects
  fv.addDevice(ib::fake::FakeVerbs::roceDevice("mlx5_0"));
  ib::resetForTesting();
  ib::installVerbs(&fv);
  setenv("NCCL_IB_DISABLE", "0", 1);
  TestComm a(0), b(1);
  a.comm->config.netName = b.comm->config.netName = "IB";
  {
    NetLink la, lb;
    std::vector<char> ha, hb;
    const ncclResult_t listened = la.listen(transportComm(a.comm), 1, kChannels, kStepBytes, &ha);
    if (listened == ncclInvalidArgument) GTEST_SKIP() << "built without the IB transport (libibverbs headers)";
    ASSERT_EQ(listened, ncclSuccess);
    ASSERT_EQ(lb.listen(transportComm(b.comm), 0, kChannels, kStepBytes, &hb), ncclSuccess);
    ASSERT_EQ(la.setPeerHandles(hb), ncclSuccess);
    ASSERT_EQ(lb.setPeerHandles(ha), ncclSuccess);
    ASSERT_EQ(NetLink::connectAll({&la, &lb}), ncclSuccess);
    ASSERT_EQ(la.start(transportComm(a.comm)), ncclSuccess);
    ASSERT_EQ(lb.start(transportComm(b.comm)), ncclSuccess);
    for (int c = 0; c < kChannels; c++) {
      dev::Peer pa, pb;
      la.fillPeer(c, &pa);
      lb.fillPeer(c, &pb);
      std::thread sender([&] { EXPECT_TRUE(playSender(pa, 7 + c, 40, &a.abortWord)); });
      EXPECT_EQ(playReceiver(pb, 7 + c, 40, &b.abortWord), 0) << "channel " << c;
      sender.join();
    }
  }
  ib::resetForTesting();
  EXPECT_EQ(fv.liveObjects(), 0);
  EXPECT_TRUE(fv.violations().empty());
}

TEST_F(NetLinkTest, AnUnknownNetIsAClearError) {
  TestComm a(0);
  a.comm->config.netName = "NoSuchNet";
  NetLink la;
  std::vector<char> ha;
  EXPECT_EQ(la.listen(transportComm(a.comm), 1, kChannels, kStepBytes, &ha), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("NoSuchNet"), std::string::npos);
}

}  // namespace
}  // namespace uniccl
