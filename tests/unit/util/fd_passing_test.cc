// util/fd_passing.h: descriptors over an abstract-namespace Unix socket,
// between two threads and between forked processes; a memfd written by the
// sender shows its bytes to the receiver; timeouts, closed peers, messages
// of the wrong shape, names in use. util/fd_auth.h: names derived from a
// secret, the challenge-response on fd sockets, and a listener loop that
// serves a client that proves the secret while others stall, flood or
// cannot prove it.
#include "common/util/fd_passing.h"

#include <sys/socket.h>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/util/fd_auth.h"

namespace uniccl {
namespace {

// A name no other test (or test process running at the same time) uses.
std::string uniqueName(const char* what) {
  static std::atomic<int> n{0};
  return "uniccl-test-" + std::string(what) + "-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

// A memfd of `bytes` holding `fill`.
int memfdWith(size_t bytes, unsigned char fill) {
  int fd = memfd_create("uniccl-fd-test", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) return -1;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return -1;
  std::memset(p, fill, bytes);
  munmap(p, bytes);
  return fd;
}

// Whether every byte of the file behind fd is `fill`.
bool holds(int fd, size_t bytes, unsigned char fill) {
  void* p = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return false;
  bool ok = true;
  for (size_t i = 0; i < bytes; ++i) ok &= static_cast<unsigned char*>(p)[i] == fill;
  munmap(p, bytes);
  return ok;
}

struct Payload {
  uint64_t handle;
  uint64_t bytes;
};

TEST(FdPassing, TwoThreadsPassAMemfd) {
  const std::string name = uniqueName("threads");
  FdSocket listener;
  ASSERT_EQ(listener.listen(name), ncclSuccess);
  constexpr size_t kBytes = 1 << 16;
  std::atomic<int> senderResult{-1};
  std::thread sender([&] {
    FdSocket s;
    ncclResult_t r = s.connect(name, deadlineAfterMs(5000));
    UniqueFd mem(memfdWith(kBytes, 0x5a));
    const Payload p{42, kBytes};
    int fds[1] = {mem.get()};
    if (r == ncclSuccess) r = sendFds(s, fds, 1, &p, sizeof(p), deadlineAfterMs(5000));
    senderResult = (int)r;
    // The sender's descriptor closes here, before the receiver maps its own.
  });
  FdSocket conn;
  ASSERT_EQ(listener.accept(&conn, deadlineAfterMs(5000)), ncclSuccess);
  EXPECT_EQ(conn.name(), name);
  UniqueFd got;
  Payload p{};
  ASSERT_EQ(recvFds(conn, &got, 1, &p, sizeof(p), deadlineAfterMs(5000)), ncclSuccess);
  sender.join();
  EXPECT_EQ(senderResult.load(), (int)ncclSuccess);
  EXPECT_EQ(p.handle, 42u);
  EXPECT_EQ(p.bytes, kBytes);
  ASSERT_TRUE(got.valid());
  EXPECT_TRUE(holds(got.get(), kBytes, 0x5a));
  EXPECT_NE(fcntl(got.get(), F_GETFD) & FD_CLOEXEC, 0);
}

// Several descriptors and several messages on one connection, no payload,
// and no descriptor at all.
TEST(FdPassing, SeveralDescriptorsAndMessages) {
  const std::string name = uniqueName("many");
  FdSocket listener;
  ASSERT_EQ(listener.listen(name), ncclSuccess);
  std::thread sender([&] {
    FdSocket s;
    ASSERT_EQ(s.connect(name, deadlineAfterMs(5000)), ncclSuccess);
    UniqueFd a(memfdWith(4096, 1)), b(memfdWith(8192, 2)), c(memfdWith(4096, 3));
    int fds[3] = {a.get(), b.get(), c.get()};
    EXPECT_EQ(sendFds(s, fds, 3, nullptr, 0, deadlineAfterMs(5000)), ncclSuccess);
    const char text[] = "no descriptors";
    EXPECT_EQ(sendFds(s, nullptr, 0, text, sizeof(text), deadlineAfterMs(5000)), ncclSuccess);
  });
  FdSocket conn;
  ASSERT_EQ(listener.accept(&conn, deadlineAfterMs(5000)), ncclSuccess);
  UniqueFd got[3];
  ASSERT_EQ(recvFds(conn, got, 3, nullptr, 0, deadlineAfterMs(5000)), ncclSuccess);
  EXPECT_TRUE(holds(got[0].get(), 4096, 1));
  EXPECT_TRUE(holds(got[1].get(), 8192, 2));
  EXPECT_TRUE(holds(got[2].get(), 4096, 3));
  char text[15] = {};
  ASSERT_EQ(recvFds(conn, nullptr, 0, text, sizeof(text), deadlineAfterMs(5000)), ncclSuccess);
  EXPECT_STREQ(text, "no descriptors");
  sender.join();
}

// The receiver asks for a shape the sender did not send: a remote error,
// and the descriptors that came are closed, not leaked.
TEST(FdPassing, WrongShapeIsARemoteErrorAndLeaksNothing) {
  const std::string name = uniqueName("shape");
  FdSocket listener;
  ASSERT_EQ(listener.listen(name), ncclSuccess);
  FdSocket client, conn;
  ASSERT_EQ(client.connect(name, deadlineAfterMs(5000)), ncclSuccess);
  ASSERT_EQ(listener.accept(&conn, deadlineAfterMs(5000)), ncclSuccess);
  UniqueFd a(memfdWith(4096, 1)), b(memfdWith(4096, 2));
  int fds[2] = {a.get(), b.get()};
  const int before = [] {
    int n = 0;
    for (int fd = 0; fd < 1024; ++fd) n += fcntl(fd, F_GETFD) != -1;
    return n;
  }();
  uint32_t v = 7;
  ASSERT_EQ(sendFds(client, fds, 2, &v, sizeof(v), deadlineAfterMs(5000)), ncclSuccess);
  UniqueFd one;
  EXPECT_EQ(recvFds(conn, &one, 1, &v, sizeof(v), deadlineAfterMs(5000)), ncclRemoteError);   // 2 came
  ASSERT_EQ(sendFds(client, fds, 1, &v, sizeof(v), deadlineAfterMs(5000)), ncclSuccess);
  uint64_t wide = 0;
  EXPECT_EQ(recvFds(conn, &one, 1, &wide, sizeof(wide), deadlineAfterMs(5000)), ncclRemoteError);   // 4 bytes came
  EXPECT_FALSE(one.valid());
  int after = 0;
  for (int fd = 0; fd < 1024; ++fd) after += fcntl(fd, F_GETFD) != -1;
  EXPECT_EQ(after, before);
  EXPECT_EQ(sendFds(client, fds, kMaxPassedFds + 1, nullptr, 0, deadlineAfterMs(100)), ncclInvalidArgument);
  int closedFd[1] = {1000};
  EXPECT_EQ(sendFds(client, closedFd, 1, nullptr, 0, deadlineAfterMs(100)), ncclInvalidArgument);
}

TEST(FdPassing, TimeoutsClosedPeersAndNamesInUse) {
  const std::string name = uniqueName("errors");
  FdSocket listener;
  ASSERT_EQ(listener.listen(name), ncclSuccess);
  FdSocket second;
  EXPECT_EQ(second.listen(name), ncclSystemError);   // the name is taken
  FdSocket conn;
  auto t0 = Clock::now();
  EXPECT_EQ(listener.accept(&conn, deadlineAfterMs(100)), ncclRemoteError);   // nobody connects
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
  FdSocket nobody;
  EXPECT_EQ(nobody.connect(uniqueName("absent"), deadlineAfterMs(100)), ncclRemoteError);
  EXPECT_EQ(nobody.connect(std::string(200, 'x'), deadlineAfterMs(100)), ncclInvalidArgument);

  FdSocket client;
  ASSERT_EQ(client.connect(name, deadlineAfterMs(5000)), ncclSuccess);
  ASSERT_EQ(listener.accept(&conn, deadlineAfterMs(5000)), ncclSuccess);
  UniqueFd fd;
  EXPECT_EQ(recvFds(conn, &fd, 1, nullptr, 0, deadlineAfterMs(100)), ncclRemoteError);   // nothing sent
  std::atomic<uint32_t> abortFlag{1};
  EXPECT_EQ(recvFds(conn, &fd, 1, nullptr, 0, deadlineAfterMs(5000), &abortFlag), ncclInternalError);
  client.close();
  EXPECT_EQ(recvFds(conn, &fd, 1, nullptr, 0, deadlineAfterMs(5000)), ncclRemoteError);   // peer closed
  UniqueFd mem(memfdWith(4096, 9));
  int fds[1] = {mem.get()};
  EXPECT_EQ(sendFds(conn, fds, 1, nullptr, 0, deadlineAfterMs(5000)), ncclRemoteError);
}

// A forked child connects and sends a memfd it wrote; the parent reads the
// bytes; then the parent sends one back and the child checks it.
TEST(FdPassing, ForkedProcessesPassMemfdsBothWays) {
  const std::string name = uniqueName("fork");
  FdSocket listener;
  ASSERT_EQ(listener.listen(name), ncclSuccess);
  constexpr size_t kBytes = 3 * 4096;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    listener.close();
    FdSocket s;
    if (s.connect(name, deadlineAfterMs(10000)) != ncclSuccess) _exit(1);
    UniqueFd mem(memfdWith(kBytes, 0xc3));
    const uint64_t size = kBytes;
    int fds[1] = {mem.get()};
    if (sendFds(s, fds, 1, &size, sizeof(size), deadlineAfterMs(10000)) != ncclSuccess) _exit(2);
    mem.reset();
    UniqueFd back;
    uint64_t backSize = 0;
    if (recvFds(s, &back, 1, &backSize, sizeof(backSize), deadlineAfterMs(10000)) != ncclSuccess) _exit(3);
    _exit(holds(back.get(), backSize, 0x3c) ? 0 : 4);
  }
  FdSocket conn;
  ASSERT_EQ(listener.accept(&conn, deadlineAfterMs(10000)), ncclSuccess);
  UniqueFd got;
  uint64_t size = 0;
  ASSERT_EQ(recvFds(conn, &got, 1, &size, sizeof(size), deadlineAfterMs(10000)), ncclSuccess);
  EXPECT_EQ(size, kBytes);
  EXPECT_TRUE(holds(got.get(), kBytes, 0xc3));
  UniqueFd mine(memfdWith(8192, 0x3c));
  const uint64_t mineSize = 8192;
  int fds[1] = {mine.get()};
  ASSERT_EQ(sendFds(conn, fds, 1, &mineSize, sizeof(mineSize), deadlineAfterMs(10000)), ncclSuccess);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(FdAuth, SecretNamesAreStableAndUnguessable) {
  AuthSecret a{}, b{};
  ASSERT_EQ(randomSecret(&a), ncclSuccess);
  ASSERT_EQ(randomSecret(&b), ncclSuccess);
  const std::string n = secretSocketName(a, "imp", "label 1");
  EXPECT_EQ(n, secretSocketName(a, "imp", "label 1"));
  EXPECT_NE(n, secretSocketName(b, "imp", "label 1"));
  EXPECT_NE(n, secretSocketName(a, "imp", "label 2"));
  EXPECT_EQ(n.rfind("uniccl-imp-", 0), 0u) << n;
  EXPECT_EQ(n.size(), std::string("uniccl-imp-").size() + 32);
  FdSocket s;
  EXPECT_EQ(s.listen(n), ncclSuccess);   // a valid abstract name
}

// One listener loop on a thread; clients in the test's thread.
class FdAuthLoop : public ::testing::Test {
 protected:
  static constexpr int kMaxConns = 8;
  void SetUp() override {
    ASSERT_EQ(randomSecret(&secret_), ncclSuccess);
    name_ = uniqueName("auth");
    ASSERT_EQ(listener_.listen(name_), ncclSuccess);
    thread_ = std::thread([this] {
      FdAuthServer server(&listener_, secret_, "test", kMaxConns, 30000, "test server");
      // Each authenticated client sends one 4-byte number and gets it back + 1.
      const FdAuthServer::OnReadable echo = [this](FdAuthServer::Conn& c) {
        uint32_t v = 0;
        if (recvFds(c.sock, nullptr, 0, &v, sizeof(v), Clock::now()) != ncclSuccess) return false;
        served_++;
        v++;
        (void)sendFds(c.sock, nullptr, 0, &v, sizeof(v), Clock::now());   // a lost answer fails the client's check
        return false;
      };
      while (!stop_.load()) {
        server.step(20, echo);
        maxConns_ = std::max<size_t>(maxConns_.load(), server.connections());
      }
    });
  }
  void TearDown() override {
    stop_ = 1;
    thread_.join();
  }
  // A client's whole exchange; ncclSuccess and the right answer, or the error.
  ncclResult_t ask(const AuthSecret& secret, uint32_t v) {
    FdSocket s;
    ncclResult_t res = s.connect(name_, deadlineAfterMs(5000));
    if (res == ncclSuccess) res = authenticateFdConnector(s, secret, "test", deadlineAfterMs(5000), nullptr, "client");
    if (res == ncclSuccess) res = sendFds(s, nullptr, 0, &v, sizeof(v), deadlineAfterMs(5000));
    uint32_t back = 0;
    if (res == ncclSuccess) res = recvFds(s, nullptr, 0, &back, sizeof(back), deadlineAfterMs(5000));
    if (res == ncclSuccess && back != v + 1) res = ncclInternalError;
    return res;
  }

  AuthSecret secret_{};
  std::string name_;
  FdSocket listener_;
  std::thread thread_;
  std::atomic<int> stop_{0};
  std::atomic<int> served_{0};
  std::atomic<size_t> maxConns_{0};
};

TEST_F(FdAuthLoop, ServesOnlyClientsThatProveTheSecret) {
  EXPECT_EQ(ask(secret_, 41), ncclSuccess);
  AuthSecret wrong = secret_;
  wrong.bytes[0] ^= 1;
  EXPECT_EQ(ask(wrong, 7), ncclRemoteError);
  // A client that skips the exchange and sends its request at once: dropped
  // unread (its message is not a response), never answered.
  FdSocket s;
  ASSERT_EQ(s.connect(name_, deadlineAfterMs(5000)), ncclSuccess);
  AuthChallenge challenge{};
  ASSERT_EQ(recvFds(s, nullptr, 0, &challenge, sizeof(challenge), deadlineAfterMs(5000)), ncclSuccess);
  EXPECT_EQ(challenge.tag, kAuthTag);
  const uint32_t v = 9;
  ASSERT_EQ(sendFds(s, nullptr, 0, &v, sizeof(v), deadlineAfterMs(5000)), ncclSuccess);
  uint32_t back = 0;
  EXPECT_EQ(recvFds(s, nullptr, 0, &back, sizeof(back), deadlineAfterMs(5000)), ncclRemoteError);   // closed
  EXPECT_EQ(served_.load(), 1);
  EXPECT_EQ(ask(secret_, 1), ncclSuccess);
}

// Clients that stall (silent, one raw byte, authenticated but silent) and a
// flood of more connections than the loop keeps: a real client is still
// answered at once. Bound: 10 s for what takes milliseconds; the stalled
// connections would hold a one-at-a-time server for 30 s each.
TEST_F(FdAuthLoop, StalledClientsAndFloodsDoNotDelayARealOne) {
  std::vector<FdSocket> stalled(3 * kMaxConns);
  for (FdSocket& s : stalled) ASSERT_EQ(s.connect(name_, deadlineAfterMs(5000)), ncclSuccess);
  const char one = 'x';
  // The newest connection sends it: the oldest may already have been
  // dropped to make room (the bound at work).
  ASSERT_EQ(::send(stalled.back().fd(), &one, 1, MSG_NOSIGNAL), 1);
  FdSocket authed;   // proves the secret, then never sends its request
  ASSERT_EQ(authed.connect(name_, deadlineAfterMs(5000)), ncclSuccess);
  ASSERT_EQ(authenticateFdConnector(authed, secret_, "test", deadlineAfterMs(5000), nullptr, "client"), ncclSuccess);
  const auto t0 = Clock::now();
  EXPECT_EQ(ask(secret_, 100), ncclSuccess);
  const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(sec, 10.0);
  EXPECT_LE(maxConns_.load(), (size_t)kMaxConns) << "the loop kept more connections than its bound";
  EXPECT_EQ(served_.load(), 1);
}

}  // namespace
}  // namespace uniccl
