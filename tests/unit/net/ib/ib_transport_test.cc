// The "IB" table end to end on the fake fabric: handshake over real loopback
// TCP, transfers of random data, FIFO wrap-around, iflush, NCCL_IB_DISABLE,
// failing completions and failing QP transitions, and hostile peers at the
// listener (port scans, strangers without the handle's key, floods, silence).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../hostile_peer.h"
#include "../scoped_env.h"
#include "common/util/debug.h"
#include "fake_verbs.h"
#include "net/ib/ib_handshake.h"
#include "net/ib/ib_transport.h"

namespace uniccl {
namespace ib {
namespace {

using fake::FakeVerbs;
using Clock = std::chrono::steady_clock;

std::vector<char> randomBytes(size_t n, uint32_t seed) {
  std::vector<char> v(n);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; i++) v[i] = (char)rng();
  return v;
}

class IbNetTest : public ::testing::TestWithParam<bool> {  // param: InfiniBand (true) or RoCE
 protected:
  void SetUp() override {
    resetForTesting();
    if (GetParam())
      fv.addDevice(FakeVerbs::ibDevice("mlx5_0", 7));
    else
      fv.addDevice(FakeVerbs::roceDevice("mlx5_0"));
    installVerbs(&fv);
    net = ibNetTable();
  }
  void TearDown() override {
    resetForTesting();
    EXPECT_EQ(fv.liveObjects(), 0) << "verbs objects leaked";
    for (const std::string& v : fv.violations()) ADD_FAILURE() << "verbs misuse: " << v;
  }
  void initNet() {
    ASSERT_EQ(net->init(nullptr), ncclSuccess);
    int n = 0;
    ASSERT_EQ(net->devices(&n), ncclSuccess);
    ASSERT_EQ(n, 1);
  }

  // listen/connect/accept from one thread until both ends exist (or one fails).
  ncclResult_t connectPair(void** sendComm, void** recvComm) {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* lc = nullptr;
    ncclResult_t res = net->listen(0, handle, &lc);
    if (res != ncclSuccess) return res;
    res = completePair(handle, lc, sendComm, recvComm);
    EXPECT_EQ(net->closeListen(lc), ncclSuccess);
    return res;
  }

  // connect/accept on an existing listener until both ends exist (or one fails).
  ncclResult_t completePair(char* handle, void* lc, void** sendComm, void** recvComm) {
    *sendComm = *recvComm = nullptr;
    ncclResult_t sres = ncclSuccess, rres = ncclSuccess;
    bool sendFailed = false, recvFailed = false;
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while ((*sendComm == nullptr && !sendFailed) || (*recvComm == nullptr && !recvFailed)) {
      if (*sendComm == nullptr && !sendFailed) {
        sres = net->connect(0, handle, sendComm, nullptr);
        sendFailed = sres != ncclSuccess;
      }
      if (*recvComm == nullptr && !recvFailed) {
        rres = net->accept(lc, recvComm, nullptr);
        recvFailed = rres != ncclSuccess;
      }
      if (Clock::now() > deadline) break;
      if (sendFailed && *recvComm == nullptr && Clock::now() > deadline - std::chrono::seconds(18)) break;
    }
    if (sres != ncclSuccess) return sres;
    if (rres != ncclSuccess) return rres;
    return *sendComm && *recvComm ? ncclSuccess : ncclRemoteError;
  }

  ncclResult_t waitDone(void* req, int* size) {
    auto deadline = Clock::now() + std::chrono::seconds(20);
    int done = 0;
    while (!done) {
      ncclResult_t res = net->test(req, &done, size);
      if (res != ncclSuccess) return res;
      if (Clock::now() > deadline) return ncclInternalError;
    }
    return ncclSuccess;
  }

  // One message of random data from sc to rc, checked byte for byte.
  void transferOnce(void* sc, void* rc, int bytes, uint32_t seed) {
    std::vector<char> src = randomBytes((size_t)bytes, seed), dst((size_t)bytes + 1, 0x5a);
    void *smh = nullptr, *rmh = nullptr;
    ASSERT_EQ(net->regMr(sc, src.data(), src.size(), NCCL_PTR_HOST, &smh), ncclSuccess);
    ASSERT_EQ(net->regMr(rc, dst.data(), dst.size(), NCCL_PTR_HOST, &rmh), ncclSuccess);
    void* dp = dst.data();
    int cap = bytes, tag = 9, rs = -1;
    void *rreq = nullptr, *sreq = nullptr;
    ASSERT_EQ(net->irecv(rc, 1, &dp, &cap, &tag, &rmh, &rreq), ncclSuccess);
    ASSERT_NE(rreq, nullptr);
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (sreq == nullptr) {
      ASSERT_EQ(net->isend(sc, src.data(), bytes, 9, smh, &sreq), ncclSuccess);
      ASSERT_LT(Clock::now(), deadline);
    }
    ASSERT_EQ(waitDone(rreq, &rs), ncclSuccess);
    ASSERT_EQ(waitDone(sreq, nullptr), ncclSuccess);
    EXPECT_EQ(rs, bytes);
    EXPECT_EQ(memcmp(dst.data(), src.data(), (size_t)bytes), 0);
    EXPECT_EQ((unsigned char)dst[bytes], 0x5a);
    net->deregMr(sc, smh);
    net->deregMr(rc, rmh);
  }

  FakeVerbs fv;
  const NetApi* net = nullptr;
};

TEST_P(IbNetTest, Properties) {
  initNet();
  ncclNetProperties_v8_t p;
  ASSERT_EQ(net->getProperties(0, &p), ncclSuccess);
  EXPECT_STREQ(p.name, "mlx5_0");
  EXPECT_EQ(p.port, 1);
  EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(p.maxRecvs, 1);
  EXPECT_GT(p.speed, 0);
  EXPECT_STREQ(net->name, "IB");
  EXPECT_EQ(net->getProperties(1, &p), ncclInvalidArgument);
}

TEST_P(IbNetTest, TransfersManySizesThroughTheTable) {
  initNet();
  void *sc = nullptr, *rc = nullptr;
  ASSERT_EQ(connectPair(&sc, &rc), ncclSuccess);
  const std::vector<int> sizes = {0, 1, 7, 4096, 4097, 65537, (1 << 20) + 3, 3, 0, 12345};
  const int kMax = (1 << 20) + 3;
  const int kWindow = kMax + 1;  // one guard byte past the largest message
  std::vector<char> src(kWindow * 2), dst(kWindow * 2);
  void *smh = nullptr, *rmh = nullptr;
  ASSERT_EQ(net->regMr(sc, src.data(), src.size(), NCCL_PTR_HOST, &smh), ncclSuccess);
  ASSERT_EQ(net->regMr(rc, dst.data(), dst.size(), NCCL_PTR_HOST, &rmh), ncclSuccess);
  // 3 x the FIFO depth, sizes cycling, two windows of the buffer alternating.
  for (int m = 0; m < 3 * NCCL_NET_MAX_REQUESTS; m++) {
    int size = sizes[m % sizes.size()];
    char* s = src.data() + (m % 2) * kWindow;
    char* d = dst.data() + (m % 2) * kWindow;
    std::vector<char> data = randomBytes((size_t)size, 1000 + m);
    if (size > 0) memcpy(s, data.data(), size);
    memset(d, 0x5a, kWindow);
    void* rreq = nullptr;
    int cap = kMax, tag = m;
    void* dp = d;
    ASSERT_EQ(net->irecv(rc, 1, &dp, &cap, &tag, &rmh, &rreq), ncclSuccess);
    ASSERT_NE(rreq, nullptr);
    void* sreq = nullptr;
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (sreq == nullptr) {  // NULL until the FIFO entry has landed
      ASSERT_EQ(net->isend(sc, s, size, m, smh, &sreq), ncclSuccess);
      ASSERT_LT(Clock::now(), deadline);
    }
    int rsize = -1, ssize = -1;
    ASSERT_EQ(waitDone(rreq, &rsize), ncclSuccess);
    ASSERT_EQ(waitDone(sreq, &ssize), ncclSuccess);
    EXPECT_EQ(rsize, size) << "message " << m;
    EXPECT_EQ(ssize, size);
    if (size > 0) {
      ASSERT_EQ(memcmp(d, data.data(), size), 0) << "message " << m << " of " << size << " bytes";
    }
    ASSERT_EQ((unsigned char)d[size], 0x5a) << "wrote past the message";
    void* freq = nullptr;  // host memory: nothing to flush
    ASSERT_EQ(net->iflush(rc, 1, &dp, &rsize, &rmh, &freq), ncclSuccess);
    EXPECT_EQ(freq, nullptr);
  }
  EXPECT_EQ(net->deregMr(sc, smh), ncclSuccess);
  EXPECT_EQ(net->deregMr(rc, rmh), ncclSuccess);
  EXPECT_EQ(net->closeSend(sc), ncclSuccess);
  EXPECT_EQ(net->closeRecv(rc), ncclSuccess);
}

// A full window: 8 receives posted before any send, the 9th refused, and the
// sender finding its FIFO entries in order across the wrap.
TEST_P(IbNetTest, FullWindowInFlight) {
  initNet();
  void *sc = nullptr, *rc = nullptr;
  ASSERT_EQ(connectPair(&sc, &rc), ncclSuccess);
  const int kN = NCCL_NET_MAX_REQUESTS, kBytes = 3001, kRounds = 3;
  std::vector<char> src(kN * kBytes), dst(kN * kBytes);
  void *smh = nullptr, *rmh = nullptr;
  ASSERT_EQ(net->regMr(sc, src.data(), src.size(), NCCL_PTR_HOST, &smh), ncclSuccess);
  ASSERT_EQ(net->regMr(rc, dst.data(), dst.size(), NCCL_PTR_HOST, &rmh), ncclSuccess);
  for (int round = 0; round < kRounds; round++) {
    std::vector<char> data = randomBytes(src.size(), 77 + round);
    memcpy(src.data(), data.data(), src.size());
    memset(dst.data(), 0, dst.size());
    void* rreq[kN];
    void* sreq[kN];
    for (int i = 0; i < kN; i++) {
      void* dp = dst.data() + i * kBytes;
      int cap = kBytes, tag = 5;
      ASSERT_EQ(net->irecv(rc, 1, &dp, &cap, &tag, &rmh, &rreq[i]), ncclSuccess);
      ASSERT_NE(rreq[i], nullptr);
    }
    void* extra = nullptr;
    void* dp = dst.data();
    int cap = kBytes, tag = 5;
    ASSERT_EQ(net->irecv(rc, 1, &dp, &cap, &tag, &rmh, &extra), ncclSuccess);
    EXPECT_EQ(extra, nullptr) << "a 9th receive in flight";
    for (int i = 0; i < kN; i++) {
      sreq[i] = nullptr;
      auto deadline = Clock::now() + std::chrono::seconds(10);
      while (sreq[i] == nullptr) {
        ASSERT_EQ(net->isend(sc, src.data() + i * kBytes, kBytes - i, 5, smh, &sreq[i]), ncclSuccess);
        ASSERT_LT(Clock::now(), deadline);
      }
    }
    for (int i = kN - 1; i >= 0; i--) {  // any order
      int rs = -1;
      ASSERT_EQ(waitDone(rreq[i], &rs), ncclSuccess);
      EXPECT_EQ(rs, kBytes - i);
      ASSERT_EQ(waitDone(sreq[i], nullptr), ncclSuccess);
      ASSERT_EQ(memcmp(dst.data() + i * kBytes, src.data() + i * kBytes, kBytes - i), 0) << "message " << i;
    }
  }
  net->deregMr(sc, smh);
  net->deregMr(rc, rmh);
  net->closeSend(sc);
  net->closeRecv(rc);
}

// Sender and receiver on their own threads (what ThreadSanitizer checks).
TEST_P(IbNetTest, TwoThreads) {
  initNet();
  void *sc = nullptr, *rc = nullptr;
  ASSERT_EQ(connectPair(&sc, &rc), ncclSuccess);
  const int kMsgs = 40, kBytes = 20000;
  std::vector<char> src = randomBytes((size_t)kMsgs * kBytes, 9), dst((size_t)kMsgs * kBytes, 0);
  void *smh = nullptr, *rmh = nullptr;
  ASSERT_EQ(net->regMr(sc, src.data(), src.size(), NCCL_PTR_HOST, &smh), ncclSuccess);
  ASSERT_EQ(net->regMr(rc, dst.data(), dst.size(), NCCL_PTR_HOST, &rmh), ncclSuccess);
  std::atomic<int> errors{0};
  std::thread sender([&] {
    for (int m = 0; m < kMsgs; m++) {
      void* req = nullptr;
      auto deadline = Clock::now() + std::chrono::seconds(20);
      while (req == nullptr && Clock::now() < deadline)
        if (net->isend(sc, src.data() + (size_t)m * kBytes, kBytes - m, m, smh, &req) != ncclSuccess) break;
      if (req == nullptr || waitDone(req, nullptr) != ncclSuccess) {
        errors++;
        return;
      }
    }
  });
  for (int m = 0; m < kMsgs; m++) {
    void* dp = dst.data() + (size_t)m * kBytes;
    int cap = kBytes, tag = m, rs = -1;
    void* req = nullptr;
    ASSERT_EQ(net->irecv(rc, 1, &dp, &cap, &tag, &rmh, &req), ncclSuccess);
    ASSERT_NE(req, nullptr);
    ASSERT_EQ(waitDone(req, &rs), ncclSuccess);
    EXPECT_EQ(rs, kBytes - m);
  }
  sender.join();
  EXPECT_EQ(errors.load(), 0);
  for (int m = 0; m < kMsgs; m++)
    ASSERT_EQ(memcmp(dst.data() + (size_t)m * kBytes, src.data() + (size_t)m * kBytes, kBytes - m), 0);
  net->deregMr(sc, smh);
  net->deregMr(rc, rmh);
  net->closeSend(sc);
  net->closeRecv(rc);
}

TEST_P(IbNetTest, GpuDirectRegistersAndFlushes) {
  ScopedEnv gdr("UNICCL_IB_GDR", "1");
  initNet();
  ncclNetProperties_v8_t p;
  ASSERT_EQ(net->getProperties(0, &p), ncclSuccess);
  EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF);
  void *sc = nullptr, *rc = nullptr;
  ASSERT_EQ(connectPair(&sc, &rc), ncclSuccess);
  EXPECT_EQ(fv.transitions(QpState::kRts), 3) << "data QPs and the receiver's loopback flush QP";
  std::vector<char> src = randomBytes(5000, 3), dst(5000, 0);
  void *smh = nullptr, *rmh = nullptr;
  // "GPU" memory in the fake is host memory registered as such.
  ASSERT_EQ(net->regMrDmaBuf(sc, src.data(), src.size(), NCCL_PTR_CUDA, 0, 42, &smh), ncclSuccess);
  ASSERT_EQ(net->regMr(rc, dst.data(), dst.size(), NCCL_PTR_CUDA, &rmh), ncclSuccess);
  void* dp = dst.data();
  int cap = 5000, tag = 1, rs = -1;
  void *rreq = nullptr, *sreq = nullptr;
  ASSERT_EQ(net->irecv(rc, 1, &dp, &cap, &tag, &rmh, &rreq), ncclSuccess);
  while (sreq == nullptr) ASSERT_EQ(net->isend(sc, src.data(), 4999, 1, smh, &sreq), ncclSuccess);
  ASSERT_EQ(waitDone(rreq, &rs), ncclSuccess);
  ASSERT_EQ(waitDone(sreq, nullptr), ncclSuccess);
  EXPECT_EQ(rs, 4999);
  void* freq = nullptr;
  ASSERT_EQ(net->iflush(rc, 1, &dp, &rs, &rmh, &freq), ncclSuccess);
  ASSERT_NE(freq, nullptr) << "GPU memory is flushed by an RDMA read";
  ASSERT_EQ(waitDone(freq, nullptr), ncclSuccess);
  EXPECT_EQ(memcmp(dst.data(), src.data(), 4999), 0);
  net->deregMr(sc, smh);
  net->deregMr(rc, rmh);
  net->closeSend(sc);
  net->closeRecv(rc);
}

TEST_P(IbNetTest, HostOnlyRefusesGpuMemory) {
  initNet();
  void *sc = nullptr, *rc = nullptr;
  ASSERT_EQ(connectPair(&sc, &rc), ncclSuccess);
  std::vector<char> buf(64);
  void* mh = nullptr;
  EXPECT_EQ(net->regMr(sc, buf.data(), buf.size(), NCCL_PTR_CUDA, &mh), ncclInternalError);
  EXPECT_NE(std::string(lastErrorMessage()).find("UNICCL_IB_GDR"), std::string::npos) << lastErrorMessage();
  EXPECT_EQ(net->regMrDmaBuf(sc, buf.data(), buf.size(), NCCL_PTR_DMABUF, 0, 3, &mh), ncclInternalError);
  EXPECT_EQ(net->regMr(sc, buf.data(), 0, NCCL_PTR_HOST, &mh), ncclInvalidArgument);
  EXPECT_EQ(mh, nullptr);
  net->closeSend(sc);
  net->closeRecv(rc);
}

TEST_P(IbNetTest, BadUseIsRefused) {
  initNet();
  void *sc = nullptr, *rc = nullptr;
  ASSERT_EQ(connectPair(&sc, &rc), ncclSuccess);
  std::vector<char> a = randomBytes(256, 5), b(256);
  void *smh = nullptr, *rmh = nullptr;
  ASSERT_EQ(net->regMr(sc, a.data(), 128, NCCL_PTR_HOST, &smh), ncclSuccess);
  ASSERT_EQ(net->regMr(rc, b.data(), b.size(), NCCL_PTR_HOST, &rmh), ncclSuccess);
  void* req = nullptr;
  EXPECT_EQ(net->isend(sc, a.data(), 16, 0, nullptr, &req), ncclInvalidArgument);  // unregistered
  EXPECT_EQ(net->isend(sc, a.data() + 100, 64, 0, smh, &req), ncclInvalidArgument);  // outside its region
  EXPECT_EQ(net->isend(sc, a.data(), -1, 0, smh, &req), ncclInvalidArgument);
  void* dp = b.data();
  int cap = 256, tag = 1;
  void* dps[2] = {dp, dp};
  int caps[2] = {1, 1}, tags[2] = {1, 1};
  void* mhs[2] = {rmh, rmh};
  EXPECT_EQ(net->irecv(rc, 2, dps, caps, tags, mhs, &req), ncclInternalError);  // maxRecvs is 1
  EXPECT_EQ(net->test(nullptr, nullptr, nullptr), ncclInvalidArgument);
  // Size larger than the receive: the sender refuses it (message truncated).
  cap = 32;
  ASSERT_EQ(net->irecv(rc, 1, &dp, &cap, &tag, &rmh, &req), ncclSuccess);
  void* sreq = nullptr;
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < 1000 && res == ncclSuccess && sreq == nullptr; i++) res = net->isend(sc, a.data(), 64, 1, smh, &sreq);
  EXPECT_EQ(res, ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("truncated"), std::string::npos) << lastErrorMessage();
  net->deregMr(sc, smh);
  net->deregMr(rc, rmh);
  net->closeSend(sc);
  net->closeRecv(rc);
}

TEST_P(IbNetTest, TagMismatchIsReported) {
  initNet();
  void *sc = nullptr, *rc = nullptr;
  ASSERT_EQ(connectPair(&sc, &rc), ncclSuccess);
  std::vector<char> a(64), b(64);
  void *smh = nullptr, *rmh = nullptr;
  ASSERT_EQ(net->regMr(sc, a.data(), a.size(), NCCL_PTR_HOST, &smh), ncclSuccess);
  ASSERT_EQ(net->regMr(rc, b.data(), b.size(), NCCL_PTR_HOST, &rmh), ncclSuccess);
  void* dp = b.data();
  int cap = 64, tag = 3;
  void *req = nullptr, *sreq = nullptr;
  ASSERT_EQ(net->irecv(rc, 1, &dp, &cap, &tag, &rmh, &req), ncclSuccess);
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < 1000 && res == ncclSuccess && sreq == nullptr; i++) res = net->isend(sc, a.data(), 8, 4, smh, &sreq);
  EXPECT_EQ(res, ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("tag"), std::string::npos);
  net->deregMr(sc, smh);
  net->deregMr(rc, rmh);
  net->closeSend(sc);
  net->closeRecv(rc);
}

TEST_P(IbNetTest, FailedCompletionFailsTest) {
  initNet();
  void *sc = nullptr, *rc = nullptr;
  ASSERT_EQ(connectPair(&sc, &rc), ncclSuccess);
  std::vector<char> a = randomBytes(100, 1), b(100);
  void *smh = nullptr, *rmh = nullptr;
  ASSERT_EQ(net->regMr(sc, a.data(), a.size(), NCCL_PTR_HOST, &smh), ncclSuccess);
  ASSERT_EQ(net->regMr(rc, b.data(), b.size(), NCCL_PTR_HOST, &rmh), ncclSuccess);
  void* dp = b.data();
  int cap = 100, tag = 0;
  void *rreq = nullptr, *sreq = nullptr;
  ASSERT_EQ(net->irecv(rc, 1, &dp, &cap, &tag, &rmh, &rreq), ncclSuccess);
  while (sreq == nullptr) ASSERT_EQ(net->isend(sc, a.data(), 100, 0, smh, &sreq), ncclSuccess);
  fv.failNextCompletion(kWcRemAccessErr);
  clearLastError();
  int done = 0;
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < 100000 && res == ncclSuccess && !done; i++) {
    int rdone = 0;
    ASSERT_EQ(net->test(rreq, &rdone, nullptr), ncclSuccess);  // lands the write at the receiver
    ASSERT_EQ(rdone, 0);
    res = net->test(sreq, &done, nullptr);
  }
  EXPECT_EQ(res, ncclRemoteError);
  EXPECT_EQ(done, 0);
  std::string msg = lastErrorMessage();
  EXPECT_NE(msg.find("remote access error"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mlx5_0"), std::string::npos) << msg;
  // The comm stays failed; the receive never completes.
  EXPECT_EQ(net->test(sreq, &done, nullptr), ncclRemoteError);
  res = net->test(rreq, &done, nullptr);
  EXPECT_EQ(done, 0);
  net->deregMr(sc, smh);
  net->deregMr(rc, rmh);
  net->closeSend(sc);
  net->closeRecv(rc);
}

TEST_P(IbNetTest, QpTransitionFailureAtConnect) {
  initNet();
  fv.failModifyTo(QpState::kRtr, EINVAL);
  void *sc = nullptr, *rc = nullptr;
  clearLastError();
  ncclResult_t res = connectPair(&sc, &rc);
  EXPECT_NE(res, ncclSuccess);
  EXPECT_EQ(sc, nullptr);
  EXPECT_EQ(rc, nullptr);
  // Whichever end hit it, its WARN names the step; the other end sees the close.
  EXPECT_EQ(fv.transitions(QpState::kRtr), 0);
}

TEST_P(IbNetTest, ConnectTimesOutWithoutAcceptor) {
  ScopedEnv t("UNICCL_NET_CONNECT_TIMEOUT_MS", "300");
  initNet();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  ASSERT_EQ(net->listen(0, handle, &lc), ncclSuccess);
  void* sc = nullptr;
  ncclResult_t res = ncclSuccess;
  auto start = Clock::now();
  while (res == ncclSuccess && sc == nullptr && Clock::now() - start < std::chrono::seconds(10))
    res = net->connect(0, handle, &sc, nullptr);
  EXPECT_EQ(res, ncclRemoteError);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(std::string(lastErrorMessage()).find("UNICCL_NET_CONNECT_TIMEOUT_MS"), std::string::npos);
  net->closeListen(lc);
}

// The listener of a handle is gone (its process died): connect fails at
// once with ncclRemoteError, not after the connect timeout's retries.
TEST_P(IbNetTest, ConnectToAClosedListenerFailsAtOnce) {
  initNet();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  ASSERT_EQ(net->listen(0, handle, &lc), ncclSuccess);
  ASSERT_EQ(net->closeListen(lc), ncclSuccess);
  void* sc = nullptr;
  auto start = Clock::now();
  EXPECT_EQ(net->connect(0, handle, &sc, nullptr), ncclRemoteError);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(sc, nullptr);
  EXPECT_NE(std::string(lastErrorMessage()).find("listener is gone"), std::string::npos) << lastErrorMessage();
}

// A connect in progress (the acceptor never answered) that its caller gives
// up: netAbandonConnect frees its QP, CQ, FIFO registration and socket.
TEST_P(IbNetTest, AbandonedConnectLeavesNothing) {
  initNet();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  ASSERT_EQ(net->listen(0, handle, &lc), ncclSuccess);
  const int before = fv.liveObjects();
  void* sc = nullptr;
  ASSERT_EQ(net->connect(0, handle, &sc, nullptr), ncclSuccess);
  ASSERT_EQ(sc, nullptr);  // in progress: waits for accept()
  EXPECT_GT(fv.liveObjects(), before);
  netAbandonConnect(net, handle);
  EXPECT_EQ(fv.liveObjects(), before);
  EXPECT_EQ(net->closeListen(lc), ncclSuccess);
}

TEST_P(IbNetTest, DisableReportsNoDevices) {
  ScopedEnv d("NCCL_IB_DISABLE", "1");
  ASSERT_EQ(net->init(nullptr), ncclSuccess);
  int n = -1;
  ASSERT_EQ(net->devices(&n), ncclSuccess);
  EXPECT_EQ(n, 0);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  EXPECT_EQ(net->listen(0, handle, &lc), ncclInvalidArgument);
}

TEST_P(IbNetTest, HcaFilterLeavesNothing) {
  ScopedEnv h("NCCL_IB_HCA", "^mlx5");
  ASSERT_EQ(net->init(nullptr), ncclSuccess);
  int n = -1;
  ASSERT_EQ(net->devices(&n), ncclSuccess);
  EXPECT_EQ(n, 0);
}

TEST_P(IbNetTest, BadHcaSpecFailsInit) {
  ScopedEnv h("NCCL_IB_HCA", "mlx5_0:zero");
  EXPECT_EQ(net->init(nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("NCCL_IB_HCA"), std::string::npos);
}

// What nmap -sT does: connect, then close (or reset) at once. accept() drops
// them and goes on; the real peer's connection comes through.
TEST_P(IbNetTest, PortScanDoesNotFailAccept) {
  initNet();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  ASSERT_EQ(net->listen(0, handle, &lc), ncclSuccess);
  hostile::HandleView h = hostile::viewHandle(handle);
  for (int i = 0; i < 10; i++) {
    Socket scan;
    ASSERT_TRUE(hostile::connectRaw(h.addr, &scan));
    if (i % 2) {
      struct linger l = {1, 0};
      setsockopt(scan.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    scan.close();
  }
  void* rc = nullptr;
  for (int i = 0; i < 50; i++) {
    ASSERT_EQ(net->accept(lc, &rc, nullptr), ncclSuccess) << lastErrorMessage();
    ASSERT_EQ(rc, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void* sc = nullptr;
  ASSERT_EQ(completePair(handle, lc, &sc, &rc), ncclSuccess);
  transferOnce(sc, rc, 70001, 81);
  net->closeSend(sc);
  net->closeRecv(rc);
  net->closeListen(lc);
}

// Strangers opening with garbage, a proof of another key, or a proof of the
// right key made for another use (the Socket listener's context): closed
// without an answer, and no verbs object is created for any of them.
TEST_P(IbNetTest, WrongKeyPeersAreRefused) {
  initNet();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  ASSERT_EQ(net->listen(0, handle, &lc), ncclSuccess);
  const int objectsBefore = fv.liveObjects();
  hostile::HandleView h = hostile::viewHandle(handle);
  std::vector<Opening> openings(3);
  std::vector<char> junk = randomBytes(sizeof(Opening), 82);
  memcpy(&openings[0], junk.data(), sizeof(Opening));
  openings[1].response = hostile::proofOfOtherKey(h, "net-ib");
  ASSERT_TRUE(makeResponse(h.secret.key, "net-socket", h.secret.challenge, &openings[2].response));
  for (int i = 1; i < 3; i++) openings[i].info = makeConnInfo(QpEndpoint{}, 0, 0);
  for (size_t i = 0; i < openings.size(); i++) {
    Socket stranger;
    ASSERT_TRUE(hostile::connectRaw(h.addr, &stranger));
    ASSERT_EQ(stranger.sendAll(&openings[i], sizeof(Opening), deadlineAfterMs(5000)), ncclSuccess);
    size_t answered = 0;
    void* rc = nullptr;
    ncclResult_t res = ncclSuccess;
    auto pump = [&] {
      if (res == ncclSuccess) res = net->accept(lc, &rc, nullptr);
    };
    EXPECT_TRUE(hostile::closedByListener(stranger, 10, pump, &answered)) << "stranger " << i << " not closed";
    EXPECT_EQ(answered, 0u) << "the listener answered stranger " << i;
    EXPECT_EQ(res, ncclSuccess) << lastErrorMessage();
    EXPECT_EQ(rc, nullptr);
    EXPECT_EQ(fv.liveObjects(), objectsBefore) << "verbs objects made for stranger " << i;
  }
  void *sc = nullptr, *rc = nullptr;
  ASSERT_EQ(completePair(handle, lc, &sc, &rc), ncclSuccess);
  transferOnce(sc, rc, 4099, 83);
  net->closeSend(sc);
  net->closeRecv(rc);
  net->closeListen(lc);
}

// A connection that sends nothing does not hold up the real peer and is
// dropped after its deadline.
TEST_P(IbNetTest, SilentConnectionIsDroppedAndDoesNotBlockTheRealPeer) {
  ScopedEnv t("UNICCL_NET_CONNECT_TIMEOUT_MS", "1000");
  initNet();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  ASSERT_EQ(net->listen(0, handle, &lc), ncclSuccess);
  hostile::HandleView h = hostile::viewHandle(handle);
  Socket silent;
  ASSERT_TRUE(hostile::connectRaw(h.addr, &silent));
  void* rc = nullptr;
  ASSERT_EQ(net->accept(lc, &rc, nullptr), ncclSuccess);
  void* sc = nullptr;
  ASSERT_EQ(completePair(handle, lc, &sc, &rc), ncclSuccess);
  transferOnce(sc, rc, 3000, 84);
  size_t answered = 0;
  void* more = nullptr;
  auto pump = [&] { EXPECT_EQ(net->accept(lc, &more, nullptr), ncclSuccess); };
  // 1 s deadline; 10 s is the bound so that a slow machine cannot fail it.
  EXPECT_TRUE(hostile::closedByListener(silent, 10, pump, &answered)) << "the silent connection was kept";
  EXPECT_EQ(answered, 0u);
  EXPECT_EQ(more, nullptr);
  net->closeSend(sc);
  net->closeRecv(rc);
  net->closeListen(lc);
}

// More idle connections than the listener keeps, made before the real peer
// connects (the accept calls in between are the proxy's polling).
TEST_P(IbNetTest, FloodOfIdleConnectionsDoesNotKeepTheRealPeerOut) {
  const int flood = 2 * (int)kMaxPendingConnections + 100;
  rlimit lim;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_cur < (rlim_t)flood + 600) {
    rlimit more = lim;
    more.rlim_cur = std::min<rlim_t>(lim.rlim_max, (rlim_t)flood + 600);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &more), 0);
  }
  initNet();
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  ASSERT_EQ(net->listen(0, handle, &lc), ncclSuccess);
  hostile::HandleView h = hostile::viewHandle(handle);
  std::vector<Socket> idle(flood);
  void* rc = nullptr;
  for (int i = 0; i < flood; i++) {
    ASSERT_TRUE(hostile::connectRaw(h.addr, &idle[i])) << "flood connection " << i;
    if (i % 64 == 63) {
      ASSERT_EQ(net->accept(lc, &rc, nullptr), ncclSuccess) << lastErrorMessage();
    }
  }
  void* sc = nullptr;
  ASSERT_EQ(completePair(handle, lc, &sc, &rc), ncclSuccess);
  transferOnce(sc, rc, 100000, 85);
  net->closeSend(sc);
  net->closeRecv(rc);
  net->closeListen(lc);
  idle.clear();
  setrlimit(RLIMIT_NOFILE, &lim);
}

INSTANTIATE_TEST_SUITE_P(LinkLayers, IbNetTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "IB" : "RoCE"; });

#ifdef UNICCL_NET_IB
// The loader lists IB ahead of Socket: chosen when it has devices, skipped
// when NCCL_IB_DISABLE leaves it none (NCCL's order).
TEST(IbNetSelect, PreferredWithDevicesElseSocket) {
  resetForTesting();
  FakeVerbs fv;
  fv.addDevice(FakeVerbs::roceDevice("mlx5_0"));
  installVerbs(&fv);
  ScopedEnv np("NCCL_NET_PLUGIN", "none"), nn("NCCL_NET", nullptr);
  netUnloadForTesting();
  const NetApi* api = nullptr;
  ASSERT_EQ(netSelect(&api), ncclSuccess);
  EXPECT_STREQ(api->name, "IB");
  netUnloadForTesting();
  resetForTesting();
  installVerbs(&fv);
  {
    ScopedEnv d("NCCL_IB_DISABLE", "1");
    ASSERT_EQ(netSelect(&api), ncclSuccess);
    EXPECT_STREQ(api->name, "Socket");
  }
  netUnloadForTesting();
  resetForTesting();
  EXPECT_EQ(fv.liveObjects(), 0);
}
#endif

TEST(IbNetNoDevice, ZeroDevices) {
  resetForTesting();
  FakeVerbs fv;
  installVerbs(&fv);
  ASSERT_EQ(ibNetTable()->init(nullptr), ncclSuccess);
  int n = -1;
  ASSERT_EQ(ibNetTable()->devices(&n), ncclSuccess);
  EXPECT_EQ(n, 0);
  resetForTesting();
}

}  // namespace
}  // namespace ib
}  // namespace uniccl
