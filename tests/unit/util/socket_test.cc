// Sockets: address parsing, interface choice, and that every operation ends
// (timeouts, refused connections, closed peers, abort flags) without leaking fds.
#include <gtest/gtest.h>
#include <dirent.h>
#include <netinet/in.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "common/util/debug.h"
#include "common/util/socket.h"

using namespace uniccl;

namespace {

int countOpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;  // the DIR itself
}

bool haveIpv6Loopback() {
  SocketAddress a;
  if (parseSocketAddress("[::1]:0", &a) != ncclSuccess) return false;
  Socket s;
  int err = 0;
  return s.listen(a, 1, &err) == ncclSuccess;
}

SocketAddress loopback(int family) {
  SocketAddress a;
  EXPECT_EQ(parseSocketAddress(family == AF_INET6 ? "[::1]:0" : "127.0.0.1:0", &a), ncclSuccess);
  return a;
}

}  // namespace

TEST(SocketAddress, ParsesNcclCommIdForms) {
  SocketAddress a;
  ASSERT_EQ(parseSocketAddress("127.0.0.1:29500", &a), ncclSuccess);
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.port(), 29500);
  EXPECT_EQ(a.toString(), "127.0.0.1:29500");
  ASSERT_EQ(parseSocketAddress("[::1]:7", &a), ncclSuccess);
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(a.toString(), "[::1]:7");
  EXPECT_EQ(a.toString(false), "::1");
  ASSERT_EQ(parseSocketAddress("localhost:80", &a), ncclSuccess);
  EXPECT_EQ(a.port(), 80);
  SocketAddress b = a;
  EXPECT_TRUE(a == b);
  b.setPort(81);
  EXPECT_FALSE(a == b);
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", ":80", "1.2.3.4:65536", "1.2.3.4:12x", "::1:80", "[::1]80",
                          "[::1", "no-such-host.invalid:80"})
    EXPECT_EQ(parseSocketAddress(bad, &a), ncclInvalidArgument) << bad;
  EXPECT_EQ(parseSocketAddress(nullptr, &a), ncclInvalidArgument);
}

TEST(SocketAddress, InterfaceMatching) {
  EXPECT_TRUE(interfaceMatches("eth", "eth0"));
  EXPECT_TRUE(interfaceMatches("ib,eth", "eth1"));
  EXPECT_FALSE(interfaceMatches("ib,eth", "lo"));
  EXPECT_FALSE(interfaceMatches("^docker,lo,virbr", "lo"));
  EXPECT_FALSE(interfaceMatches("^docker,lo,virbr", "docker0"));
  EXPECT_TRUE(interfaceMatches("^docker,lo,virbr", "eth0"));
  EXPECT_TRUE(interfaceMatches("=eth0", "eth0"));
  EXPECT_FALSE(interfaceMatches("=eth0", "eth01"));
  EXPECT_FALSE(interfaceMatches("^=eth0", "eth0"));
  EXPECT_TRUE(interfaceMatches("^=eth0", "eth01"));
}

TEST(SocketAddress, FindInterfacesHonorsIfnameAndFamily) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  std::vector<std::pair<std::string, SocketAddress>> ifs;
  ASSERT_EQ(findInterfaces(&ifs, 4), ncclSuccess);
  ASSERT_EQ(ifs.size(), 1u);
  EXPECT_EQ(ifs[0].first, "lo");
  EXPECT_EQ(ifs[0].second.port(), 0);
  if (haveIpv6Loopback()) {
    setenv("NCCL_SOCKET_FAMILY", "AF_INET6", 1);
    ASSERT_EQ(findInterfaces(&ifs, 4), ncclSuccess);
    EXPECT_EQ(ifs[0].second.toString(false), "::1");
    unsetenv("NCCL_SOCKET_FAMILY");
  }
  ASSERT_EQ(findInterfaces(&ifs, 4, AF_INET), ncclSuccess);
  EXPECT_EQ(ifs[0].second.toString(false), "127.0.0.1");
  setenv("NCCL_SOCKET_IFNAME", "=no-such-interface", 1);
  EXPECT_EQ(findInterfaces(&ifs, 4), ncclSystemError);
  EXPECT_NE(std::string(lastErrorMessage()).find("NCCL_SOCKET_IFNAME"), std::string::npos);
  unsetenv("NCCL_SOCKET_IFNAME");
  ASSERT_EQ(findInterfaces(&ifs, 16), ncclSuccess);  // default rule: something, lo at worst
  EXPECT_FALSE(ifs.empty());
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
}

class SocketFamily : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (GetParam() == AF_INET6 && !haveIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback";
  }
};

TEST_P(SocketFamily, SendRecvLargeRandomData) {
  int fdsBefore = countOpenFds();
  {
    Socket listener;
    ASSERT_EQ(listener.listen(loopback(GetParam())), ncclSuccess);
    ASSERT_NE(listener.address().port(), 0);
    std::vector<uint8_t> data(8 << 20), got(data.size());
    std::mt19937 rng(GetParam());
    for (auto& b : data) b = (uint8_t)rng();
    ncclResult_t clientRes = ncclInternalError;
    std::thread client([&] {
      Socket c;
      clientRes = c.connect(listener.address(), deadlineAfterMs(5000));
      if (clientRes == ncclSuccess) clientRes = c.sendAll(data.data(), data.size(), deadlineAfterMs(5000));
    });
    Socket server;
    ASSERT_EQ(listener.accept(&server, deadlineAfterMs(5000)), ncclSuccess);
    EXPECT_EQ(server.recvAll(got.data(), got.size(), deadlineAfterMs(5000)), ncclSuccess);
    client.join();
    EXPECT_EQ(clientRes, ncclSuccess);
    EXPECT_TRUE(got == data);
  }
  EXPECT_EQ(countOpenFds(), fdsBefore);
}

TEST_P(SocketFamily, EveryWaitEnds) {
  int fdsBefore = countOpenFds();
  {
    Socket listener;
    ASSERT_EQ(listener.listen(loopback(GetParam())), ncclSuccess);
    Socket server, client;
    // accept with nobody connecting
    auto t0 = Clock::now();
    EXPECT_EQ(listener.accept(&server, deadlineAfterMs(100)), ncclRemoteError);
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
    ASSERT_EQ(client.connect(listener.address(), deadlineAfterMs(2000)), ncclSuccess);
    ASSERT_EQ(listener.accept(&server, deadlineAfterMs(2000)), ncclSuccess);
    // recv with a silent peer
    char buf[16];
    t0 = Clock::now();
    EXPECT_EQ(server.recvAll(buf, sizeof(buf), deadlineAfterMs(100)), ncclRemoteError);
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
    // abort flag ends a wait long before its deadline
    std::atomic<uint32_t> abortFlag{0};
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      abortFlag.store(1);
    });
    t0 = Clock::now();
    EXPECT_EQ(server.recvAll(buf, sizeof(buf), deadlineAfterMs(60000), &abortFlag), ncclInternalError);
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
    aborter.join();
    // send into a peer that never reads: fills the buffers, then times out
    std::vector<char> big(64 << 20, 'x');
    EXPECT_EQ(client.sendAll(big.data(), big.size(), deadlineAfterMs(200)), ncclRemoteError);
    // a closed peer is an error, not a hang
    server.close();
    EXPECT_EQ(client.recvAll(buf, sizeof(buf), deadlineAfterMs(5000)), ncclRemoteError);
    // writing to a closed peer fails without SIGPIPE killing the process
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < 100 && r == ncclSuccess; i++) r = client.sendAll(buf, sizeof(buf), deadlineAfterMs(1000));
    EXPECT_NE(r, ncclSuccess);
  }
  EXPECT_EQ(countOpenFds(), fdsBefore);
}

TEST_P(SocketFamily, ConnectRetriesUntilTheListenerAppears) {
  SocketAddress addr;
  {
    Socket probe;
    ASSERT_EQ(probe.listen(loopback(GetParam())), ncclSuccess);
    addr = probe.address();
  }  // port now free: connections are refused
  auto t0 = Clock::now();
  Socket c;
  EXPECT_EQ(c.connect(addr, deadlineAfterMs(200)), ncclRemoteError);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
  EXPECT_FALSE(c.isOpen());
  Socket late;
  std::thread starter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    EXPECT_EQ(late.listen(addr), ncclSuccess);
  });
  EXPECT_EQ(c.connect(addr, deadlineAfterMs(5000)), ncclSuccess);
  starter.join();
}

TEST_P(SocketFamily, SendRecvAllBothWaysAtOnce) {
  // Both sides send more than the socket buffers hold before reading.
  Socket listener;
  ASSERT_EQ(listener.listen(loopback(GetParam())), ncclSuccess);
  Socket a, b;
  ASSERT_EQ(a.connect(listener.address(), deadlineAfterMs(2000)), ncclSuccess);
  ASSERT_EQ(listener.accept(&b, deadlineAfterMs(2000)), ncclSuccess);
  std::vector<char> sa(16 << 20, 'a'), sb(16 << 20, 'b'), ra(sa.size()), rb(sb.size());
  ncclResult_t resB = ncclInternalError;
  std::thread tb([&] { resB = sendRecvAll(b, sb.data(), sb.size(), b, rb.data(), rb.size(), deadlineAfterMs(10000)); });
  EXPECT_EQ(sendRecvAll(a, sa.data(), sa.size(), a, ra.data(), ra.size(), deadlineAfterMs(10000)), ncclSuccess);
  tb.join();
  EXPECT_EQ(resB, ncclSuccess);
  EXPECT_TRUE(ra == sb);
  EXPECT_TRUE(rb == sa);
}

INSTANTIATE_TEST_SUITE_P(Families, SocketFamily, ::testing::Values(AF_INET, AF_INET6),
                         [](const ::testing::TestParamInfo<int>& i) { return i.param == AF_INET ? "IPv4" : "IPv6"; });

TEST(Socket, MoveTransfersOwnership) {
  int fdsBefore = countOpenFds();
  {
    Socket a;
    ASSERT_EQ(a.listen(loopback(AF_INET)), ncclSuccess);
    int fd = a.fd();
    Socket b(std::move(a));
    EXPECT_FALSE(a.isOpen());
    EXPECT_EQ(b.fd(), fd);
    Socket c;
    c = std::move(b);
    EXPECT_EQ(c.fd(), fd);
  }
  EXPECT_EQ(countOpenFds(), fdsBefore);
}
