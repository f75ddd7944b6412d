#include "common/device_api/lsa.h"

#include <numeric>

#include "common/core/comm.h"
#include "common/util/knobs.h"

namespace uniccl {

int lsaTeamSize(int nRanks, int sizeHint, const std::function<bool(int, int)>& canLoadStore) {
  if (nRanks <= 1) return 1;
  int size = sizeHint > 0 ? sizeHint : 0;   // gcd(0, x) = x
  int runStart = 0;
  for (int r = 1; r <= nRanks; r++) {
    bool joins = r < nRanks;
    for (int s = runStart; joins && s < r; s++) joins = canLoadStore(s, r);
    if (joins) continue;
    size = std::gcd(size, r - runStart);
    runStart = r;
  }
  return size;   // divides every run, so nRanks (the runs add up to it)
}

LsaPlace lsaPlace(const ncclComm* comm) {
  // Fixed once known: windows and device communicators made at different
  // times must agree on the team, whatever NCCL_LSA_TEAM_SIZE says later.
  int size = comm->lsaSizeCache.load(std::memory_order_acquire);
  if (size == 0) {
    if (!comm->transports.reachKnown()) return LsaPlace{1, 0};   // nobody reachable yet: not cached
    int hint = (int)knobInt(Knob::NCCL_LSA_TEAM_SIZE);
    size = lsaTeamSize(comm->nRanks, hint, [comm](int a, int b) { return comm->transports.p2pReachable(a, b); });
    comm->lsaSizeCache.store(size, std::memory_order_release);
  }
  LsaPlace place;
  place.size = size;
  place.self = comm->rank % place.size;
  return place;
}

}  // namespace uniccl
