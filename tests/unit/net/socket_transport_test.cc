// The Socket transport driven only through its net plugin table, on loopback:
// handshake, transfers of random data, many requests in flight, ordering,
// tag/size mismatches, peers that close or die mid-transfer, dead listeners,
// and hostile peers at the listener (port scans, strangers without the
// handle's key, floods, silent connections, fd exhaustion).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/util/debug.h"
#include "common/util/socket.h"
#include "hostile_peer.h"
#include "net/socket_transport.h"
#include "scoped_env.h"

namespace uniccl {
namespace {

using std::chrono::steady_clock;

std::vector<char> randomBytes(size_t n, uint32_t seed) {
  std::vector<char> v(n);
  std::mt19937 rng(seed);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    uint32_t r = rng();
    memcpy(&v[i], &r, 4);
  }
  for (; i < n; i++) v[i] = (char)rng();
  return v;
}

// The "large" transfer: 64 MiB, smaller where the test is slowed down
// (ThreadSanitizer) through UNICCL_TEST_NET_BIG_BYTES.
size_t bigBytes() {
  const char* v = getenv("UNICCL_TEST_NET_BIG_BYTES");
  return v ? (size_t)strtoull(v, nullptr, 0) : (size_t)64 << 20;
}

class SocketNetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    net = socketNetApi();
    ASSERT_EQ(net->init(nullptr), ncclSuccess);
    int ndev = 0;
    ASSERT_EQ(net->devices(&ndev), ncclSuccess);
    ASSERT_GE(ndev, 1);
  }

  // Drives listen/connect/accept from one thread until both ends exist.
  void connectPair(void** sendComm, void** recvComm) {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listenComm = nullptr;
    ASSERT_EQ(net->listen(0, handle, &listenComm), ncclSuccess);
    ASSERT_NE(listenComm, nullptr);
    completePair(handle, listenComm, sendComm, recvComm);
    EXPECT_EQ(net->closeListen(listenComm), ncclSuccess);
  }

  // Drives connect/accept on an existing listener until both ends exist.
  void completePair(char* handle, void* listenComm, void** sendComm, void** recvComm) {
    *sendComm = *recvComm = nullptr;
    auto deadline = steady_clock::now() + std::chrono::seconds(10);
    while (*sendComm == nullptr || *recvComm == nullptr) {
      ASSERT_LT(steady_clock::now(), deadline) << "handshake did not finish";
      ncclNetDeviceHandle_v8_t* dev = nullptr;
      if (*sendComm == nullptr) {
        ASSERT_EQ(net->connect(0, handle, sendComm, &dev), ncclSuccess);
      }
      if (*recvComm == nullptr) {
        ASSERT_EQ(net->accept(listenComm, recvComm, &dev), ncclSuccess);
      }
    }
  }

  // Tests a request until done or error; returns the test() result.
  ncclResult_t waitRequest(void* req, int* size, int seconds = 20) {
    auto deadline = steady_clock::now() + std::chrono::seconds(seconds);
    int done = 0;
    while (steady_clock::now() < deadline) {
      ncclResult_t res = net->test(req, &done, size);
      if (res != ncclSuccess) return res;
      if (done) return ncclSuccess;
    }
    ADD_FAILURE() << "request did not complete in " << seconds << " s";
    return ncclInternalError;
  }

  // One message each way of the pair, driven from this thread.
  void transfer(void* sendComm, void* recvComm, size_t bytes, uint32_t seed, int tag = 7) {
    std::vector<char> src = randomBytes(bytes, seed);
    std::vector<char> dst = randomBytes(bytes + 16, seed + 1);  // never the expected content
    void *sreq = nullptr, *rreq = nullptr;
    void* data = dst.data();
    int capacity = (int)dst.size();
    auto deadline = steady_clock::now() + std::chrono::seconds(20);
    while (sreq == nullptr) {
      ASSERT_EQ(net->isend(sendComm, src.data(), (int)bytes, tag, nullptr, &sreq), ncclSuccess);
      ASSERT_LT(steady_clock::now(), deadline);
    }
    while (rreq == nullptr) {
      ASSERT_EQ(net->irecv(recvComm, 1, &data, &capacity, &tag, nullptr, &rreq), ncclSuccess);
      ASSERT_LT(steady_clock::now(), deadline);
    }
    int sdone = 0, rdone = 0, ssize = -1, rsize = -1;
    while (!sdone || !rdone) {
      ASSERT_LT(steady_clock::now(), deadline) << "transfer of " << bytes << " bytes did not finish";
      if (!sdone) {
        ASSERT_EQ(net->test(sreq, &sdone, &ssize), ncclSuccess);
      }
      if (!rdone) {
        ASSERT_EQ(net->test(rreq, &rdone, &rsize), ncclSuccess);
      }
    }
    EXPECT_EQ(ssize, (int)bytes);
    EXPECT_EQ(rsize, (int)bytes);
    EXPECT_EQ(memcmp(src.data(), dst.data(), bytes), 0) << "data corrupted in a " << bytes << "-byte transfer";
  }

  const NetApi* net = nullptr;
};

TEST_F(SocketNetTest, PropertiesDescribeLoopback) {
  ncclNetProperties_v8_t props;
  ASSERT_EQ(net->getProperties(0, &props), ncclSuccess);
  EXPECT_STREQ(props.name, "lo");
  EXPECT_EQ(props.ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(props.maxRecvs, 1);
  EXPECT_GT(props.speed, 0);
  EXPECT_EQ(props.netDeviceType, NCCL_NET_DEVICE_HOST);
  EXPECT_STREQ(net->name, "Socket");
  EXPECT_EQ(net->getProperties(99, &props), ncclInvalidArgument);
}

TEST_F(SocketNetTest, TransfersBetweenTwoThreads) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listenComm), ncclSuccess);
  const size_t sizes[] = {1, (1 << 20) + 7, bigBytes(), 0};
  bool senderOk = false;
  std::thread sender([&] {
    void* sendComm = nullptr;
    ncclNetDeviceHandle_v8_t* dev = nullptr;
    auto deadline = steady_clock::now() + std::chrono::seconds(10);
    while (sendComm == nullptr && steady_clock::now() < deadline)
      if (net->connect(0, handle, &sendComm, &dev) != ncclSuccess) return;
    if (sendComm == nullptr) return;
    for (int i = 0; i < 4; i++) {
      std::vector<char> src = randomBytes(sizes[i], 100 + i);
      void* req = nullptr;
      while (req == nullptr)
        if (net->isend(sendComm, src.data(), (int)sizes[i], i, nullptr, &req) != ncclSuccess) return;
      int size = -1;
      if (waitRequest(req, &size) != ncclSuccess || size != (int)sizes[i]) return;
    }
    senderOk = net->closeSend(sendComm) == ncclSuccess;
  });
  void* recvComm = nullptr;
  ncclNetDeviceHandle_v8_t* dev = nullptr;
  auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (recvComm == nullptr && steady_clock::now() < deadline)
    ASSERT_EQ(net->accept(listenComm, &recvComm, &dev), ncclSuccess);
  ASSERT_NE(recvComm, nullptr);
  for (int i = 0; i < 4; i++) {
    std::vector<char> expect = randomBytes(sizes[i], 100 + i);
    std::vector<char> dst = randomBytes(sizes[i] + 1, 999);
    void* data = dst.data();
    int capacity = (int)dst.size(), tag = i;
    void* req = nullptr;
    while (req == nullptr) ASSERT_EQ(net->irecv(recvComm, 1, &data, &capacity, &tag, nullptr, &req), ncclSuccess);
    int size = -1;
    ASSERT_EQ(waitRequest(req, &size), ncclSuccess);
    EXPECT_EQ(size, (int)sizes[i]);
    // Empty vectors may have null data(): memcmp must not see them.
    if (sizes[i] > 0) {
      EXPECT_EQ(memcmp(expect.data(), dst.data(), sizes[i]), 0) << "message " << i;
    }
  }
  sender.join();
  EXPECT_TRUE(senderOk);
  EXPECT_EQ(net->closeRecv(recvComm), ncclSuccess);
  EXPECT_EQ(net->closeListen(listenComm), ncclSuccess);
}

TEST_F(SocketNetTest, OddSocketAndThreadCounts) {
  for (auto cfg : {std::make_pair("1", "1"), std::make_pair("3", "1"), std::make_pair("2", "5")}) {
    ScopedEnv threads("NCCL_SOCKET_NTHREADS", cfg.first);
    ScopedEnv socks("NCCL_NSOCKS_PERTHREAD", cfg.second);
    void *sendComm, *recvComm;
    connectPair(&sendComm, &recvComm);
    transfer(sendComm, recvComm, (1 << 20) + 7, 5);
    transfer(sendComm, recvComm, 3, 6);
    net->closeSend(sendComm);
    net->closeRecv(recvComm);
  }
}

TEST_F(SocketNetTest, ManyRequestsInFlightCompleteInOrder) {
  void *sendComm, *recvComm;
  connectPair(&sendComm, &recvComm);
  constexpr int kN = NCCL_NET_MAX_REQUESTS;
  std::vector<std::vector<char>> src(kN), dst(kN);
  void* sreq[kN];
  void* rreq[kN];
  for (int i = 0; i < kN; i++) {
    size_t bytes = (size_t)1 + (size_t)i * 300001;
    src[i] = randomBytes(bytes, 1000 + i);
    dst[i] = randomBytes(bytes, 2000 + i);
    ASSERT_EQ(net->isend(sendComm, src[i].data(), (int)bytes, i, nullptr, &sreq[i]), ncclSuccess);
    ASSERT_NE(sreq[i], nullptr) << "request " << i << " of " << kN << " refused";
    void* data = dst[i].data();
    int capacity = (int)bytes, tag = i;
    ASSERT_EQ(net->irecv(recvComm, 1, &data, &capacity, &tag, nullptr, &rreq[i]), ncclSuccess);
    ASSERT_NE(rreq[i], nullptr);
  }
  // A full comm refuses politely (request == NULL), it does not fail.
  void* extra = nullptr;
  char byte = 1;
  ASSERT_EQ(net->isend(sendComm, &byte, 1, 99, nullptr, &extra), ncclSuccess);
  EXPECT_EQ(extra, nullptr);
  // Testing the newest first: it may only report done once all older ones are.
  int doneS[kN] = {}, doneR[kN] = {};
  int left = 2 * kN;
  auto deadline = steady_clock::now() + std::chrono::seconds(20);
  while (left > 0) {
    ASSERT_LT(steady_clock::now(), deadline) << left << " requests still open";
    for (int i = kN - 1; i >= 0; i--) {
      int size = -1;
      if (!doneR[i]) {
        ASSERT_EQ(net->test(rreq[i], &doneR[i], &size), ncclSuccess);
        if (doneR[i]) {
          left--;
          EXPECT_EQ(size, (int)src[i].size());
          for (int j = 0; j < i; j++) {
            if (doneR[j]) continue;
            ASSERT_EQ(net->test(rreq[j], &doneR[j], &size), ncclSuccess);
            EXPECT_EQ(doneR[j], 1) << "receive " << i << " reported done before older receive " << j;
            if (doneR[j]) left--;
          }
        }
      }
      if (!doneS[i]) {
        ASSERT_EQ(net->test(sreq[i], &doneS[i], &size), ncclSuccess);
        if (doneS[i]) {
          left--;
          EXPECT_EQ(size, (int)src[i].size());
        }
      }
    }
  }
  for (int i = 0; i < kN; i++) EXPECT_EQ(src[i], dst[i]) << "message " << i;
  net->closeSend(sendComm);
  net->closeRecv(recvComm);
}

// Small messages travel inline on the control socket, the receiver reading
// ahead of the request that wants the bytes: messages sent before their
// receives are posted arrive whole and in order, however the reads cut
// the stream (headers and payloads across the read-ahead buffer's end, a
// message over the inline limit between inline ones, empty messages).
TEST_F(SocketNetTest, QueuedSmallMessagesArriveWholeThroughTheReadAhead) {
  void *sendComm, *recvComm;
  connectPair(&sendComm, &recvComm);
  constexpr int kN = NCCL_NET_MAX_REQUESTS;   // one request per message
  const std::vector<std::vector<size_t>> rounds = {{0, 1, 7, 4075, 4080, 4081, 4096, 13},
                                                   {16 << 10, (16 << 10) + 1, 3, 0, 8191, 1, 4079, 2}};
  for (const std::vector<size_t>& sizes : rounds) {
    ASSERT_EQ(sizes.size(), (size_t)kN);
    std::vector<std::vector<char>> src(kN), dst(kN);
    void* sreq[kN];
    for (int i = 0; i < kN; i++) {
      src[i] = randomBytes(sizes[i], 300 + i);
      dst[i] = randomBytes(sizes[i] + 9, 400 + i);   // never the expected content
      ASSERT_EQ(net->isend(sendComm, src[i].data(), (int)sizes[i], i, nullptr, &sreq[i]), ncclSuccess);
      ASSERT_NE(sreq[i], nullptr);
    }
    // The inline messages leave with no receive posted: the receiver's socket
    // holds them all when its first read comes.
    int size = -1;
    ASSERT_EQ(waitRequest(sreq[0], &size), ncclSuccess);
    void* rreq[kN];
    for (int i = 0; i < kN; i++) {
      void* data = dst[i].data();
      int capacity = (int)dst[i].size(), tag = i;
      ASSERT_EQ(net->irecv(recvComm, 1, &data, &capacity, &tag, nullptr, &rreq[i]), ncclSuccess);
      ASSERT_NE(rreq[i], nullptr);
      if (i % 3 == 0) {   // some received one by one, the rest after all are posted
        ASSERT_EQ(waitRequest(rreq[i], &size), ncclSuccess);
        EXPECT_EQ(size, (int)sizes[i]) << "message " << i;
        rreq[i] = nullptr;
      }
    }
    for (int i = 0; i < kN; i++) {
      if (rreq[i] != nullptr) {
        ASSERT_EQ(waitRequest(rreq[i], &size), ncclSuccess);
        EXPECT_EQ(size, (int)sizes[i]) << "message " << i;
      }
      if (i > 0) {
        ASSERT_EQ(waitRequest(sreq[i], &size), ncclSuccess);
      }
      if (sizes[i] > 0) {
        EXPECT_EQ(memcmp(src[i].data(), dst[i].data(), sizes[i]), 0) << "message " << i;
      }
    }
  }
  net->closeSend(sendComm);
  net->closeRecv(recvComm);
}

TEST_F(SocketNetTest, TagMismatchIsAnError) {
  void *sendComm, *recvComm;
  connectPair(&sendComm, &recvComm);
  std::vector<char> src = randomBytes(1000, 1), dst(1000);
  void *sreq = nullptr, *rreq = nullptr;
  ASSERT_EQ(net->isend(sendComm, src.data(), 1000, 1, nullptr, &sreq), ncclSuccess);
  void* data = dst.data();
  int capacity = 1000, tag = 2;
  // The mismatch shows when the header arrives: in irecv or in a later test.
  ncclResult_t res = ncclSuccess;
  auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (res == ncclSuccess && rreq == nullptr && steady_clock::now() < deadline)
    res = net->irecv(recvComm, 1, &data, &capacity, &tag, nullptr, &rreq);
  int size;
  if (res == ncclSuccess) res = waitRequest(rreq, &size);
  EXPECT_EQ(res, ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("tag 1"), std::string::npos) << lastErrorMessage();
  net->closeSend(sendComm);
  net->closeRecv(recvComm);
}

TEST_F(SocketNetTest, MessageLargerThanReceiveIsAnError) {
  void *sendComm, *recvComm;
  connectPair(&sendComm, &recvComm);
  std::vector<char> src = randomBytes(100, 1), dst(50);
  void *sreq = nullptr, *rreq = nullptr;
  ASSERT_EQ(net->isend(sendComm, src.data(), 100, 0, nullptr, &sreq), ncclSuccess);
  void* data = dst.data();
  int capacity = 50, tag = 0;
  // The mismatch shows when the header arrives: in irecv or in a later test.
  ncclResult_t res = ncclSuccess;
  auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (res == ncclSuccess && rreq == nullptr && steady_clock::now() < deadline)
    res = net->irecv(recvComm, 1, &data, &capacity, &tag, nullptr, &rreq);
  int size;
  if (res == ncclSuccess) res = waitRequest(rreq, &size);
  EXPECT_EQ(res, ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("truncated"), std::string::npos) << lastErrorMessage();
  net->closeSend(sendComm);
  net->closeRecv(recvComm);
}

TEST_F(SocketNetTest, SenderClosingMidTransferFailsTheReceive) {
  void *sendComm, *recvComm;
  connectPair(&sendComm, &recvComm);
  const size_t bytes = 64 << 20;  // more than the socket buffers hold
  std::vector<char> src = randomBytes(bytes, 3), dst(bytes);
  void *sreq = nullptr, *rreq = nullptr;
  ASSERT_EQ(net->isend(sendComm, src.data(), (int)bytes, 0, nullptr, &sreq), ncclSuccess);
  ASSERT_NE(sreq, nullptr);
  void* data = dst.data();
  int capacity = (int)bytes, tag = 0;
  ASSERT_EQ(net->irecv(recvComm, 1, &data, &capacity, &tag, nullptr, &rreq), ncclSuccess);
  ASSERT_EQ(net->closeSend(sendComm), ncclSuccess);  // with the send in flight
  int size;
  auto start = steady_clock::now();
  ncclResult_t res = waitRequest(rreq, &size);
  EXPECT_EQ(res, ncclRemoteError);
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_NE(std::string(lastErrorMessage()).find("127.0.0.1"), std::string::npos) << lastErrorMessage();
  net->closeRecv(recvComm);
}

TEST_F(SocketNetTest, ConnectToDeadListenerFailsInBoundedTime) {
  ScopedEnv timeout("UNICCL_NET_CONNECT_TIMEOUT_MS", "300");
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listenComm), ncclSuccess);
  ASSERT_EQ(net->closeListen(listenComm), ncclSuccess);
  void* sendComm = nullptr;
  ncclNetDeviceHandle_v8_t* dev = nullptr;
  auto start = steady_clock::now();
  ncclResult_t res = ncclSuccess;
  while (res == ncclSuccess && sendComm == nullptr && steady_clock::now() - start < std::chrono::seconds(10))
    res = net->connect(0, handle, &sendComm, &dev);
  EXPECT_EQ(sendComm, nullptr);
  EXPECT_EQ(res, ncclRemoteError);
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(SocketNetTest, RejectsWhatItCannotDo) {
  void *sendComm, *recvComm;
  connectPair(&sendComm, &recvComm);
  std::vector<char> buf = randomBytes(4096, 9);
  void* mh = nullptr;
  EXPECT_EQ(net->regMr(sendComm, buf.data(), buf.size(), NCCL_PTR_CUDA, &mh), ncclInternalError);
  ASSERT_EQ(net->regMr(sendComm, buf.data(), buf.size(), NCCL_PTR_HOST, &mh), ncclSuccess);
  void* req = nullptr;
  EXPECT_EQ(net->isend(sendComm, buf.data() + 4000, 200, 0, mh, &req), ncclInvalidArgument);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(net->deregMr(sendComm, mh), ncclSuccess);
  void* datas[2] = {buf.data(), buf.data() + 2048};
  int sizes[2] = {2048, 2048}, tags[2] = {0, 1};
  EXPECT_EQ(net->irecv(recvComm, 2, datas, sizes, tags, nullptr, &req), ncclInternalError);
  EXPECT_EQ(net->iflush(recvComm, 1, datas, sizes, nullptr, &req), ncclSuccess);
  EXPECT_EQ(req, nullptr);  // nothing to flush for host memory
  net->closeSend(sendComm);
  net->closeRecv(recvComm);
}

TEST_F(SocketNetTest, StrangerConnectionIsRejectedAndRealPeerAccepted) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listenComm), ncclSuccess);
  SocketAddress addr;
  memcpy(&addr, handle, sizeof(addr));  // the handle starts with the listener's address
  Socket stranger;
  ASSERT_EQ(stranger.connect(addr, deadlineAfterMs(5000)), ncclSuccess);
  std::vector<char> junk = randomBytes(24, 4);
  ASSERT_EQ(stranger.sendAll(junk.data(), junk.size(), deadlineAfterMs(5000)), ncclSuccess);
  void *sendComm = nullptr, *recvComm = nullptr;
  auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (sendComm == nullptr || recvComm == nullptr) {
    ASSERT_LT(steady_clock::now(), deadline);
    ncclNetDeviceHandle_v8_t* dev = nullptr;
    if (sendComm == nullptr) {
      ASSERT_EQ(net->connect(0, handle, &sendComm, &dev), ncclSuccess);
    }
    if (recvComm == nullptr) {
      ASSERT_EQ(net->accept(listenComm, &recvComm, &dev), ncclSuccess);
    }
  }
  transfer(sendComm, recvComm, 4096, 12);
  net->closeSend(sendComm);
  net->closeRecv(recvComm);
  net->closeListen(listenComm);
}

// -------------------------------------------------------------- hostile peers
int openFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (readdir(d) != nullptr) n++;
  closedir(d);
  return n - 3;  // ".", ".." and the directory's own fd
}

// What nmap -sT does: connect, then close at once. The listener drops them
// and the real peer's connection still comes through intact.
TEST_F(SocketNetTest, PortScanDoesNotBreakTheListener) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listenComm), ncclSuccess);
  hostile::HandleView h = hostile::viewHandle(handle);
  for (int i = 0; i < 20; i++) {
    Socket scan;
    ASSERT_TRUE(hostile::connectRaw(h.addr, &scan));
    if (i % 2) {
      struct linger l = {1, 0};  // half of them reset instead of closing
      setsockopt(scan.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    scan.close();
  }
  void* recvComm = nullptr;
  for (int i = 0; i < 50; i++) {
    ncclNetDeviceHandle_v8_t* dev = nullptr;
    ASSERT_EQ(net->accept(listenComm, &recvComm, &dev), ncclSuccess) << lastErrorMessage();
    ASSERT_EQ(recvComm, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void* sendComm = nullptr;
  completePair(handle, listenComm, &sendComm, &recvComm);
  ASSERT_NE(recvComm, nullptr);
  transfer(sendComm, recvComm, (1 << 20) + 3, 21);
  transfer(sendComm, recvComm, 5, 22);
  net->closeSend(sendComm);
  net->closeRecv(recvComm);
  net->closeListen(listenComm);
}

// Strangers that open with a wrong proof: garbage, a proof of another key,
// and a proof of the right key made for another use (the IB listener's
// context). Each is closed without getting the listener's proof, and the
// real peer is accepted.
TEST_F(SocketNetTest, WrongKeyPeersAreRefused) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listenComm), ncclSuccess);
  hostile::HandleView h = hostile::viewHandle(handle);
  struct Opening {  // socket_transport.cc's first bytes on a socket
    AuthResponse response;
    uint32_t version;
    int32_t index, nSocks, nThreads;
  };
  std::vector<Opening> openings(3);
  std::vector<char> junk = randomBytes(sizeof(Opening), 31);
  memcpy(&openings[0], junk.data(), sizeof(Opening));
  openings[1].response = hostile::proofOfOtherKey(h, "net-socket");
  ASSERT_TRUE(makeResponse(h.secret.key, "net-ib", h.secret.challenge, &openings[2].response));
  for (int i = 1; i < 3; i++) {
    openings[i].version = 3;
    openings[i].index = 0;
    openings[i].nSocks = 1;
    openings[i].nThreads = 1;
  }
  for (size_t i = 0; i < openings.size(); i++) {
    Socket stranger;
    ASSERT_TRUE(hostile::connectRaw(h.addr, &stranger));
    ASSERT_EQ(stranger.sendAll(&openings[i], sizeof(Opening), deadlineAfterMs(5000)), ncclSuccess);
    size_t answered = 0;
    void* recvComm = nullptr;
    ncclResult_t res = ncclSuccess;
    auto pump = [&] {
      ncclNetDeviceHandle_v8_t* dev = nullptr;
      if (res == ncclSuccess) res = net->accept(listenComm, &recvComm, &dev);
    };
    EXPECT_TRUE(hostile::closedByListener(stranger, 10, pump, &answered)) << "stranger " << i << " not closed";
    EXPECT_EQ(answered, 0u) << "the listener proved its key to stranger " << i;
    EXPECT_EQ(res, ncclSuccess) << lastErrorMessage();
    EXPECT_EQ(recvComm, nullptr);
  }
  void *sendComm = nullptr, *recvComm = nullptr;
  completePair(handle, listenComm, &sendComm, &recvComm);
  transfer(sendComm, recvComm, 70000, 32);
  net->closeSend(sendComm);
  net->closeRecv(recvComm);
  net->closeListen(listenComm);
}

// A connector refuses a listener that cannot prove the key: nothing is sent
// to an impostor sitting at the handle's address.
TEST_F(SocketNetTest, ConnectorRefusesAnImpostorListener) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listenComm), ncclSuccess);
  hostile::HandleView h = hostile::viewHandle(handle);
  ASSERT_EQ(net->closeListen(listenComm), ncclSuccess);
  Socket impostor;
  ASSERT_EQ(impostor.listen(h.addr), ncclSuccess);  // takes over the port
  ScopedEnv threads("NCCL_SOCKET_NTHREADS", "1");
  ScopedEnv socks("NCCL_NSOCKS_PERTHREAD", "1");
  void* sendComm = nullptr;
  auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (sendComm == nullptr) {
    ASSERT_EQ(net->connect(0, handle, &sendComm, nullptr), ncclSuccess);
    ASSERT_LT(steady_clock::now(), deadline);
  }
  std::vector<Socket> accepted(2);
  for (Socket& a : accepted) ASSERT_EQ(impostor.accept(&a, deadlineAfterMs(5000)), ncclSuccess);
  std::vector<char> garbage = randomBytes(sizeof(AuthConfirm), 41);
  for (Socket& a : accepted) ASSERT_EQ(a.sendAll(garbage.data(), garbage.size(), deadlineAfterMs(5000)), ncclSuccess);
  std::vector<char> src = randomBytes(100, 42);
  void* req = nullptr;
  ncclResult_t res = net->isend(sendComm, src.data(), 100, 0, nullptr, &req);
  int size = 0;
  if (res == ncclSuccess) res = waitRequest(req, &size, 10);
  EXPECT_EQ(res, ncclRemoteError);
  EXPECT_NE(std::string(lastErrorMessage()).find("does not prove"), std::string::npos) << lastErrorMessage();
  // The impostor got the openings (64 bytes per socket) and not one byte more.
  for (Socket& a : accepted) {
    char buf[256];
    int err = 0;
    ssize_t n = a.tryRecv(buf, sizeof(buf), &err);
    EXPECT_EQ(n, 64);
  }
  net->closeSend(sendComm);
}

// 2000 idle connections made before the real peer connects (the accept
// calls in between are the proxy's polling). The listener holds a bounded
// number of them and the real connection comes through.
TEST_F(SocketNetTest, FloodOfIdleConnectionsDoesNotKeepTheRealPeerOut) {
  rlimit lim;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  int flood = 2000;
  if (lim.rlim_cur < (rlim_t)flood + 600) {
    rlimit more = lim;
    more.rlim_cur = std::min<rlim_t>(lim.rlim_max, (rlim_t)flood + 600);
    setrlimit(RLIMIT_NOFILE, &more);
    getrlimit(RLIMIT_NOFILE, &more);
    flood = std::min<int>(flood, (int)more.rlim_cur - 600);
  }
  ASSERT_GE(flood, 600) << "RLIMIT_NOFILE too low for a flood larger than the listener's bound";
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listenComm), ncclSuccess);
  hostile::HandleView h = hostile::viewHandle(handle);
  const int baseline = openFds();
  std::vector<Socket> idle(flood);
  void* recvComm = nullptr;
  for (int i = 0; i < flood; i++) {
    ASSERT_TRUE(hostile::connectRaw(h.addr, &idle[i])) << "flood connection " << i;
    if (i % 64 == 63) {
      ASSERT_EQ(net->accept(listenComm, &recvComm, nullptr), ncclSuccess) << lastErrorMessage();
    }
  }
  for (int i = 0; i < 20; i++) ASSERT_EQ(net->accept(listenComm, &recvComm, nullptr), ncclSuccess);
  // Our side of the flood holds `flood` fds; the listener at most its bound.
  EXPECT_LE(openFds() - baseline, flood + (int)kMaxPendingConnections + 4);
  void* sendComm = nullptr;
  auto start = steady_clock::now();
  completePair(handle, listenComm, &sendComm, &recvComm);
  ASSERT_NE(recvComm, nullptr);
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(10));
  transfer(sendComm, recvComm, (1 << 20) + 9, 51);
  net->closeSend(sendComm);
  net->closeRecv(recvComm);
  net->closeListen(listenComm);
  idle.clear();
  setrlimit(RLIMIT_NOFILE, &lim);
}

// A connection that sends nothing (half-open) does not hold up the real
// peer, and is dropped once its deadline has passed.
TEST_F(SocketNetTest, SilentConnectionIsDroppedAndDoesNotBlockTheRealPeer) {
  ScopedEnv timeout("UNICCL_NET_CONNECT_TIMEOUT_MS", "1000");
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listenComm), ncclSuccess);
  hostile::HandleView h = hostile::viewHandle(handle);
  Socket silent;
  ASSERT_TRUE(hostile::connectRaw(h.addr, &silent));
  void* recvComm = nullptr;
  ASSERT_EQ(net->accept(listenComm, &recvComm, nullptr), ncclSuccess);  // takes it into the pending list
  void* sendComm = nullptr;
  completePair(handle, listenComm, &sendComm, &recvComm);
  ASSERT_NE(recvComm, nullptr);
  transfer(sendComm, recvComm, 12345, 61);
  size_t answered = 0;
  void* more = nullptr;
  auto pump = [&] { EXPECT_EQ(net->accept(listenComm, &more, nullptr), ncclSuccess); };
  // 1 s deadline; 10 s is the bound so that a slow machine cannot fail it.
  EXPECT_TRUE(hostile::closedByListener(silent, 10, pump, &answered)) << "the silent connection was kept";
  EXPECT_EQ(answered, 0u);
  EXPECT_EQ(more, nullptr);
  net->closeSend(sendComm);
  net->closeRecv(recvComm);
  net->closeListen(listenComm);
}

// ---------------------------------------------------------------- processes
// The listener runs in a child whose RLIMIT_NOFILE leaves room for 3 more
// fds; 10 idle connections exhaust them. accept() must keep answering
// ncclSuccess (EMFILE fails those connections only), and once the idle ones
// go, the real peer's connection is accepted and its data arrives intact.
TEST_F(SocketNetTest, FdExhaustionIsNotAnErrorOfTheListener) {
  ScopedEnv threads("NCCL_SOCKET_NTHREADS", "1");
  ScopedEnv socks("NCCL_NSOCKS_PERTHREAD", "1");
  int toParent[2], toChild[2];
  ASSERT_EQ(pipe(toParent), 0);
  ASSERT_EQ(pipe(toChild), 0);
  const size_t bytes = 300000;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* lc = nullptr;
    if (net->listen(0, handle, &lc) != ncclSuccess) _exit(2);
    // The lowest limit that leaves exactly 3 unused fd numbers below it.
    int limit = 0, free = 0;
    while (free < 3) {
      if (fcntl(limit, F_GETFD) < 0) free++;
      limit++;
    }
    rlimit lim = {(rlim_t)limit, (rlim_t)limit};
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) _exit(3);
    if (write(toParent[1], handle, sizeof(handle)) != (ssize_t)sizeof(handle)) _exit(4);
    char c;
    if (read(toChild[0], &c, 1) != 1) _exit(5);  // the flood is connected
    void* rc = nullptr;
    for (int i = 0; i < 200; i++) {
      if (net->accept(lc, &rc, nullptr) != ncclSuccess || rc != nullptr) _exit(6);
    }
    int probe = dup(0);
    if (probe >= 0 || errno != EMFILE) _exit(7);  // the flood did take every fd
    if (write(toParent[1], &c, 1) != 1) _exit(8);
    auto deadline = steady_clock::now() + std::chrono::seconds(20);
    while (rc == nullptr) {
      if (net->accept(lc, &rc, nullptr) != ncclSuccess || steady_clock::now() > deadline) _exit(9);
    }
    std::vector<char> dst(bytes);
    void* data = dst.data();
    int capacity = (int)bytes, tag = 3, done = 0, size = 0;
    void* req = nullptr;
    if (net->irecv(rc, 1, &data, &capacity, &tag, nullptr, &req) != ncclSuccess || req == nullptr) _exit(10);
    while (!done) {
      if (net->test(req, &done, &size) != ncclSuccess || steady_clock::now() > deadline) _exit(11);
    }
    if (size != (int)bytes || dst != randomBytes(bytes, 71)) _exit(12);
    net->closeRecv(rc);
    net->closeListen(lc);
    _exit(0);
  }
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  ASSERT_EQ(read(toParent[0], handle, sizeof(handle)), (ssize_t)sizeof(handle));
  hostile::HandleView h = hostile::viewHandle(handle);
  std::vector<Socket> idle(10);
  for (Socket& s : idle) ASSERT_TRUE(hostile::connectRaw(h.addr, &s));
  char c = 1;
  ASSERT_EQ(write(toChild[1], &c, 1), 1);
  ASSERT_EQ(read(toParent[0], &c, 1), 1);  // the child survived EMFILE
  idle.clear();
  void* sendComm = nullptr;
  auto deadline = steady_clock::now() + std::chrono::seconds(20);
  while (sendComm == nullptr) {
    ASSERT_EQ(net->connect(0, handle, &sendComm, nullptr), ncclSuccess);
    ASSERT_LT(steady_clock::now(), deadline);
  }
  std::vector<char> src = randomBytes(bytes, 71);
  void* req = nullptr;
  while (req == nullptr) ASSERT_EQ(net->isend(sendComm, src.data(), (int)bytes, 3, nullptr, &req), ncclSuccess);
  int size = 0;
  EXPECT_EQ(waitRequest(req, &size), ncclSuccess);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  net->closeSend(sendComm);
  for (int fd : {toParent[0], toParent[1], toChild[0], toChild[1]}) close(fd);
}

// The child inherits the parent's listener's handle through fork and sends;
// the parent accepts and receives. Child exit status 0 = all sends completed.
TEST_F(SocketNetTest, TransfersBetweenTwoProcesses) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listenComm), ncclSuccess);
  const size_t sizes[] = {1, (1 << 20) + 7, bigBytes()};
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    void* sendComm = nullptr;
    ncclNetDeviceHandle_v8_t* dev = nullptr;
    auto deadline = steady_clock::now() + std::chrono::seconds(10);
    while (sendComm == nullptr) {
      if (net->connect(0, handle, &sendComm, &dev) != ncclSuccess || steady_clock::now() > deadline) _exit(2);
    }
    for (int i = 0; i < 3; i++) {
      std::vector<char> src = randomBytes(sizes[i], 500 + i);
      void* req = nullptr;
      while (req == nullptr)
        if (net->isend(sendComm, src.data(), (int)sizes[i], 40 + i, nullptr, &req) != ncclSuccess) _exit(3);
      int done = 0, size = -1;
      while (!done) {
        if (net->test(req, &done, &size) != ncclSuccess || steady_clock::now() > deadline + std::chrono::seconds(20))
          _exit(4);
      }
      if (size != (int)sizes[i]) _exit(5);
    }
    net->closeSend(sendComm);
    _exit(0);
  }
  void* recvComm = nullptr;
  ncclNetDeviceHandle_v8_t* dev = nullptr;
  auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (recvComm == nullptr && steady_clock::now() < deadline)
    ASSERT_EQ(net->accept(listenComm, &recvComm, &dev), ncclSuccess);
  ASSERT_NE(recvComm, nullptr);
  for (int i = 0; i < 3; i++) {
    std::vector<char> expect = randomBytes(sizes[i], 500 + i);
    std::vector<char> dst = randomBytes(sizes[i], 77);
    void* data = dst.data();
    int capacity = (int)sizes[i], tag = 40 + i;
    void* req = nullptr;
    ASSERT_EQ(net->irecv(recvComm, 1, &data, &capacity, &tag, nullptr, &req), ncclSuccess);
    int size = -1;
    ASSERT_EQ(waitRequest(req, &size), ncclSuccess);
    EXPECT_EQ(size, (int)sizes[i]);
    EXPECT_TRUE(expect == dst) << "message " << i << " corrupted";
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  net->closeRecv(recvComm);
  net->closeListen(listenComm);
}

TEST_F(SocketNetTest, PeerProcessDyingMidTransferFailsTheReceive) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listenComm), ncclSuccess);
  const size_t bytes = 64 << 20;  // more than the socket buffers hold
  int ready[2], accepted[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe2(accepted, O_NONBLOCK), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    void* sendComm = nullptr;
    ncclNetDeviceHandle_v8_t* dev = nullptr;
    auto deadline = steady_clock::now() + std::chrono::seconds(10);
    while (sendComm == nullptr)
      if (net->connect(0, handle, &sendComm, &dev) != ncclSuccess || steady_clock::now() > deadline) _exit(2);
    std::vector<char> src = randomBytes(bytes, 8);
    void* req = nullptr;
    if (net->isend(sendComm, src.data(), (int)bytes, 0, nullptr, &req) != ncclSuccess || req == nullptr) _exit(3);
    int done = 0;
    char c = 1;
    // Data leaves once the listener has proven its key, in its accept().
    while (read(accepted[0], &c, 1) != 1) {
      if (net->test(req, &done, nullptr) != ncclSuccess || steady_clock::now() > deadline) _exit(5);
    }
    for (int i = 0; i < 100; i++) net->test(req, &done, nullptr);
    if (write(ready[1], &c, 1) != 1) _exit(4);
    _exit(0);  // dies without closing anything
  }
  close(ready[1]);
  close(accepted[0]);
  void* recvComm = nullptr;
  ncclNetDeviceHandle_v8_t* dev = nullptr;
  auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (recvComm == nullptr && steady_clock::now() < deadline)
    ASSERT_EQ(net->accept(listenComm, &recvComm, &dev), ncclSuccess);
  ASSERT_NE(recvComm, nullptr);
  char c = 1;
  ASSERT_EQ(write(accepted[1], &c, 1), 1);
  close(accepted[1]);
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::vector<char> dst(bytes);
  void* data = dst.data();
  int capacity = (int)bytes, tag = 0;
  void* req = nullptr;
  ASSERT_EQ(net->irecv(recvComm, 1, &data, &capacity, &tag, nullptr, &req), ncclSuccess);
  int size;
  EXPECT_EQ(waitRequest(req, &size), ncclRemoteError);
  EXPECT_NE(std::string(lastErrorMessage()).find("127.0.0.1"), std::string::npos) << lastErrorMessage();
  net->closeRecv(recvComm);
  net->closeListen(listenComm);
}

}  // namespace
}  // namespace uniccl
