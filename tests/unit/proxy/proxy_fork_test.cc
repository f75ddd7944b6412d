// The proxy across two processes over the real socket transport on
// loopback: the parent produces (CPU "kernel" -> conn FIFO -> proxy ->
// socket), the child consumes (socket -> proxy -> conn FIFO -> CPU
// "kernel") and checks every byte. Both processes start their threads (net
// helpers, proxy) only after the fork.
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "common/proxy/proxy.h"
#include "net/socket_transport.h"
#include "proxy_harness.h"

namespace uniccl::test {
namespace {

constexpr uint64_t kSteps = 3000;   // 375 wraps of the 8 slots
constexpr int64_t kStepBytes = 4096;
constexpr uint64_t kSeed = 2026;

bool writeAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}
bool readAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Child: exit code 0 = every step arrived intact; otherwise which stage failed.
int receiver(int handleFd) {
  const ncclNet_v8_t* net = socketNetApi();
  if (net->init(nullptr) != ncclSuccess) return 10;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen = nullptr;
  if (net->listen(0, handle, &listen) != ncclSuccess) return 11;
  if (!writeAll(handleFd, handle, sizeof(handle))) return 12;
  void* rc = nullptr;
  if (acceptLoop(net, listen, &rc) != ncclSuccess) return 13;
  int rcode = 0;
  {
    Endpoint rx;
    if (rx.setup(net, rc, false, kStepBytes) != ncclSuccess) return 14;
    ProxyRef proxy;
    if (ProxyRef::acquire(&proxy) != ncclSuccess) return 15;
    ProxyOp recv;
    recv.conn = &rx.conn;
    recv.kind = ProxyOpKind::kRecv;
    recv.tag = 1;
    recv.nsteps = kSteps;
    if (proxy.post(&recv) != ncclSuccess) return 16;
    uint32_t stop = 0;
    ConsumerResult cr = consume(rx, kSeed, kSteps, 0, &stop);
    if (cr.timedOut || cr.consumed != kSteps) rcode = 17;
    else if (cr.badSteps != 0) rcode = 18;
    else if (proxyOpWait(&recv) != ncclSuccess) rcode = 19;
    else if (recv.done != kSteps) rcode = 20;
  }
  net->closeListen(listen);
  return rcode;
}

TEST(ProxyFork, SocketTransportIntegrityAcrossProcesses) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    _exit(receiver(fds[1]));
  }
  close(fds[1]);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  bool gotHandle = readAll(fds[0], handle, sizeof(handle));
  close(fds[0]);
  if (gotHandle) {
    const ncclNet_v8_t* net = socketNetApi();
    ASSERT_EQ(net->init(nullptr), ncclSuccess);
    void* sc = nullptr;
    ASSERT_EQ(connectLoop(net, handle, &sc), ncclSuccess);
    Endpoint tx;
    ASSERT_EQ(tx.setup(net, sc, true, kStepBytes), ncclSuccess);
    ProxyRef proxy;
    ASSERT_EQ(ProxyRef::acquire(&proxy), ncclSuccess);
    ProxyOp send;
    send.conn = &tx.conn;
    send.kind = ProxyOpKind::kSend;
    send.tag = 1;
    send.nsteps = kSteps;
    ASSERT_EQ(proxy.post(&send), ncclSuccess);
    uint32_t stop = 0;
    ProducerResult pr = produce(tx, kSeed, kSteps, &stop);
    EXPECT_FALSE(pr.timedOut);
    EXPECT_EQ(pr.produced, kSteps);
    EXPECT_EQ(pr.overwrites, 0u);
    EXPECT_LE(pr.maxInFlight, static_cast<uint64_t>(kConnSteps));
    EXPECT_EQ(proxyOpWait(&send), ncclSuccess);
    EXPECT_EQ(send.done, kSteps);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(gotHandle) << "the receiver died before listening";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "receiver failed at stage " << WEXITSTATUS(status);
}

}  // namespace
}  // namespace uniccl::test
