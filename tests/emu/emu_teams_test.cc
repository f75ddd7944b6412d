// The Device API's teams on real communicators (ncclCommInitAll over the
// emulated GPUs, whose transports exchange the P2P reach matrix at init):
// 2, 3 and 4 ranks, one host. Every emulated GPU reaches every other, so
// the LSA team is the whole communicator and the rail single ranks; with
// NCCL_P2P_DISABLE=1 (run as a second test) nobody reaches anybody: LSA
// teams of one rank, one rail of all. Device communicators made on them
// carry the same teams.
//
//   emu_teams_test [--no-p2p]     (--no-p2p: expect NCCL_P2P_DISABLE=1's teams)
#include <cstdio>
#include <cstring>
#include <vector>

#include "nccl.h"
#include "nccl_device.h"
#include "test_check.h"

namespace {

bool checkTeams(int nRanks, bool p2p) {
  std::vector<ncclComm_t> comms(nRanks);
  std::vector<int> devs(nRanks);
  for (int i = 0; i < nRanks; i++) devs[i] = i;
  NCCL_OK(ncclCommInitAll(comms.data(), nRanks, devs.data()));
  int lsaSize = p2p ? nRanks : 1;
  for (int r = 0; r < nRanks; r++) {
    ncclComm_t c = comms[r];
    ncclTeam_t world = ncclTeamWorld(c), lsa = ncclTeamLsa(c), rail = ncclTeamRail(c);
    CHECK_EQ(world.nRanks, nRanks, "rank %d", r);
    CHECK_EQ(world.rank, r, "rank %d", r);
    CHECK_EQ(lsa.nRanks, lsaSize, "rank %d of %d", r, nRanks);
    CHECK_EQ(lsa.rank, r % lsaSize, "rank %d of %d", r, nRanks);
    CHECK_EQ(rail.nRanks, nRanks / lsaSize, "rank %d of %d", r, nRanks);
    CHECK_EQ(rail.stride, lsaSize, "rank %d of %d", r, nRanks);
    for (int i = 0; i < lsa.nRanks; i++) CHECK_EQ(ncclTeamRankToWorld(c, lsa, i), r - r % lsaSize + i, "lsa %d", i);
    for (int i = 0; i < rail.nRanks; i++) CHECK_EQ(ncclTeamRankToWorld(c, rail, i), r % lsaSize + i * lsaSize, "rail %d", i);
  }
  // Device communicators (collective: one group drives every rank) carry the same teams.
  std::vector<ncclDevComm> dc(nRanks);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1;
  ncclGroupStart();
  for (int r = 0; r < nRanks; r++) ncclDevCommCreate(comms[r], &reqs, &dc[r]);
  ncclResult_t res = ncclGroupEnd();
  CHECK_EQ(res, ncclSuccess, "ncclDevCommCreate: %s", ncclGetLastError(nullptr));
  for (int r = 0; r < nRanks && res == ncclSuccess; r++) {
    CHECK_EQ(dc[r].lsaSize, lsaSize, "devComm of rank %d", r);
    CHECK_EQ(dc[r].lsaRank, r % lsaSize, "devComm of rank %d", r);
    ncclTeam_t rail = ncclTeamRail(dc[r]);
    CHECK_EQ(rail.nRanks, nRanks / lsaSize, "devComm rail of rank %d", r);
    CHECK_EQ(ncclDevCommDestroy(comms[r], &dc[r]), ncclSuccess, "%s", ncclGetLastError(nullptr));
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  printf("%d ranks: LSA teams of %d, rails of %d\n", nRanks, lsaSize, nRanks / lsaSize);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bool p2p = !(argc > 1 && strcmp(argv[1], "--no-p2p") == 0);
  for (int n = 2; n <= 4; n++) checkTeams(n, p2p);
  printf("%s\n", testcheck::failures() ? "FAILED" : "ok");
  return testcheck::failures() ? 1 : 0;
}
