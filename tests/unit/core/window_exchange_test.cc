// ncclCommWindowRegister's exchange of allocations between processes
// (symmetric/handle_exchange.h: peerHandles) on the fake GPU, whose VMM
// allocations are memfds that really cross a fork: two processes, each a
// rank with a real bootstrap (the communicator's secret) and hand-built peer
// info saying "another process of this host". A squatter holding the names
// of the predictable pattern "uniccl-win-<commHash>-<rank>-<seq>" before
// the exchange starts changes nothing: each rank gets a handle to the
// other's allocation and reads its bytes through it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "common/bootstrap/bootstrap.h"
#include "common/gpu.h"
#include "common/symmetric/handle_exchange.h"
#include "common/util/fd_passing.h"
#include "fake_gpu.h"

namespace uniccl {
namespace {

constexpr uint64_t kHash = 0x5eed5eed12345678ull;
constexpr size_t kBytes = size_t(64) << 10;   // one fake VMM granule

// Maps `h` somewhere and returns its first byte (0xff on failure).
int firstByte(gpu::MemHandle h, int dev) {
  void* va = nullptr;
  if (gpu::addressReserve(&va, kBytes, 0) != ncclSuccess) return 0xff;
  int v = 0xff;
  if (gpu::memMap(va, kBytes, h, dev) == ncclSuccess) {
    v = static_cast<unsigned char*>(va)[0];   // the fake's device memory is host memory
    (void)gpu::memUnmap(va, kBytes);
  }
  (void)gpu::addressFree(va, kBytes);
  return v;
}

// One rank's side: 0 when it received the peer's allocation and read the
// peer's mark (rank + 1) through it; else a number saying what failed.
int exchangeAsRank(const ncclUniqueId& id, int rank, uint64_t seq) {
  if (gpu::setDevice(rank) != ncclSuccess) return 1;
  const int info = rank;
  std::unique_ptr<Bootstrap> bootstrap;
  if (Bootstrap::init(id, rank, 2, &info, sizeof(info), &bootstrap) != ncclSuccess) return 2;
  WindowComm comm;   // one LSA team of two ranks in two processes
  comm.rank = rank;
  comm.nRanks = 2;
  comm.gpuDev = rank;
  comm.commHash = kHash;
  comm.bootstrap = bootstrap.get();
  comm.processHash = {100, 101};
  comm.lsa = LsaPlace{2, rank};
  gpu::MemHandle own = 0;
  if (gpu::memCreate(&own, kBytes, rank) != ncclSuccess) return 3;
  void* va = nullptr;
  if (gpu::addressReserve(&va, kBytes, 0) != ncclSuccess || gpu::memMap(va, kBytes, own, rank) != ncclSuccess)
    return 4;
  std::memset(va, rank + 1, kBytes);
  std::vector<WindowAnnounce> all(2);
  for (WindowAnnounce& a : all) a.fdExport = 1;
  all[rank].handle = own;
  std::vector<gpu::MemHandle> handles;
  std::vector<bool> imported;
  const ncclResult_t res = peerHandles(comm, all, seq, &handles, &imported);
  int code = 0;
  if (res != ncclSuccess) {
    fprintf(stderr, "rank %d: peerHandles: %s\n", rank, ncclGetLastError(nullptr));
    code = 5;
  } else if (!imported[1 - rank]) {
    code = 6;
  } else if (firstByte(handles[1 - rank], rank) != (1 - rank) + 1) {
    code = 7;
  }
  if (res == ncclSuccess && imported[1 - rank]) (void)gpu::memRelease(handles[1 - rank]);
  if (bootstrap->barrier() != ncclSuccess && code == 0) code = 8;   // the peer has read ours before it goes
  (void)gpu::memUnmap(va, kBytes);
  (void)gpu::addressFree(va, kBytes);
  (void)gpu::memRelease(own);
  return code;
}

TEST(WindowExchange, SquatterOnPredictableNamesChangesNothing) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("UNICCL_BOOTSTRAP_TIMEOUT", "20", 1);
  fake::reset();
  fake::setDeviceCount(2);
  fake::setVmm(true, true);
  std::vector<FdSocket> squatters(4);
  for (int rank = 0; rank < 2; rank++)
    for (int seq = 0; seq < 2; seq++) {
      char name[96];
      snprintf(name, sizeof(name), "uniccl-win-%016" PRIx64 "-%d-%d", kHash, rank, seq);
      ASSERT_EQ(squatters[rank * 2 + seq].listen(name), ncclSuccess);
    }
  // Both rank-1 processes are forked before this process starts any thread
  // (the bootstrap root is one): a child forked from a multi-threaded parent
  // may inherit a lock another thread held (a sanitizer's allocator lock,
  // for one) and hang in its first allocation. Each child reads its round's
  // id from a pipe.
  constexpr int kRounds = 2;
  pid_t pids[kRounds];
  int idPipes[kRounds][2];
  for (int seq = 0; seq < kRounds; seq++) {
    ASSERT_EQ(pipe(idPipes[seq]), 0);
    pids[seq] = fork();
    ASSERT_GE(pids[seq], 0);
    if (pids[seq] == 0) {
      for (int k = 0; k <= seq; k++) close(idPipes[k][1]);   // EOF, not a hang, if the parent fails
      ncclUniqueId id;
      size_t have = 0;
      while (have < sizeof(id)) {
        const ssize_t n = read(idPipes[seq][0], reinterpret_cast<char*>(&id) + have, sizeof(id) - have);
        if (n <= 0) _exit(10);
        have += (size_t)n;
      }
      _exit(exchangeAsRank(id, 1, (uint64_t)seq));
    }
    close(idPipes[seq][0]);
  }
  for (int seq = 0; seq < kRounds; seq++) {
    ncclUniqueId id;   // a fresh bootstrap root for each round
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ASSERT_EQ(write(idPipes[seq][1], &id, sizeof(id)), (ssize_t)sizeof(id));
    close(idPipes[seq][1]);
    EXPECT_EQ(exchangeAsRank(id, 0, (uint64_t)seq), 0) << "registration " << seq;
    int status = 0;
    ASSERT_EQ(waitpid(pids[seq], &status, 0), pids[seq]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank 1, registration " << seq << ": " << status;
  }
  fake::reset();
}

}  // namespace
}  // namespace uniccl
