// The SHM transport leaves nothing in /dev/shm once a connection is set up
// (transport/shm_segment.cc): two processes on the fake GPU connect over SHM
// (NCCL_P2P_DISABLE=1), the child is killed with SIGKILL right after its
// init, and /dev/shm must hold no segment named after either process, then,
// nor after the survivor's abort. Names are "uniccl-<creator pid>-...", so
// the check sees only this test's segments, whatever else runs on the host.
#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/core/comm.h"
#include "common/gpu.h"
#include "fake_gpu.h"
#include "uniccl.h"

namespace uniccl {
namespace {

// The SHM segments a process created that still have a name.
std::vector<std::string> shmNamesOf(pid_t pid) {
  const std::string prefix = "uniccl-" + std::to_string(pid) + "-";
  std::vector<std::string> names;
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    if (std::string(e->d_name).rfind(prefix, 0) == 0) names.push_back(e->d_name);
  }
  closedir(d);
  return names;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += x + " ";
  return s;
}

// Kills the child however the test ends.
struct ChildGuard {
  pid_t pid = -1;
  ~ChildGuard() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

bool named(const std::string& name) { return access(("/dev/shm" + name).c_str(), F_OK) == 0; }

// One segment by hand: the name exists from create() until the peer's
// open(); the mappings share the bytes after that. A segment nobody opened
// loses its name when its creator releases it.
TEST(ShmCleanup, NameLivesUntilThePeerOpensIt) {
  fake::reset();
  fake::setDeviceCount(1);
  std::string name;
  {
    ShmSegment own, peer;
    ASSERT_EQ(own.create(1 << 16), ncclSuccess);
    name = own.name();
    EXPECT_TRUE(named(name)) << name;
    ASSERT_EQ(peer.open(name, 1 << 16), ncclSuccess);
    EXPECT_FALSE(named(name)) << name << " is still in /dev/shm after the peer opened it";
    static_cast<char*>(own.host())[4096] = 42;
    EXPECT_EQ(static_cast<char*>(peer.host())[4096], 42);
    ShmSegment late;
    EXPECT_NE(late.open(name, 1 << 16), ncclSuccess);   // nobody else finds it by name
  }
  {
    ShmSegment unopened;
    ASSERT_EQ(unopened.create(4096), ncclSuccess);
    name = unopened.name();
    EXPECT_TRUE(named(name));
  }
  EXPECT_FALSE(named(name)) << name << " outlived its creator's release";
  fake::reset();
}

TEST(ShmCleanup, KilledPeerLeavesNothingInDevShm) {
  setenv("NCCL_P2P_DISABLE", "1", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("UNICCL_BOOTSTRAP_TIMEOUT", "30", 1);
  fake::reset();
  fake::setDeviceCount(2);
  fake::setAutoComplete(true);
  // The child is forked before ncclGetUniqueId starts the bootstrap root's
  // thread: a child forked from a multi-threaded process may inherit a lock
  // (the sanitizers' allocator's) that a thread of the parent held, and hang.
  // It reads the id from a pipe instead.
  int idPipe[2], ready[2];
  ASSERT_EQ(pipe(idPipe), 0);
  ASSERT_EQ(pipe(ready), 0);
  ChildGuard child;
  child.pid = fork();
  ASSERT_GE(child.pid, 0);
  if (child.pid == 0) {
    close(idPipe[1]);
    close(ready[0]);
    ncclUniqueId childId;
    if (read(idPipe[0], &childId, sizeof(childId)) != (ssize_t)sizeof(childId)) _exit(1);
    ncclComm_t comm = nullptr;
    char ok = gpu::setDevice(1) == ncclSuccess && ncclCommInitRank(&comm, 2, childId, 1) == ncclSuccess &&
                      comm->transports.kind(0) == TransportKind::Shm
                  ? 1
                  : 0;
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    for (;;) pause();   // set up; the parent kills this process
  }
  close(idPipe[0]);
  close(ready[1]);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(write(idPipe[1], &id, sizeof(id)), (ssize_t)sizeof(id));
  close(idPipe[1]);
  ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, 2, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(comm->transports.kind(1), TransportKind::Shm);
  pollfd p = {ready[0], POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 30000), 1) << "the child did not finish its init";
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  ASSERT_EQ(ok, 1) << "the child's init failed or did not use SHM";

  // Both sides connected: each opened the other's segment and removed its name.
  EXPECT_TRUE(shmNamesOf(getpid()).empty()) << join(shmNamesOf(getpid()));
  EXPECT_TRUE(shmNamesOf(child.pid).empty()) << join(shmNamesOf(child.pid));

  const pid_t dead = child.pid;
  kill(dead, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(dead, &status, 0), dead);
  child.pid = -1;
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_TRUE(shmNamesOf(dead).empty()) << "left by the killed rank: " << join(shmNamesOf(dead));

  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  EXPECT_TRUE(shmNamesOf(getpid()).empty()) << join(shmNamesOf(getpid()));
  unsetenv("NCCL_P2P_DISABLE");
  fake::reset();
}

}  // namespace
}  // namespace uniccl
