// The import service of direct receives (core/import_service.h) against
// hostile neighbours on the host, on the fake GPU (whose IPC handles open in
// the process that made them, so service and clients share this process):
// its name cannot be taken by a squatter binding the predictable
// "uniccl-imp-<commHash>-<rank>" name; a client without the communicator's
// secret is refused and its requests are not honoured; stalled clients and
// a flood of connections do not delay a real client's request.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/core/import_service.h"
#include "common/gpu.h"
#include "fake_gpu.h"

namespace uniccl {
namespace {

constexpr uint64_t kHash = 0x1234abcd5678ef00ull;
constexpr int kServiceRank = 1;

class ImportServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A one-at-a-time service would hold a stalled client this long.
    setenv("UNICCL_BOOTSTRAP_TIMEOUT", "30", 1);
    fake::reset();
    fake::setDeviceCount(2);
    ASSERT_EQ(randomSecret(&secret_), ncclSuccess);
    client_.secret = secret_;
    client_.commHash = kHash;
    client_.rank = 0;
    client_.abortFlag = &abort_;
    ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
    ASSERT_EQ(gpu::deviceAlloc(&buf_, kBytes), ncclSuccess);
  }
  void TearDown() override {
    svc_.stop();
    (void)gpu::deviceFree(buf_);
    fake::reset();
  }
  ncclResult_t import(const ImportEndpoint& who, uintptr_t* base) {
    return importAtPeer(who, kServiceRank, reinterpret_cast<uintptr_t>(buf_), kBytes, false, base);
  }

  static constexpr size_t kBytes = 1 << 16;
  AuthSecret secret_{};
  ImportEndpoint client_;
  std::atomic<uint32_t> abort_{0};
  void* buf_ = nullptr;
  ImportService svc_;
};

TEST_F(ImportServiceTest, SquatterOnThePredictableNameChangesNothing) {
  char old[64];
  snprintf(old, sizeof(old), "uniccl-imp-%016" PRIx64 "-%d", kHash, kServiceRank);
  FdSocket squatter;
  ASSERT_EQ(squatter.listen(old), ncclSuccess);
  ASSERT_EQ(svc_.start(secret_, kHash, kServiceRank, 1), ncclSuccess);
  EXPECT_NE(importServiceName(secret_, kHash, kServiceRank), old);
  uintptr_t base = 0, again = 0;
  ASSERT_EQ(import(client_, &base), ncclSuccess);
  EXPECT_EQ(base, reinterpret_cast<uintptr_t>(buf_));
  EXPECT_EQ(import(client_, &again), ncclSuccess);
  EXPECT_EQ(again, base);
  EXPECT_EQ(svc_.imports(), 1u);
  EXPECT_EQ(releaseAtPeer(client_, kServiceRank, reinterpret_cast<uintptr_t>(buf_)), ncclSuccess);
  EXPECT_EQ(releaseAtPeer(client_, kServiceRank, reinterpret_cast<uintptr_t>(buf_)), ncclSuccess);
  EXPECT_EQ(svc_.imports(), 0u);
  EXPECT_EQ(releaseAtPeer(client_, kServiceRank, reinterpret_cast<uintptr_t>(buf_)), ncclInvalidArgument);
  // A service whose name is taken does not start (and says so).
  ImportService dup;
  EXPECT_EQ(dup.start(secret_, kHash, kServiceRank, 1), ncclSystemError);
}

TEST_F(ImportServiceTest, ClientsWithoutTheSecretAreRefused) {
  ASSERT_EQ(svc_.start(secret_, kHash, kServiceRank, 1), ncclSuccess);
  uintptr_t base = 0;
  ASSERT_EQ(import(client_, &base), ncclSuccess);
  ASSERT_EQ(svc_.imports(), 1u);

  // Another secret: another name, nobody there.
  ImportEndpoint stranger = client_;
  stranger.secret.bytes[3] ^= 0x40;
  EXPECT_NE(releaseAtPeer(stranger, kServiceRank, reinterpret_cast<uintptr_t>(buf_)), ncclSuccess);

  // The real name (visible in /proc/net/unix once bound) but no secret.
  const std::string name = importServiceName(secret_, kHash, kServiceRank);
  {
    FdSocket s;
    ASSERT_EQ(s.connect(name, deadlineAfterMs(5000)), ncclSuccess);
    EXPECT_EQ(authenticateFdConnector(s, stranger.secret, "import-service", deadlineAfterMs(5000), nullptr, "test"),
              ncclRemoteError);
  }
  {
    // Skips the exchange and sends a release of the real client's mapping
    // (the request's layout: magic, op, rank, vmm, base, bytes, IPC handle).
    FdSocket s;
    ASSERT_EQ(s.connect(name, deadlineAfterMs(5000)), ncclSuccess);
    AuthChallenge challenge{};
    ASSERT_EQ(recvFds(s, nullptr, 0, &challenge, sizeof(challenge), deadlineAfterMs(5000)), ncclSuccess);
    struct {
      uint32_t magic, op;
      int32_t rank;
      uint32_t vmm;
      uint64_t base, bytes;
      gpu::IpcMemHandle ipc;
    } forged{0x75696d70, 2, 0, 0, reinterpret_cast<uint64_t>(buf_), 0, {}};
    ASSERT_EQ(sendFds(s, nullptr, 0, &forged, sizeof(forged), deadlineAfterMs(5000)), ncclSuccess);
    uint64_t reply[2];
    EXPECT_EQ(recvFds(s, nullptr, 0, reply, sizeof(reply), deadlineAfterMs(5000)), ncclRemoteError);   // closed
  }
  EXPECT_EQ(svc_.imports(), 1u) << "a request from a client without the secret was honoured";
  EXPECT_EQ(releaseAtPeer(client_, kServiceRank, reinterpret_cast<uintptr_t>(buf_)), ncclSuccess);
  EXPECT_EQ(svc_.imports(), 0u);
}

// Silent clients, one that sends a byte and stalls, one that proves the
// secret and never sends its request, and more connections than the service
// keeps: the real client's request is answered at once. Bound: 10 s for
// milliseconds of work; a service serving one client at a time would wait
// 30 s (the bootstrap timeout set above) on the first stalled client.
TEST_F(ImportServiceTest, StalledClientsDoNotDelayARealOne) {
  ASSERT_EQ(svc_.start(secret_, kHash, kServiceRank, 1), ncclSuccess);
  const std::string name = importServiceName(secret_, kHash, kServiceRank);
  std::vector<FdSocket> stalled(kMaxImportClients + 16);
  for (FdSocket& s : stalled) ASSERT_EQ(s.connect(name, deadlineAfterMs(5000)), ncclSuccess);
  const char one = 'x';
  // The newest connection sends it: the oldest may already have been
  // dropped to make room (the bound at work).
  ASSERT_EQ(::send(stalled.back().fd(), &one, 1, MSG_NOSIGNAL), 1);
  FdSocket authed;
  ASSERT_EQ(authed.connect(name, deadlineAfterMs(5000)), ncclSuccess);
  ASSERT_EQ(authenticateFdConnector(authed, secret_, "import-service", deadlineAfterMs(5000), nullptr, "test"),
            ncclSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  uintptr_t base = 0;
  EXPECT_EQ(import(client_, &base), ncclSuccess);
  EXPECT_EQ(releaseAtPeer(client_, kServiceRank, reinterpret_cast<uintptr_t>(buf_)), ncclSuccess);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(sec, 10.0);
  EXPECT_EQ(svc_.imports(), 0u);
  // stop() ends the thread with the stalled connections still open.
  const auto t1 = std::chrono::steady_clock::now();
  svc_.stop();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(), 10.0);
}

}  // namespace
}  // namespace uniccl
