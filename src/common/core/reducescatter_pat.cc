#include "common/core/reducescatter_pat.h"

#include <algorithm>

#include "common/core/redop.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

// Where one rank's partial sums are, by relative offset, at a round's start.
struct Holdings {
  int n;
  int rank;
  size_t block;
  const char* send;
  char* recv;
  char* scratch;
  int reduced;   // offsets [0, reduced) hold partial sums; the others are still the rank's input

  // Where offset j is read from.
  const char* current(int j) const {
    if (j < reduced) return j == 0 ? recv : scratch + (size_t)(j - 1) * block;
    return send + (size_t)((rank + j) % n) * block;
  }
  // Where offset j's partial sum is written.
  char* target(int j) const { return j == 0 ? recv : scratch + (size_t)(j - 1) * block; }
};

// The messages of a round of distance d (c blocks, k = 0..c-1 in the
// receiver's offsets) to rank `receiver`: their bounds in *cut (the
// first 0, the last c; returns the number of messages). Cut where the
// receiver's target or source changes place (offset 1; offset `reduced`),
// where the sender's source does (its offset d+k reaches `reduced`), and
// after the buffers' last block. The sender computes the same cuts.
int messageCuts(int n, int d, int c, int reduced, int receiver, int cut[6]) {
  int m = 0;
  cut[m++] = 0;
  for (int k : {1, reduced, reduced - d, (n - receiver) % n})
    if (k > 0 && k < c) cut[m++] = k;
  cut[m++] = c;
  std::sort(cut, cut + m);
  return (int)(std::unique(cut, cut + m) - cut) - 1;
}

}  // namespace

ncclResult_t patReduceScatterWorks(int rank, int nRanks, const dev::Work& empty, const Task& t, void* scratch,
                                   std::vector<dev::Work>* out, std::vector<LaunchStart>* launchStarts) {
  const int n = nRanks, me = rank;
  if (!patReducesWith(t.redOp)) {
    WARN("Internal error: a PAT ReduceScatter with op %d (rank %d)", (int)t.redOp, me);
    return ncclInternalError;
  }
  Holdings h{n, me, t.count * dataTypeSize(t.dtype), static_cast<const char*>(t.sendbuff),
             static_cast<char*>(t.recvbuff), static_cast<char*>(scratch), 0};
  for (int d = patFirstDistance(n); d >= 1; d /= 2) {
    launchStarts->push_back(LaunchStart{(uint32_t)out->size(), (int)t.dtype});
    const int c = std::min(d, n - d);
    const int to = (me + d) % n, from = (me - d + n) % n;
    int sendCut[6], recvCut[6];
    const int nSends = messageCuts(n, d, c, h.reduced, to, sendCut);
    const int nRecvs = messageCuts(n, d, c, h.reduced, me, recvCut);
    for (int j = 0; j < std::max(nSends, nRecvs); j++) {
      dev::Work w = empty;
      if (j < nSends) {
        w.p.sendPeer = to;
        w.p.sendBuff = h.current(d + sendCut[j]);
        w.p.sendBytes = (size_t)(sendCut[j + 1] - sendCut[j]) * h.block;
        w.p.sendProto = dev::kProtoSimple;   // the receiver reduces on Simple only
      }
      if (j < nRecvs) {
        const int k = recvCut[j];
        const uintptr_t src = reinterpret_cast<uintptr_t>(h.current(k));
        if (src >= dev::kP2pViewLimit) {
          WARN("Rank %d: ReduceScatter buffer %p lies above the 48-bit addresses a work item carries",
               me, reinterpret_cast<const void*>(src));
          return ncclInternalError;
        }
        w.p.recvPeer = from;
        w.p.recvBuff = h.target(k);
        w.p.recvBytes = (size_t)(recvCut[j + 1] - k) * h.block;
        w.p.recvProto = dev::p2pReduceRecvProto(t.redOp);
        w.recvViewLo = (uint32_t)src;
        w.p.recvViewHi = (uint16_t)(src >> 32);
      }
      out->push_back(w);
    }
    h.reduced = std::max(h.reduced, c);
  }
  return ncclSuccess;
}

}  // namespace uniccl
