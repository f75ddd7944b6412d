// The Device API's teams on the host (include/nccl_device/core.h):
// world, LSA (core/comm_lsa.h) and rail, and translation of team ranks.
#include "common/api_export.h"
#include "common/core/comm.h"
#include "common/core/comm_lsa.h"
#include "common/core/validate.h"
#include "common/util/debug.h"
#include "nccl_device.h"

using namespace uniccl;

namespace {

// These functions return a team, not a result code: a bad comm gets a WARN
// (ncclGetLastError) and the empty team, which no valid call produces.
constexpr ncclTeam_t kNoTeam = {0, 0, 0};

// `rank` is a rank of `team`, a well-formed team this rank belongs to.
bool teamRankValid(ncclTeam_t team, int rank, const char* fn) {
  if (team.nRanks < 1 || team.rank < 0 || team.rank >= team.nRanks || team.stride == 0) {
    WARN("%s: team {nRanks %d, rank %d, stride %d} is not a team of this communicator", fn, team.nRanks, team.rank,
         team.stride);
    return false;
  }
  if (rank < 0 || rank >= team.nRanks) {
    WARN("%s: rank %d is out of range (the team has %d ranks)", fn, rank, team.nRanks);
    return false;
  }
  return true;
}

}  // namespace

NCCL_API(ncclTeam_t, ncclTeamWorld, ncclComm_t comm);
ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
  if (checkCommUsable(comm, "ncclTeamWorld") != ncclSuccess) return kNoTeam;
  return ncclTeam_t{comm->nRanks, comm->rank, 1};
}

NCCL_API(ncclTeam_t, ncclTeamLsa, ncclComm_t comm);
ncclTeam_t ncclTeamLsa(ncclComm_t comm) {
  if (checkCommUsable(comm, "ncclTeamLsa") != ncclSuccess) return kNoTeam;
  LsaPlace lsa = lsaPlace(comm);
  return ncclTeam_t{lsa.size, lsa.self, 1};
}

// One rank of every LSA team, all at this rank's place in its team.
NCCL_API(ncclTeam_t, ncclTeamRail, ncclComm_t comm);
ncclTeam_t ncclTeamRail(ncclComm_t comm) {
  if (checkCommUsable(comm, "ncclTeamRail") != ncclSuccess) return kNoTeam;
  LsaPlace lsa = lsaPlace(comm);
  return ncclTeam_t{comm->nRanks / lsa.size, comm->rank / lsa.size, lsa.size};
}

NCCL_API(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeam_t team, int rank);
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  const char* fn = "ncclTeamRankToWorld";
  if (checkCommUsable(comm, fn) != ncclSuccess || !teamRankValid(team, rank, fn)) return -1;
  long world = comm->rank + (long)(rank - team.rank) * team.stride;
  if (world < 0 || world >= comm->nRanks) {
    WARN("%s: rank %d of team {nRanks %d, rank %d, stride %d} would be world rank %ld, outside the %d ranks", fn,
         rank, team.nRanks, team.rank, team.stride, world, comm->nRanks);
    return -1;
  }
  return (int)world;
}

NCCL_API(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeam_t team, int rank);
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  const char* fn = "ncclTeamRankToLsa";
  if (checkCommUsable(comm, fn) != ncclSuccess || !teamRankValid(team, rank, fn)) return -1;
  LsaPlace lsa = lsaPlace(comm);
  long lsaRank = lsa.self + (long)(rank - team.rank) * team.stride;
  if (lsaRank < 0 || lsaRank >= lsa.size) {
    WARN("%s: rank %d of team {nRanks %d, rank %d, stride %d} is not in this rank's LSA team (%d ranks)", fn, rank,
         team.nRanks, team.rank, team.stride, lsa.size);
    return -1;
  }
  return (int)lsaRank;
}
