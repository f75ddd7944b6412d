// The liveness links and their monitor (src/common/liveness/peer_liveness.h)
// without a GPU: ranks linked through a real Bootstrap on loopback, as
// threads of this process or as forked processes. A rank killed with -9, a
// rank that aborts and a rank that stops answering (SIGSTOP) must be
// reported to every other rank, also to those that are not its neighbours;
// ranks that stop in order must not be; a forked child of a rank must not
// keep that rank's links open after it died; fds and threads come back.
//
// Bounds: a killed or aborting rank is reported within a few milliseconds
// on an idle machine; the tests allow 10 s (the point is "not the watchdog's
// 600 s", and the 2-core CI machine may be busy). A silent rank is reported
// after the peer timeout (1 s here), allowed the same 10 s.
#include <gtest/gtest.h>
#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/bootstrap/root.h"
#include "common/bootstrap/bootstrap.h"
#include "common/liveness/peer_liveness.h"
#include "nccl.h"

using namespace uniccl;

namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr double kReportBoundSec = 10.0;

long long nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch()).count();
}

int countEntries(const char* dir) {
  int n = 0;
  DIR* d = opendir(dir);
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}
int countFds() { return countEntries("/proc/self/fd") - 1; }   // minus the directory's own fd
int countThreads() { return countEntries("/proc/self/task"); }

// Records what the monitor reports.
class RecordingSink : public PeerLossSink {
 public:
  void peerLost(int rank, const std::string& text, bool first, bool) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (first) firstNs_ = nowNs();
    ranks_.push_back(rank);
    texts_.push_back(text);
    firsts_ += first;
  }
  std::vector<int> ranks() {
    std::lock_guard<std::mutex> lock(mu_);
    return ranks_;
  }
  std::string text(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return i < texts_.size() ? texts_[i] : std::string();
  }
  long long firstNs() {
    std::lock_guard<std::mutex> lock(mu_);
    return firstNs_;
  }
  int firsts() {
    std::lock_guard<std::mutex> lock(mu_);
    return firsts_;
  }
  // Waits (bounded) until `n` losses were reported.
  bool waitFor(size_t n, double sec) {
    const SteadyClock::time_point end =
        SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(sec));
    while (SteadyClock::now() < end) {
      if (ranks().size() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return ranks().size() >= n;
  }

 private:
  std::mutex mu_;
  std::vector<int> ranks_;
  std::vector<std::string> texts_;
  long long firstNs_ = 0;
  int firsts_ = 0;
};

// One rank: its links (the listener's address is its bootstrap peer info),
// its bootstrap and its sink.
struct Rank {
  RecordingSink sink;
  std::unique_ptr<PeerLiveness> live;
  std::unique_ptr<Bootstrap> boot;
};

ncclResult_t setUp(const ncclUniqueId& id, int rank, int nranks, int64_t timeoutMs, Rank* r) {
  ncclResult_t res = PeerLiveness::create(&r->live);
  if (res != ncclSuccess) return res;
  SocketAddress mine = r->live->address();
  res = Bootstrap::init(id, rank, nranks, &mine, sizeof(mine), &r->boot);
  if (res != ncclSuccess) return res;
  SocketAddress next;
  memcpy(&next, r->boot->peerInfo((rank + 1) % nranks), sizeof(next));
  res = r->live->link(rank, nranks, next, r->boot->secret(), deadlineAfterMs(30000), nullptr);
  if (res != ncclSuccess) return res;
  std::vector<std::string> names;
  for (int q = 0; q < nranks; q++) names.push_back("rank " + std::to_string(q) + " (test)");
  return r->live->start(&r->sink, timeoutMs, names);
}

ncclUniqueId newId() {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  return id;
}

// ---- ranks as threads of this process

TEST(Liveness, OrderlyStopIsNotALossAndReleasesEverything) {
  std::thread([] {}).join();   // a sanitizer's own helper thread starts with the first thread
  const int fds0 = countFds(), threads0 = countThreads();
  for (int nranks : {2, 3}) {
    ncclUniqueId id = newId();
    std::vector<Rank> ranks(nranks);
    std::vector<ncclResult_t> res(nranks, ncclInternalError);
    {
      std::vector<std::thread> ts;
      for (int r = 0; r < nranks; r++) ts.emplace_back([&, r] { res[r] = setUp(id, r, nranks, 1000, &ranks[r]); });
      for (auto& t : ts) t.join();
    }
    for (int r = 0; r < nranks; r++) ASSERT_EQ(res[r], ncclSuccess) << "rank " << r;
    EXPECT_EQ(livenessStatsForTesting().sets, (size_t)nranks);
    EXPECT_TRUE(livenessStatsForTesting().threadRunning);
    // Longer than the 1 s peer timeout: heartbeats keep the quiet links alive.
    std::this_thread::sleep_for(std::chrono::milliseconds(1600));
    // One rank after the other, with time for the others to misread it.
    for (int r = 0; r < nranks; r++) {
      ranks[r].live->stop(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
    }
    for (int r = 0; r < nranks; r++) EXPECT_TRUE(ranks[r].sink.ranks().empty()) << "rank " << r << ": " << ranks[r].sink.text(0);
  }
  EXPECT_EQ(livenessStatsForTesting().sets, 0u);
  EXPECT_FALSE(livenessStatsForTesting().threadRunning);
  // The root threads of the ids end when their rendezvous did.
  for (int i = 0; i < 100 && countThreads() > threads0; i++) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(countFds(), fds0);
  EXPECT_LE(countThreads(), threads0);
}

TEST(Liveness, AbortIsReportedToEveryRank) {
  const int nranks = 4;
  ncclUniqueId id = newId();
  std::vector<Rank> ranks(nranks);
  std::vector<ncclResult_t> res(nranks, ncclInternalError);
  {
    std::vector<std::thread> ts;
    for (int r = 0; r < nranks; r++) ts.emplace_back([&, r] { res[r] = setUp(id, r, nranks, 0, &ranks[r]); });
    for (auto& t : ts) t.join();
  }
  for (int r = 0; r < nranks; r++) ASSERT_EQ(res[r], ncclSuccess) << "rank " << r;
  const long long t0 = nowNs();
  ranks[2].live->stop(false);
  for (int r = 0; r < nranks; r++) {
    if (r == 2) continue;
    ASSERT_TRUE(ranks[r].sink.waitFor(1, kReportBoundSec)) << "rank " << r << " heard nothing";
    EXPECT_EQ(ranks[r].sink.ranks()[0], 2);
    EXPECT_NE(ranks[r].sink.text(0).find("rank 2 (test) aborted"), std::string::npos) << ranks[r].sink.text(0);
    printf("  rank %d heard of rank 2's abort after %.3f ms%s\n", r, (ranks[r].sink.firstNs() - t0) / 1e6,
           r == 0 ? " (through rank 3 or 1)" : "");
  }
  // Rank 0 is no neighbour of rank 2: it heard through a notice.
  EXPECT_NE(ranks[0].sink.text(0).find("reported by rank"), std::string::npos) << ranks[0].sink.text(0);
  for (int r = 0; r < nranks; r++) {
    ranks[r].live->stop(false);
    EXPECT_EQ(ranks[r].sink.firsts(), r == 2 ? 0 : 1) << "rank " << r;
  }
}

// Rank 2 aborts because its transport could not reach rank 0: every other
// rank's first report is rank 0 (unreachable, reported by a neighbour of
// rank 2), not rank 2's abort; rank 0 itself, alive, hears of rank 2's
// abort (nobody tells a rank it is lost).
TEST(Liveness, AbortNamesTheRankItsTransportCouldNotReachFirst) {
  const int nranks = 4;
  ncclUniqueId id = newId();
  std::vector<Rank> ranks(nranks);
  std::vector<ncclResult_t> res(nranks, ncclInternalError);
  {
    std::vector<std::thread> ts;
    for (int r = 0; r < nranks; r++) ts.emplace_back([&, r] { res[r] = setUp(id, r, nranks, 0, &ranks[r]); });
    for (auto& t : ts) t.join();
  }
  for (int r = 0; r < nranks; r++) ASSERT_EQ(res[r], ncclSuccess) << "rank " << r;
  ranks[2].live->stop(false, 0);
  for (int r : {1, 3}) {
    ASSERT_TRUE(ranks[r].sink.waitFor(2, kReportBoundSec)) << "rank " << r << " heard less than two losses";
    EXPECT_EQ(ranks[r].sink.ranks()[0], 0) << ranks[r].sink.text(0);
    EXPECT_NE(ranks[r].sink.text(0).find("rank 0 (test) is unreachable"), std::string::npos) << ranks[r].sink.text(0);
    EXPECT_NE(ranks[r].sink.text(0).find("(reported by rank 2)"), std::string::npos) << ranks[r].sink.text(0);
    EXPECT_EQ(ranks[r].sink.ranks()[1], 2) << ranks[r].sink.text(1);
  }
  ASSERT_TRUE(ranks[0].sink.waitFor(1, kReportBoundSec));
  EXPECT_EQ(ranks[0].sink.ranks()[0], 2) << ranks[0].sink.text(0);
  for (int r = 0; r < nranks; r++) ranks[r].live->stop(false);
}

// ---- ranks as forked processes

// What a rank process tells the parent.
struct ChildReport {
  int ok = 0;
  int lost = -1;              // first rank reported lost
  long long detectNs = 0;     // when (CLOCK_MONOTONIC, shared by the processes)
  char text[256] = {};
};

enum class Victim { Kill, Stop, None };

// Rank r's process: set up, say ready, then wait for the parent's verdict
// ('w': wait for a loss and report it; 'q': stop in order and report
// whether anything was lost). Rank `forker` forks a sleeping child first,
// which holds copies of its fds and must not keep its links alive.
int rankMain(const ncclUniqueId& id, int rank, int nranks, int64_t timeoutMs, int toParent, int fromParent,
             int forker) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  alarm(60);
  Rank r;
  ChildReport rep;
  if (setUp(id, rank, nranks, timeoutMs, &r) != ncclSuccess) {
    // The empty report; a short write leaves the parent a short read, which
    // it takes as this child's failure too.
    const ssize_t written = write(toParent, &rep, sizeof(rep));
    (void)written;
    return 1;
  }
  pid_t sleeper = -1;
  if (rank == forker) {
    sleeper = fork();
    if (sleeper == 0) {
      for (;;) pause();   // killed by the test parent
    }
  }
  char ready = 'R';
  if (write(toParent, &ready, 1) != 1) return 1;
  if (write(toParent, &sleeper, sizeof(sleeper)) != sizeof(sleeper)) return 1;
  char verdict = 0;
  if (read(fromParent, &verdict, 1) != 1) return 1;
  if (verdict == 'w') {
    rep.ok = r.sink.waitFor(1, 20.0);
  } else {
    r.live->stop(true);
    rep.ok = 1;
    char done = 0;   // the parent says when every rank stopped (and exited)
    if (read(fromParent, &done, 1) != 1) return 1;
  }
  if (!r.sink.ranks().empty()) {
    rep.lost = r.sink.ranks()[0];
    rep.detectNs = r.sink.firstNs();
    snprintf(rep.text, sizeof(rep.text), "%s", r.sink.text(0).c_str());
  }
  r.live->stop(true);
  return write(toParent, &rep, sizeof(rep)) == sizeof(rep) ? 0 : 1;
}

struct Procs {
  std::vector<pid_t> pid;
  std::vector<int> from, to;
  pid_t sleeper = -1;
  ~Procs() {
    for (size_t r = 0; r < pid.size(); r++) {
      if (pid[r] > 0) {
        kill(pid[r], SIGKILL);
        waitpid(pid[r], nullptr, 0);
      }
      close(from[r]);
      close(to[r]);
    }
    if (sleeper > 0) kill(sleeper, SIGKILL);
  }
};

bool readFull(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t k = read(fd, c, n);
    if (k <= 0) return false;
    c += k;
    n -= (size_t)k;
  }
  return true;
}

// Starts nranks rank processes and waits until every one is linked.
// The ranks are forked before ncclGetUniqueId starts the bootstrap root's
// thread and read the id from their pipe: a child forked from a
// multi-threaded process may inherit a lock (the sanitizers' allocator's)
// that a thread of the parent held, and hang.
void startRanks(Procs* ps, int nranks, int64_t timeoutMs, int forker) {
  ASSERT_TRUE(waitForRoots(5000)) << "an earlier test's bootstrap root is still running";
  fflush(stdout);
  fflush(stderr);
  ps->pid.assign(nranks, -1);
  ps->from.assign(nranks, -1);
  ps->to.assign(nranks, -1);
  for (int r = 0; r < nranks; r++) {
    int up[2], down[2];
    ASSERT_EQ(pipe(up), 0);
    ASSERT_EQ(pipe(down), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(up[0]);
      close(down[1]);
      ncclUniqueId id;
      if (!readFull(down[0], &id, sizeof(id))) _exit(1);
      _exit(rankMain(id, r, nranks, timeoutMs, up[1], down[0], forker));
    }
    close(up[1]);
    close(down[0]);
    ps->pid[r] = pid;
    ps->from[r] = up[0];
    ps->to[r] = down[1];
  }
  const ncclUniqueId id = newId();
  for (int r = 0; r < nranks; r++) ASSERT_EQ(write(ps->to[r], &id, sizeof(id)), (ssize_t)sizeof(id));
  for (int r = 0; r < nranks; r++) {
    char ready = 0;
    pid_t sleeper = -1;
    ASSERT_TRUE(readFull(ps->from[r], &ready, 1) && ready == 'R') << "rank " << r << " did not link";
    ASSERT_TRUE(readFull(ps->from[r], &sleeper, sizeof(sleeper)));
    if (sleeper > 0) ps->sleeper = sleeper;
  }
}

// Kills (or stops) rank `victim`; every other rank must report it within the bound.
void lossCase(int nranks, int victim, Victim how, int64_t timeoutMs, bool forkSleeper) {
  Procs ps;
  startRanks(&ps, nranks, timeoutMs, forkSleeper ? victim : -1);
  if (::testing::Test::HasFatalFailure()) return;
  for (int r = 0; r < nranks; r++) {
    if (r != victim) {
      ASSERT_EQ(write(ps.to[r], "w", 1), 1);
    }
  }
  if (forkSleeper) {
    ASSERT_GT(ps.sleeper, 0) << "the victim's sleeping child is missing";
  }
  const long long t0 = nowNs();
  ASSERT_EQ(kill(ps.pid[victim], how == Victim::Kill ? SIGKILL : SIGSTOP), 0);
  for (int r = 0; r < nranks; r++) {
    if (r == victim) continue;
    ChildReport rep;
    ASSERT_TRUE(readFull(ps.from[r], &rep, sizeof(rep))) << "rank " << r << " ended without a report";
    const double sec = (rep.detectNs - t0) / 1e9;
    printf("  rank %d: lost rank %d after %.3f s: %s\n", r, rep.lost, rep.lost >= 0 ? sec : -1.0, rep.text);
    EXPECT_TRUE(rep.ok) << "rank " << r << " heard of no loss within 20 s";
    EXPECT_EQ(rep.lost, victim) << "rank " << r;
    EXPECT_LT(sec, kReportBoundSec + (how == Victim::Stop ? timeoutMs / 1e3 : 0)) << "rank " << r;
    if (how == Victim::Stop) {
      EXPECT_NE(strstr(rep.text, "nothing came from it"), nullptr) << rep.text;
    } else {
      EXPECT_NE(strstr(rep.text, "connection closed"), nullptr) << rep.text;
    }
    int status = 0;
    EXPECT_EQ(waitpid(ps.pid[r], &status, 0), ps.pid[r]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << " status " << status;
    ps.pid[r] = -1;
  }
}

TEST(LivenessProcesses, KilledRankIsReportedToEveryRank) {
  // Rank 3 is no neighbour of rank 1: it hears through the notices.
  lossCase(4, 1, Victim::Kill, 30000, false);
}

TEST(LivenessProcesses, KilledRankWithAForkedChildIsStillReported) {
  // The victim's child holds copies of its fds; they must not keep the links open.
  lossCase(3, 1, Victim::Kill, 30000, true);
}

TEST(LivenessProcesses, KilledRankOfTwo) { lossCase(2, 0, Victim::Kill, 30000, false); }

TEST(LivenessProcesses, SilentRankIsReportedAfterThePeerTimeout) {
  lossCase(3, 2, Victim::Stop, 1000, false);
}

TEST(LivenessProcesses, OrderlyStopOfProcessesIsNotALoss) {
  const int nranks = 3;
  Procs ps;
  startRanks(&ps, nranks, 1000, -1);
  if (::testing::Test::HasFatalFailure()) return;
  // Ranks 0 and 1 stop in order and exit; rank 2 stops last, after a while.
  for (int r = 0; r < 2; r++) {
    ASSERT_EQ(write(ps.to[r], "q", 1), 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(write(ps.to[r], "d", 1), 1);
    ChildReport rep;
    ASSERT_TRUE(readFull(ps.from[r], &rep, sizeof(rep)));
    EXPECT_EQ(rep.lost, -1) << "rank " << r << ": " << rep.text;
    int status = 0;
    EXPECT_EQ(waitpid(ps.pid[r], &status, 0), ps.pid[r]);
    ps.pid[r] = -1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));   // beyond the 1 s peer timeout
  ASSERT_EQ(write(ps.to[2], "q", 1), 1);
  ASSERT_EQ(write(ps.to[2], "d", 1), 1);
  ChildReport rep;
  ASSERT_TRUE(readFull(ps.from[2], &rep, sizeof(rep)));
  EXPECT_EQ(rep.lost, -1) << "rank 2: " << rep.text;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);   // the machine's other interfaces may not route
  signal(SIGPIPE, SIG_IGN);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
