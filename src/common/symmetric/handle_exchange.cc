#include "common/symmetric/handle_exchange.h"

#include "common/check.h"
#include "common/core/comm.h"
#include "common/util/debug.h"

namespace uniccl {

ncclResult_t announce(ncclComm* comm, const WindowAnnounce* mine, std::vector<WindowAnnounce>* all) {
  all->assign(comm->nRanks, WindowAnnounce{});
  (*all)[comm->rank] = *mine;
  return comm->bootstrap->allGather(all->data(), sizeof(WindowAnnounce));
}

ncclResult_t peerHandles(ncclComm* comm, const LsaPlace& lsa, const std::vector<WindowAnnounce>& all,
                         std::vector<gpu::MemHandle>* handles, std::vector<bool>* imported) {
  const int first = comm->rank - lsa.self;
  handles->assign(lsa.size, 0);
  imported->assign(lsa.size, false);
  const uint64_t myProcess = comm->peers[comm->rank].processHash;
  for (int p = 0; p < lsa.size; p++) {
    const int r = first + p;
    if (comm->peers[r].processHash == myProcess) {
      (*handles)[p] = all[r].handle;
      continue;
    }
    WARN("ncclCommWindowRegister: rank %d: LSA peer %d is in another process (pid %d); windows across processes "
         "are not supported by this uniccl version yet", comm->rank, r, comm->peers[r].pid);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

}  // namespace uniccl
