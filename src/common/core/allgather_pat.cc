#include "common/core/allgather_pat.h"

#include <algorithm>
#include <cstring>

#include "common/core/comm.h"
#include "common/core/direct_recv.h"
#include "common/core/planner.h"
#include "common/core/redop.h"
#include "common/core/tuning.h"

namespace uniccl {

namespace {

// Blocks [first, first + count) of n in buffer order: one range, or two
// where it wraps past block n-1.
struct Range {
  int first;
  int count;
};
int splitWrapped(int first, int count, int n, Range out[2]) {
  const int head = std::min(count, n - first);
  out[0] = Range{first, head};
  if (head == count) return 1;
  out[1] = Range{0, count - head};
  return 2;
}


}  // namespace

void patAllGatherWorks(ncclComm* comm, const Task& t, std::vector<dev::Work>* out,
                       std::vector<LaunchStart>* launchStarts) {
  const int n = comm->nRanks, me = comm->rank;
  const size_t block = t.count * dataTypeSize(t.dtype);
  char* recv = static_cast<char*>(t.recvbuff);
  const char* own = static_cast<const char*>(t.sendbuff);
  launchStarts->push_back(LaunchStart{(uint32_t)out->size()});
  if (own != recv + (size_t)me * block) {
    // Out of place: the own block into place, beside round 0 (which reads
    // the send buffer, not this copy's destination).
    dev::Work w = emptyP2pWork(comm, p2pSliceBytes(comm));
    w.p.sendPeer = me;
    w.p.recvPeer = me;
    w.p.sendBuff = own;
    w.p.recvBuff = recv + (size_t)me * block;
    w.p.sendBytes = w.p.recvBytes = block;
    w.p.sendProto = w.p.recvProto = dev::kProtoSimple;
    out->push_back(w);
  }
  for (int d = 1; d < n; d *= 2) {
    if (d > 1) launchStarts->push_back(LaunchStart{(uint32_t)out->size()});
    const int blocks = std::min(d, n - d);
    const int to = (me - d + n) % n, from = (me + d) % n;
    Range sends[2], recvs[2];
    const int nSends = splitWrapped(me, blocks, n, sends);
    const int nRecvs = splitWrapped(from, blocks, n, recvs);
    for (int j = 0; j < std::max(nSends, nRecvs); j++) {
      dev::Work w = emptyP2pWork(comm, p2pSliceBytes(comm));
      if (j < nSends) {
        w.p.sendPeer = to;
        // Round 0 sends the own block (the only one held) from the send buffer.
        w.p.sendBuff = d == 1 ? own : recv + (size_t)sends[j].first * block;
        w.p.sendBytes = (size_t)sends[j].count * block;
        w.p.sendProto = p2pProto(comm, to, w.p.sendBytes);
      }
      if (j < nRecvs) {
        w.p.recvPeer = from;
        w.p.recvBuff = recv + (size_t)recvs[j].first * block;
        w.p.recvBytes = (size_t)recvs[j].count * block;
        w.p.recvProto = p2pProto(comm, from, w.p.recvBytes);
        // A registered receive buffer the sender can store into is offered
        // to it, as for any message (core/direct_recv.h).
        if (dev::p2pExchanges(w.p.recvProto, w.p.recvBytes, comm->devCommHost.p2pDirectMinBytes)) {
          const uintptr_t view = directRecvTarget(comm, from, w.p.recvBuff, w.p.recvBytes);
          if (view != 0 && view < dev::kP2pViewLimit) {
            w.recvViewLo = (uint32_t)view;
            w.p.recvViewHi = (uint16_t)(view >> 32);
            comm->direct.p2pPlanned++;
          }
        }
      }
      out->push_back(w);
    }
  }
}

}  // namespace uniccl
