#include "common/symmetric/handle_exchange.h"

#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include "common/bootstrap/bootstrap.h"
#include "common/bootstrap/wire.h"
#include "common/check.h"
#include "common/util/debug.h"
#include "common/util/fd_auth.h"
#include "common/util/fd_passing.h"

namespace uniccl {

namespace {

constexpr const char* kAuthContext = "window-exchange";
constexpr int kPollSliceMs = 50;   // how often the receiving thread looks at its stop and abort flags

// The listener a rank receives its peers' descriptors on, for one
// registration (seq: how many registrations this comm has run, the same on
// every rank since registration is collective). Derived from the secret:
// another process can neither guess it nor bind it first.
std::string listenerName(const WindowComm& comm, int rank, uint64_t seq) {
  char label[96];
  snprintf(label, sizeof(label), "window %016" PRIx64 " %d %" PRIu64, comm.commHash, rank, seq);
  return secretSocketName(comm.bootstrap->secret(), "win", label);
}

struct FdMessage {
  int32_t rank;   // the sender
};

// Takes one descriptor from every rank of `remote`, each on a connection
// that proved the communicator's secret, all connections served at once (a
// connection that stalls or fails the proof delays no peer).
[[nodiscard]] ncclResult_t receiveFds(const WindowComm& comm, const FdSocket& listener, size_t expected,
                                      Deadline deadline, const std::atomic<uint32_t>& stop,
                                      const std::vector<int>& lsaIndex, std::vector<gpu::MemHandle>* handles,
                                      std::vector<bool>* imported) {
  try {
    FdAuthServer server(&listener, comm.bootstrap->secret(), kAuthContext, expected + 16, bootstrap::timeoutMs(),
                        "ncclCommWindowRegister");
    size_t got = 0;
    ncclResult_t res = ncclSuccess;
    const FdAuthServer::OnReadable take = [&](FdAuthServer::Conn& c) {
      UniqueFd fd;
      FdMessage from{};
      if (recvFds(c.sock, &fd, 1, &from, sizeof(from), Clock::now()) != ncclSuccess) return false;
      const int r = from.rank;
      if (r < 0 || r >= comm.nRanks || lsaIndex[r] < 0 || (*imported)[lsaIndex[r]] ||
          comm.processHash[r] == comm.processHash[comm.rank]) {
        WARN("ncclCommWindowRegister: rank %d: an allocation came from rank %d, which is not an LSA peer of another "
             "process still owed one", comm.rank, r);
        res = ncclRemoteError;
        return false;
      }
      gpu::MemHandle h = 0;
      res = gpu::memImportFd(fd.get(), &h);
      if (res != ncclSuccess) return false;
      (*handles)[lsaIndex[r]] = h;
      (*imported)[lsaIndex[r]] = true;
      got++;
      return false;
    };
    while (got < expected && res == ncclSuccess) {
      if (stop.load() != 0 || (comm.hostAbort != nullptr && comm.hostAbort->load() != 0)) return ncclInternalError;
      if (Clock::now() >= deadline) {
        WARN("ncclCommWindowRegister: rank %d: %zu of %zu peers' allocations came within the bootstrap timeout "
             "(UNICCL_BOOTSTRAP_TIMEOUT)", comm.rank, got, expected);
        return ncclRemoteError;
      }
      server.step(kPollSliceMs, take);
    }
    return res;
  } catch (const std::exception& e) {
    WARN("ncclCommWindowRegister: rank %d: receiving peers' allocations failed: %s", comm.rank, e.what());
    return ncclSystemError;
  }
}

// Sends this rank's allocation to every LSA peer of another process while a
// thread takes theirs: each send waits for the peer's listener to check the
// secret, so no order between ranks is needed; every wait has the
// bootstrap's deadline.
[[nodiscard]] ncclResult_t exchangeFds(const WindowComm& comm, const std::vector<int>& remote, gpu::MemHandle own,
                                       uint64_t seq, const std::vector<int>& lsaIndex,
                                       std::vector<gpu::MemHandle>* handles, std::vector<bool>* imported) {
  const Deadline deadline = deadlineAfterMs(bootstrap::timeoutMs());
  FdSocket listener;
  if (listener.listen(listenerName(comm, comm.rank, seq)) != ncclSuccess) {
    WARN("ncclCommWindowRegister: rank %d cannot listen for its peers' allocations: this registration fails",
         comm.rank);
    return ncclSystemError;
  }
  int exported = -1;
  UCHECK(gpu::memExportFd(own, &exported));
  UniqueFd mine(exported);
  std::atomic<uint32_t> stop{0};
  ncclResult_t received = ncclInternalError;
  std::thread receiver;
  try {
    receiver = std::thread([&] {
      received = receiveFds(comm, listener, remote.size(), deadline, stop, lsaIndex, handles, imported);
    });
  } catch (const std::exception& e) {
    WARN("ncclCommWindowRegister: rank %d: cannot start a thread: %s", comm.rank, e.what());
    return ncclSystemError;
  }
  ncclResult_t res = ncclSuccess;
  const FdMessage hello{comm.rank};
  for (int r : remote) {
    FdSocket s;
    const int fd = mine.get();
    res = s.connect(listenerName(comm, r, seq), deadline, comm.hostAbort);
    if (res == ncclSuccess)
      res = authenticateFdConnector(s, comm.bootstrap->secret(), kAuthContext, deadline, comm.hostAbort,
                                    "ncclCommWindowRegister");
    if (res == ncclSuccess) res = sendFds(s, &fd, 1, &hello, sizeof(hello), deadline, comm.hostAbort);
    if (res != ncclSuccess) break;
  }
  if (res != ncclSuccess) stop.store(1);
  receiver.join();
  return res != ncclSuccess ? res : received;
}

}  // namespace

ncclResult_t announce(const WindowComm& comm, const WindowAnnounce* mine, std::vector<WindowAnnounce>* all) {
  all->assign(comm.nRanks, WindowAnnounce{});
  (*all)[comm.rank] = *mine;
  return comm.bootstrap->allGather(all->data(), sizeof(WindowAnnounce));
}

ncclResult_t peerHandles(const WindowComm& comm, const std::vector<WindowAnnounce>& all, uint64_t seq,
                         std::vector<gpu::MemHandle>* handles, std::vector<bool>* imported) {
  const LsaPlace& lsa = comm.lsa;
  const int first = comm.rank - lsa.self;
  handles->assign(lsa.size, 0);
  imported->assign(lsa.size, false);
  const uint64_t myProcess = comm.processHash[comm.rank];
  std::vector<int> remote;               // LSA peers in other processes
  std::vector<int> lsaIndex(comm.nRanks, -1);
  for (int p = 0; p < lsa.size; p++) {
    const int r = first + p;
    lsaIndex[r] = p;
    if (comm.processHash[r] == myProcess) {
      (*handles)[p] = all[r].handle;   // one process: the handle works as it is
      continue;
    }
    if (!all[r].fdExport || !all[comm.rank].fdExport) {
      WARN("ncclCommWindowRegister: rank %d: LSA peer %d is in another process, and %s GPU cannot export its "
           "memory as a file descriptor", comm.rank, r, all[r].fdExport ? "this rank's" : "that rank's");
      return ncclInvalidUsage;
    }
    remote.push_back(r);
  }
  if (remote.empty()) return ncclSuccess;
  ncclResult_t res = exchangeFds(comm, remote, all[comm.rank].handle, seq, lsaIndex, handles, imported);
  if (res != ncclSuccess) {
    for (int p = 0; p < lsa.size; p++)
      if ((*imported)[p]) (void)gpu::memRelease((*handles)[p]);   // res is the failure to report
    imported->assign(lsa.size, false);
  }
  return res;
}

}  // namespace uniccl
