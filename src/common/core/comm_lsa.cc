#include "common/core/comm_lsa.h"

#include "common/core/comm.h"
#include "common/util/knobs.h"

namespace uniccl {

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
