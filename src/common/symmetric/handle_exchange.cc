#include "common/symmetric/handle_exchange.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "common/bootstrap/wire.h"
#include "common/check.h"
#include "common/core/comm.h"
#include "common/util/debug.h"
#include "common/util/fd_passing.h"

namespace uniccl {

namespace {

// The listener a rank receives its peers' descriptors on, for one
// registration (seq: how many registrations this comm has run, the same on
// every rank since registration is collective).
std::string listenerName(const ncclComm* comm, int rank, uint64_t seq) {
  char name[96];
  snprintf(name, sizeof(name), "uniccl-win-%016" PRIx64 "-%d-%" PRIu64, comm->commHash, rank, seq);
  return name;
}

struct FdMessage {
  int32_t rank;   // the sender
};

// Sends this rank's allocation to every LSA peer of another process, then
// takes theirs. The sends do not wait for the peer to accept (a connection
// waits in the listener's backlog and the message in the socket), so no
// order between ranks is needed; every wait has the bootstrap's deadline.
ncclResult_t exchangeFds(ncclComm* comm, const std::vector<int>& remote, gpu::MemHandle own, uint64_t seq,
                         const std::vector<int>& lsaIndex, std::vector<gpu::MemHandle>* handles,
                         std::vector<bool>* imported) {
  const Deadline deadline = deadlineAfterMs(bootstrap::timeoutMs());
  FdSocket listener;
  UCHECK(listener.listen(listenerName(comm, comm->rank, seq)));
  int exported = -1;
  UCHECK(gpu::memExportFd(own, &exported));
  UniqueFd mine(exported);
  const FdMessage hello{comm->rank};
  for (int r : remote) {
    FdSocket s;
    UCHECK(s.connect(listenerName(comm, r, seq), deadline, &comm->hostAbort));
    const int fd = mine.get();
    UCHECK(sendFds(s, &fd, 1, &hello, sizeof(hello), deadline, &comm->hostAbort));
  }
  for (size_t i = 0; i < remote.size(); i++) {
    FdSocket s;
    UCHECK(listener.accept(&s, deadline, &comm->hostAbort));
    UniqueFd fd;
    FdMessage from{};
    UCHECK(recvFds(s, &fd, 1, &from, sizeof(from), deadline, &comm->hostAbort));
    const int r = from.rank;
    if (r < 0 || r >= comm->nRanks || lsaIndex[r] < 0 || (*imported)[lsaIndex[r]] ||
        comm->peers[r].processHash == comm->peers[comm->rank].processHash) {
      WARN("ncclCommWindowRegister: rank %d: an allocation came from rank %d, which is not an LSA peer of another "
           "process still owed one", comm->rank, r);
      return ncclRemoteError;
    }
    gpu::MemHandle h = 0;
    UCHECK(gpu::memImportFd(fd.get(), &h));
    (*handles)[lsaIndex[r]] = h;
    (*imported)[lsaIndex[r]] = true;
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t announce(ncclComm* comm, const WindowAnnounce* mine, std::vector<WindowAnnounce>* all) {
  all->assign(comm->nRanks, WindowAnnounce{});
  (*all)[comm->rank] = *mine;
  return comm->bootstrap->allGather(all->data(), sizeof(WindowAnnounce));
}

ncclResult_t peerHandles(ncclComm* comm, const LsaPlace& lsa, const std::vector<WindowAnnounce>& all, uint64_t seq,
                         std::vector<gpu::MemHandle>* handles, std::vector<bool>* imported) {
  const int first = comm->rank - lsa.self;
  handles->assign(lsa.size, 0);
  imported->assign(lsa.size, false);
  const uint64_t myProcess = comm->peers[comm->rank].processHash;
  std::vector<int> remote;               // LSA peers in other processes
  std::vector<int> lsaIndex(comm->nRanks, -1);
  for (int p = 0; p < lsa.size; p++) {
    const int r = first + p;
    lsaIndex[r] = p;
    if (comm->peers[r].processHash == myProcess) {
      (*handles)[p] = all[r].handle;   // one process: the handle works as it is
      continue;
    }
    if (!all[r].fdExport || !all[comm->rank].fdExport) {
      WARN("ncclCommWindowRegister: rank %d: LSA peer %d is in another process, and %s GPU cannot export its "
           "memory as a file descriptor", comm->rank, r, all[r].fdExport ? "this rank's" : "that rank's");
      return ncclInvalidUsage;
    }
    remote.push_back(r);
  }
  if (remote.empty()) return ncclSuccess;
  ncclResult_t res = exchangeFds(comm, remote, all[comm->rank].handle, seq, lsaIndex, handles, imported);
  if (res != ncclSuccess) {
    for (int p = 0; p < lsa.size; p++)
      if ((*imported)[p]) gpu::memRelease((*handles)[p]);
    imported->assign(lsa.size, false);
  }
  return res;
}

}  // namespace uniccl
