// The Socket transport driven only through its net plugin table, on loopback:
// handshake, transfers of random data, many requests in flight, ordering,
// tag/size mismatches, peers that close or die mid-transfer, dead listeners.
#include <gtest/gtest.h>
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
#include "scoped_env.h"
#include "common/util/socket.h"
#include "net/socket_transport.h"

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
    EXPECT_EQ(net->closeListen(listenComm), ncclSuccess);
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

// ---------------------------------------------------------------- processes
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
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
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
    for (int i = 0; i < 100; i++) net->test(req, &done, nullptr);
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(4);
    _exit(0);  // dies without closing anything
  }
  close(ready[1]);
  void* recvComm = nullptr;
  ncclNetDeviceHandle_v8_t* dev = nullptr;
  auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (recvComm == nullptr && steady_clock::now() < deadline)
    ASSERT_EQ(net->accept(listenComm, &recvComm, &dev), ncclSuccess);
  ASSERT_NE(recvComm, nullptr);
  char c;
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
