// Bootstrap on real loopback sockets: ranks as threads and as processes, the
// host-side collectives, hostile clients at the root, missing and dying ranks,
// IPv6, NCCL_COMM_ID. Every check uses random data.
#include <gtest/gtest.h>
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/bootstrap/bootstrap.h"
#include "common/bootstrap/handshake.h"
#include "common/bootstrap/root.h"
#include "common/bootstrap/unique_id.h"
#include "common/bootstrap/wire.h"
#include "common/util/debug.h"
#include "test_ids.h"

using namespace uniccl;
using namespace uniccl::bootstrap_test;

namespace {

int countOpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;
}

struct PeerInfo {
  uint64_t hostHash;
  int32_t rank;
  int32_t pid;
  uint8_t busId[48];
};

PeerInfo makePeerInfo(int rank, uint64_t salt) {
  std::mt19937_64 rng(salt * 1000003 + rank);
  PeerInfo p;
  p.hostHash = rng();
  p.rank = rank;
  p.pid = (int32_t)rng();
  for (auto& b : p.busId) b = (uint8_t)rng();
  return p;
}

std::vector<uint8_t> randomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = (uint8_t)rng();
  return v;
}

// Runs fn(rank) on nranks threads and returns the results.
std::vector<ncclResult_t> onThreads(int nranks, const std::function<ncclResult_t(int)>& fn) {
  std::vector<ncclResult_t> res(nranks, ncclInternalError);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; r++) threads.emplace_back([&, r] { res[r] = fn(r); });
  for (auto& t : threads) t.join();
  return res;
}

// Init + checks of the peer info, one rank.
ncclResult_t initRank(const ncclUniqueId& id, int rank, int nranks, uint64_t salt, std::unique_ptr<Bootstrap>* out) {
  PeerInfo mine = makePeerInfo(rank, salt);
  ncclResult_t res = Bootstrap::init(id, rank, nranks, &mine, sizeof(mine), out);
  if (res != ncclSuccess) return res;
  Bootstrap& b = **out;
  if (b.rank() != rank || b.nranks() != nranks || b.peerInfoBytes() != sizeof(PeerInfo)) return ncclInternalError;
  for (int r = 0; r < nranks; r++) {
    PeerInfo expect = makePeerInfo(r, salt);
    if (memcmp(b.peerInfo(r), &expect, sizeof(expect)) != 0) {
      ADD_FAILURE() << "rank " << rank << " has wrong peer info of rank " << r;
      return ncclInternalError;
    }
  }
  if (b.peerInfo(nranks) != nullptr || b.peerInfo(-1) != nullptr) return ncclInternalError;
  return ncclSuccess;
}

// Every collective and p2p pattern on an initialized bootstrap.
ncclResult_t exercise(Bootstrap& b, uint64_t salt) {
  int rank = b.rank(), n = b.nranks();
  // allGather of random data, twice with different sizes
  for (size_t bytes : {size_t(1), size_t(1000), size_t(300000)}) {
    std::vector<uint8_t> all(bytes * n, 0);
    auto mine = randomBytes(bytes, salt + rank * 7 + bytes);
    memcpy(&all[bytes * rank], mine.data(), bytes);
    if (b.allGather(all.data(), bytes) != ncclSuccess) return ncclInternalError;
    for (int r = 0; r < n; r++) {
      auto expect = randomBytes(bytes, salt + r * 7 + bytes);
      if (memcmp(&all[bytes * r], expect.data(), bytes) != 0) {
        ADD_FAILURE() << "allGather slot " << r << " wrong on rank " << rank;
        return ncclInternalError;
      }
    }
  }
  if (b.barrier() != ncclSuccess) return ncclInternalError;

  // p2p with out-of-order tags: send tags 5, 9, 7 to the next rank; receive
  // 7, 5, 9 from the previous one. Plus a message to self.
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  for (uint32_t tag : {5u, 9u, 7u}) {
    auto msg = randomBytes(100 + tag * 1000, salt ^ (rank * 131 + tag));
    if (b.send(next, tag, msg.data(), msg.size()) != ncclSuccess) return ncclInternalError;
  }
  auto self = randomBytes(64, salt + 99 + rank);
  if (b.send(rank, 3, self.data(), self.size()) != ncclSuccess) return ncclInternalError;
  for (uint32_t tag : {7u, 5u, 9u}) {
    auto expect = randomBytes(100 + tag * 1000, salt ^ (prev * 131 + tag));
    std::vector<uint8_t> got(expect.size());
    if (b.recv(prev, tag, got.data(), got.size()) != ncclSuccess) return ncclInternalError;
    if (got != expect) {
      ADD_FAILURE() << "p2p tag " << tag << " wrong on rank " << rank;
      return ncclInternalError;
    }
  }
  std::vector<uint8_t> selfGot(64);
  if (b.recv(rank, 3, selfGot.data(), selfGot.size()) != ncclSuccess || selfGot != self) return ncclInternalError;

  // broadcast from every root in turn
  for (int root = 0; root < n; root++) {
    auto expect = randomBytes(5000 + root, salt * 3 + root);
    std::vector<uint8_t> buf = rank == root ? expect : std::vector<uint8_t>(expect.size(), 0);
    if (b.broadcast(buf.data(), buf.size(), root) != ncclSuccess) return ncclInternalError;
    if (buf != expect) {
      ADD_FAILURE() << "broadcast from " << root << " wrong on rank " << rank;
      return ncclInternalError;
    }
  }
  return b.barrier();
}

SocketAddress rootOf(const ncclUniqueId& id) { return contentsOf(id).root; }

uint64_t magicOf(const ncclUniqueId& id) { return contentsOf(id).magic; }

bool haveIpv6Loopback() {
  SocketAddress a;
  if (parseSocketAddress("[::1]:0", &a) != ncclSuccess) return false;
  Socket s;
  int err = 0;
  return s.listen(a, 1, &err) == ncclSuccess;
}

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

}  // namespace

class ThreadRanks : public ::testing::TestWithParam<int> {};

TEST_P(ThreadRanks, InitCollectivesP2pAndNoLeaks) {
  ASSERT_TRUE(waitForRoots(5000));
  int fdsBefore = countOpenFds();
  int n = GetParam();
  uint64_t salt = std::random_device()();
  ncclUniqueId id = newId();
  auto res = onThreads(n, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ncclResult_t r = initRank(id, rank, n, salt, &b);
    if (r != ncclSuccess) return r;
    return exercise(*b, salt);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
  EXPECT_TRUE(waitForRoots(5000)) << "the root thread did not finish";
  EXPECT_EQ(rootThreadCount(), 0u);
  EXPECT_EQ(countOpenFds(), fdsBefore);
}

INSTANTIATE_TEST_SUITE_P(Sizes, ThreadRanks, ::testing::Values(1, 2, 3, 8));

// ncclCommInitRankScalable's bootstrap: nIds roots (each id made apart,
// as by different processes), every root serving a block of the ranks; the
// blocks must form one ring (the allGather and p2p checks fail otherwise)
// and every root thread must finish. Blocks of unequal size (7 ranks over
// 3 roots: 3, 2, 2), one rank per root, and more ids than ranks.
struct ScalableCase {
  int nranks;
  int nIds;
};
class ScalableRanks : public ::testing::TestWithParam<ScalableCase> {};

TEST_P(ScalableRanks, SeveralRootsFormOneRing) {
  ASSERT_TRUE(waitForRoots(5000));
  const ScalableCase c = GetParam();
  uint64_t salt = std::random_device()();
  std::vector<ncclUniqueId> ids;
  for (int i = 0; i < c.nIds; i++) ids.push_back(newId());
  auto res = onThreads(c.nranks, [&](int rank) {
    PeerInfo mine = makePeerInfo(rank, salt);
    std::unique_ptr<Bootstrap> b;
    ncclResult_t r = Bootstrap::init(ids.data(), c.nIds, rank, c.nranks, &mine, sizeof(mine), &b);
    if (r != ncclSuccess) return r;
    for (int p = 0; p < c.nranks; p++) {
      PeerInfo expect = makePeerInfo(p, salt);
      if (memcmp(b->peerInfo(p), &expect, sizeof(expect)) != 0) return ncclInternalError;
    }
    return exercise(*b, salt);
  });
  for (int r = 0; r < c.nranks; r++) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
  // Ids beyond nranks serve nobody: their roots wait until stopped.
  const size_t idle = c.nIds > c.nranks ? (size_t)(c.nIds - c.nranks) : 0;
  for (int i = 0; i < 500 && rootThreadCount() > idle; i++) {
    reapFinishedRoots();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(rootThreadCount(), idle) << "a root thread did not finish";
}

INSTANTIATE_TEST_SUITE_P(Roots, ScalableRanks,
                         ::testing::Values(ScalableCase{7, 3}, ScalableCase{4, 4}, ScalableCase{8, 2},
                                           ScalableCase{5, 1}));

TEST(Bootstrap, RootBlocksCoverEveryRankOnce) {
  for (int nranks = 1; nranks <= 40; nranks++) {
    for (int nRoots = 1; nRoots <= nranks; nRoots++) {
      int next = 0;
      for (int root = 0; root < nRoots; root++) {
        bootstrap::RootBlock b = bootstrap::rootBlock(root, nranks, nRoots);
        ASSERT_EQ(b.first, next) << nranks << " ranks, root " << root << " of " << nRoots;
        ASSERT_GE(b.end - b.first, nranks / nRoots);
        ASSERT_LE(b.end - b.first, nranks / nRoots + 1);
        for (int r = b.first; r < b.end; r++) ASSERT_EQ(bootstrap::rootOfRank(r, nranks, nRoots), root);
        next = b.end;
      }
      ASSERT_EQ(next, nranks);
    }
  }
}

// A rank whose ids are in another order than its peers' meets the wrong
// root: someone is refused with a message saying so, and nobody's init
// succeeds; the same id passed twice is refused before any connection.
TEST(Bootstrap, ScalableIdsMustAgree) {
  ScopedEnv timeout("UNICCL_BOOTSTRAP_TIMEOUT", "2");
  std::vector<ncclUniqueId> ids = {newId(), newId()};
  std::vector<ncclUniqueId> swapped = {ids[1], ids[0]};
  std::vector<std::string> errors(4);
  auto res = onThreads(4, [&](int rank) {
    PeerInfo mine = makePeerInfo(rank, 3);
    std::unique_ptr<Bootstrap> b;
    // Ranks 0, 1 belong to root 0: rank 1 takes ids[1]'s root for it.
    ncclResult_t r = Bootstrap::init(rank == 1 ? swapped.data() : ids.data(), 2, rank, 4, &mine, sizeof(mine), &b);
    errors[rank] = lastErrorMessage();
    return r;
  });
  // Whoever reaches ids[1]'s root first fixes which block it serves: rank 1,
  // or ranks 2 and 3 are refused, or the root times out first on a loaded
  // machine (the ASan build of CI saw no refusal once); nobody succeeds.
  for (int r = 0; r < 4; r++) {
    EXPECT_NE(res[r], ncclSuccess) << "rank " << r;
    if (res[r] == ncclInvalidUsage) {
      EXPECT_NE(errors[r].find("same ids in the same order"), std::string::npos) << errors[r];
    }
  }
  std::vector<ncclUniqueId> twice = {ids[0], ids[0]};
  PeerInfo mine = makePeerInfo(0, 3);
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(Bootstrap::init(twice.data(), 2, 0, 4, &mine, sizeof(mine), &b), ncclInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("same id"), std::string::npos) << lastErrorMessage();
  EXPECT_TRUE(waitForRoots(8000));
}

TEST(Bootstrap, SizeMismatchIsAClearError) {
  ncclUniqueId id = newId();
  auto res = onThreads(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ncclResult_t r = initRank(id, rank, 2, 1, &b);
    if (r != ncclSuccess) return r;
    uint64_t v = 0x1234567890abcdefull;
    if (rank == 0) return b->send(1, 42, &v, sizeof(v));
    uint32_t small;
    r = b->recv(0, 42, &small, sizeof(small));
    if (r != ncclInternalError) return ncclInvalidUsage;
    std::string err = lastErrorMessage();
    EXPECT_NE(err.find("size mismatch"), std::string::npos) << err;
    return ncclSuccess;
  });
  EXPECT_EQ(res[0], ncclSuccess);
  EXPECT_EQ(res[1], ncclSuccess);
}

TEST(Bootstrap, ForkedRanks) {
  const int n = 4;
  uint64_t salt = std::random_device()();
  // The ranks are forked before the root's thread exists and get the id
  // through a pipe: a child of a multi-threaded process must not start
  // threads (ThreadSanitizer refuses), and every rank starts its listener's.
  ASSERT_TRUE(waitForRoots(5000));
  std::vector<pid_t> kids;
  std::vector<int> idPipes;
  for (int rank = 0; rank < n; rank++) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[1]);
      ncclUniqueId id;
      if (read(fds[0], &id, sizeof(id)) != (ssize_t)sizeof(id)) _exit(2);
      std::unique_ptr<Bootstrap> b;
      ncclResult_t r = initRank(id, rank, n, salt, &b);
      if (r == ncclSuccess) r = exercise(*b, salt);
      b.reset();
      _exit(r == ncclSuccess ? 0 : 10 + (int)r);
    }
    close(fds[0]);
    idPipes.push_back(fds[1]);
    kids.push_back(pid);
  }
  ncclUniqueId id = newId();  // the root lives in this (parent) process
  for (int fd : idPipes) {
    EXPECT_EQ(write(fd, &id, sizeof(id)), (ssize_t)sizeof(id));
    close(fd);
  }
  auto deadline = Clock::now() + std::chrono::seconds(20);
  for (size_t i = 0; i < kids.size(); i++) {
    int status = 0;
    pid_t got = 0;
    while ((got = waitpid(kids[i], &status, WNOHANG)) == 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (got == 0) {
      kill(kids[i], SIGKILL);
      waitpid(kids[i], &status, 0);
      ADD_FAILURE() << "rank " << i << " hung";
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << i << " status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  EXPECT_TRUE(waitForRoots(5000));
}

TEST(Bootstrap, HostileClientsDoNotStopTheRealRanks) {
  const int n = 4;
  uint64_t salt = std::random_device()();
  ncclUniqueId id = newId();
  SocketAddress root = rootOf(id);
  uint64_t magic = magicOf(id);
  UniqueIdContents contents;
  ASSERT_EQ(decodeUniqueId(id, &contents), ncclSuccess);
  const AuthSecret secret = contents.secret;
  std::atomic<bool> realDone{false};
  std::vector<std::thread> hostile;

  // random bytes
  hostile.emplace_back([&] {
    Socket s;
    if (s.connect(root, deadlineAfterMs(2000)) != ncclSuccess) return;
    auto junk = randomBytes(4096, salt);
    (void)s.sendAll(junk.data(), junk.size(), deadlineAfterMs(1000));   // hostile peers ignore what the root does
    while (!realDone) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  // a well-formed hello with the wrong magic, from a peer that knows the secret
  hostile.emplace_back([&] {
    Socket s;
    if (bootstrap::connectAuthenticated(&s, root, secret, bootstrap::kRootAuthContext, deadlineAfterMs(2000), nullptr,
                                        "test") != ncclSuccess)
      return;
    std::vector<char> body(sizeof(bootstrap::HelloBody), 0);
    (void)bootstrap::sendMessage(s, magic ^ 1, bootstrap::kMsgHello, 0, body.data(), body.size(),
                                 deadlineAfterMs(1000), nullptr);
  });
  // the secret and the right magic but an absurd length (must not be allocated)
  hostile.emplace_back([&] {
    Socket s;
    if (bootstrap::connectAuthenticated(&s, root, secret, bootstrap::kRootAuthContext, deadlineAfterMs(2000), nullptr,
                                        "test") != ncclSuccess)
      return;
    bootstrap::WireHeader h = {magic, bootstrap::kMsgHello, 0, 1ull << 40};
    (void)s.sendAll(&h, sizeof(h), deadlineAfterMs(1000));
  });
  // half-open: a partial proof, then silence until the real ranks are done
  hostile.emplace_back([&] {
    Socket s;
    if (s.connect(root, deadlineAfterMs(2000)) != ncclSuccess) return;
    (void)s.sendAll(&magic, 5, deadlineAfterMs(1000));
    while (!realDone) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  // slow writer: a valid-looking hello after the proof, one byte every 20 ms
  hostile.emplace_back([&] {
    Socket s;
    if (bootstrap::connectAuthenticated(&s, root, secret, bootstrap::kRootAuthContext, deadlineAfterMs(2000), nullptr,
                                        "test") != ncclSuccess)
      return;
    bootstrap::WireHeader h = {magic, bootstrap::kMsgHello, 0, sizeof(bootstrap::HelloBody)};
    const char* p = reinterpret_cast<const char*>(&h);
    for (size_t i = 0; i < sizeof(h) && !realDone; i++) {
      if (s.sendAll(p + i, 1, deadlineAfterMs(500)) != ncclSuccess) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  // a crowd that connects and leaves
  hostile.emplace_back([&] {
    for (int i = 0; i < 150; i++) {
      Socket s;
      (void)s.connect(root, deadlineAfterMs(2000));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the attackers in first

  auto t0 = Clock::now();
  auto res = onThreads(n, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ncclResult_t r = initRank(id, rank, n, salt, &b);
    if (r != ncclSuccess) return r;
    return b->barrier();
  });
  realDone = true;
  for (auto& t : hostile) t.join();
  for (int r = 0; r < n; r++) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  EXPECT_TRUE(waitForRoots(5000));
}

TEST(Bootstrap, MissingRankFailsEveryoneWithinTheTimeout) {
  ScopedEnv timeout("UNICCL_BOOTSTRAP_TIMEOUT", "2");
  ncclUniqueId id = newId();
  auto t0 = Clock::now();
  std::vector<std::string> errors(3);
  auto res = onThreads(3, [&](int rank) {  // rank 3 of 4 never comes
    std::unique_ptr<Bootstrap> b;
    ncclResult_t r = initRank(id, rank, 4, 5, &b);
    errors[rank] = lastErrorMessage();
    return r;
  });
  auto elapsed = Clock::now() - t0;
  for (int r = 0; r < 3; r++) {
    EXPECT_EQ(res[r], ncclRemoteError) << "rank " << r;
    EXPECT_NE(errors[r].find("missing ranks 3"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("UNICCL_BOOTSTRAP_TIMEOUT"), std::string::npos) << errors[r];
  }
  EXPECT_GE(elapsed, std::chrono::milliseconds(1900));
  EXPECT_LT(elapsed, std::chrono::seconds(6));
  EXPECT_TRUE(waitForRoots(5000));
}

TEST(Bootstrap, DuplicateRankIsRejected) {
  ScopedEnv timeout("UNICCL_BOOTSTRAP_TIMEOUT", "2");
  ncclUniqueId id = newId();
  std::vector<std::string> errors(2);
  auto res = onThreads(2, [&](int t) {
    std::unique_ptr<Bootstrap> b;
    ncclResult_t r = initRank(id, 0, 2, 6, &b);  // both claim rank 0
    errors[t] = lastErrorMessage();
    return r;
  });
  // One is refused at once; the other times out waiting for rank 1.
  int refused = (res[0] == ncclInvalidUsage) + (res[1] == ncclInvalidUsage);
  int timedOut = (res[0] == ncclRemoteError) + (res[1] == ncclRemoteError);
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(timedOut, 1);
  EXPECT_NE((errors[0] + errors[1]).find("arrived twice"), std::string::npos) << errors[0] << errors[1];
  EXPECT_TRUE(waitForRoots(5000));
}

TEST(Bootstrap, DeadPeerFailsQuicklyNamingItsRank) {
  ncclUniqueId id = newId();
  std::atomic<int> phase{0};
  std::string err1, err0;
  auto res = onThreads(3, [&](int rank) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    ncclResult_t r = initRank(id, rank, 3, 8, &b);
    if (r != ncclSuccess) return r;
    uint32_t v = 0xfeed0000u + rank;
    if (rank == 2) {
      r = b->send(1, 1, &v, sizeof(v));
      b.reset();  // dies
      phase = 1;
      return r;
    }
    while (phase.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (rank == 1) {
      uint32_t got = 0;
      if (b->recv(2, 1, &got, sizeof(got)) != ncclSuccess || got != 0xfeed0002u) return ncclInternalError;
      auto t0 = Clock::now();
      r = b->recv(2, 2, &got, sizeof(got));
      err1 = lastErrorMessage();
      EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
      if (r != ncclRemoteError) return ncclInternalError;
    }
    // the ring through rank 2 is broken too: allGather fails, no hang
    auto t0 = Clock::now();
    uint32_t slots[3] = {0, 0, 0};
    r = b->allGather(slots, sizeof(uint32_t));
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
    if (rank == 0) err0 = lastErrorMessage();
    return r == ncclRemoteError ? ncclSuccess : ncclInternalError;
  });
  for (int r = 0; r < 3; r++) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
  EXPECT_NE(err1.find("rank 2"), std::string::npos) << err1;
  EXPECT_NE(err0.find("rank 2"), std::string::npos) << err0;
}

TEST(Bootstrap, AbortFlagEndsInit) {
  // The root keeps waiting for rank 1 after rank 0 aborts: keep that short.
  ScopedEnv timeout("UNICCL_BOOTSTRAP_TIMEOUT", "1");
  ncclUniqueId id = newId();
  std::atomic<uint32_t> abortFlag{0};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    abortFlag = 1;
  });
  auto t0 = Clock::now();
  std::unique_ptr<Bootstrap> b;
  PeerInfo p = makePeerInfo(0, 1);
  EXPECT_EQ(Bootstrap::init(id, 0, 2, &p, sizeof(p), &b, &abortFlag), ncclInternalError);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
  EXPECT_EQ(b, nullptr);
  aborter.join();
  EXPECT_TRUE(waitForRoots(5000));
}

TEST(Bootstrap, InvalidArguments) {
  EXPECT_EQ(ncclGetUniqueId(nullptr), ncclInvalidArgument);
  ncclUniqueId zero;
  memset(&zero, 0, sizeof(zero));
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(Bootstrap::init(zero, 0, 1, nullptr, 0, &b), ncclInvalidArgument);
  ncclUniqueId id = newId();
  EXPECT_EQ(Bootstrap::init(id, 2, 2, nullptr, 0, &b), ncclInvalidArgument);
  EXPECT_EQ(Bootstrap::init(id, -1, 2, nullptr, 0, &b), ncclInvalidArgument);
  EXPECT_EQ(Bootstrap::init(id, 0, 0, nullptr, 0, &b), ncclInvalidArgument);
  EXPECT_EQ(Bootstrap::init(id, 0, 1, nullptr, 16, &b), ncclInvalidArgument);
  EXPECT_EQ(Bootstrap::init(id, 0, 1, nullptr, 0, nullptr), ncclInvalidArgument);
  // The id is still good for a real one-rank init.
  ASSERT_EQ(Bootstrap::init(id, 0, 1, nullptr, 0, &b), ncclSuccess);
  int x = 7;
  EXPECT_EQ(b->send(1, 0, &x, sizeof(x)), ncclInvalidArgument);
  EXPECT_EQ(b->recv(0, 0, &x, sizeof(x)), ncclInvalidUsage);  // nothing sent to self
  EXPECT_EQ(b->broadcast(&x, sizeof(x), 3), ncclInvalidArgument);
  EXPECT_EQ(b->allGather(nullptr, 4), ncclInvalidArgument);
  EXPECT_TRUE(waitForRoots(5000));
}

TEST(Bootstrap, Ipv6Loopback) {
  if (!haveIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback";
  ScopedEnv family("NCCL_SOCKET_FAMILY", "AF_INET6");
  uint64_t salt = std::random_device()();
  ncclUniqueId id = newId();
  EXPECT_EQ(rootOf(id).family(), AF_INET6);
  EXPECT_EQ(rootOf(id).toString(false), "::1");
  auto res = onThreads(3, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ncclResult_t r = initRank(id, rank, 3, salt, &b);
    return r == ncclSuccess ? exercise(*b, salt) : r;
  });
  for (int r = 0; r < 3; r++) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
  EXPECT_TRUE(waitForRoots(5000));
}

namespace {
int freePort() {
  SocketAddress a;
  EXPECT_EQ(parseSocketAddress("127.0.0.1:0", &a), ncclSuccess);
  Socket s;
  EXPECT_EQ(s.listen(a), ncclSuccess);
  return s.address().port();
}
}  // namespace

TEST(Bootstrap, NcclCommIdWithoutGetUniqueId) {
  // torchrun style: every rank knows only NCCL_COMM_ID, rank 0 hosts the root.
  std::string addr = "127.0.0.1:" + std::to_string(freePort());
  ScopedEnv commId("NCCL_COMM_ID", addr.c_str());
  uint64_t salt = std::random_device()();
  for (int round = 0; round < 2; round++) {  // the port can serve a second communicator
    auto res = onThreads(3, [&](int rank) {
      if (rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // rank 0 need not be first
      ncclUniqueId id;
      bool found = false;
      ncclResult_t r = bootstrapIdFromEnv(&id, &found);
      if (r != ncclSuccess || !found) return ncclInternalError;
      std::unique_ptr<Bootstrap> b;
      r = initRank(id, rank, 3, salt + round, &b);
      return r == ncclSuccess ? exercise(*b, salt) : r;
    });
    for (int r = 0; r < 3; r++) EXPECT_EQ(res[r], ncclSuccess) << "round " << round << " rank " << r;
    EXPECT_TRUE(waitForRoots(5000));
  }
}

TEST(Bootstrap, NcclCommIdWithGetUniqueId) {
  std::string addr = "[::1]:" + std::to_string(freePort());
  if (!haveIpv6Loopback()) addr = "127.0.0.1:" + std::to_string(freePort());
  ScopedEnv commId("NCCL_COMM_ID", addr.c_str());
  ncclUniqueId id, fromEnv;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);  // starts the root on that address
  bool found = false;
  ASSERT_EQ(bootstrapIdFromEnv(&fromEnv, &found), ncclSuccess);
  ASSERT_TRUE(found);
  EXPECT_EQ(memcmp(&id, &fromEnv, sizeof(id)), 0);
  EXPECT_EQ(rootOf(id).toString(), addr);
  auto res = onThreads(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ncclResult_t r = initRank(id, rank, 2, 3, &b);
    return r == ncclSuccess ? exercise(*b, 3) : r;
  });
  for (int r = 0; r < 2; r++) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
  EXPECT_TRUE(waitForRoots(5000));
}

TEST(Bootstrap, BadNcclCommId) {
  ScopedEnv commId("NCCL_COMM_ID", "not-an-address");
  ncclUniqueId id;
  bool found = true;
  EXPECT_EQ(bootstrapIdFromEnv(&id, &found), ncclInvalidArgument);
  EXPECT_EQ(ncclGetUniqueId(&id), ncclInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("NCCL_COMM_ID"), std::string::npos);
}

TEST(Bootstrap, NoCommIdMeansNotFound) {
  unsetenv("NCCL_COMM_ID");
  ncclUniqueId id;
  bool found = true;
  EXPECT_EQ(bootstrapIdFromEnv(&id, &found), ncclSuccess);
  EXPECT_FALSE(found);
}
