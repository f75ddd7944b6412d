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

namespace {

int gFailures = 0;
#define EXPECT_EQI(got, want, ...)                                                          \
  do {                                                                                      \
    long g_ = (long)(got), w_ = (long)(want);                                               \
    if (g_ != w_) {                                                                         \
      fprintf(stderr, "FAIL %s:%d: %s = %ld, want %ld: ", __FILE__, __LINE__, #got, g_, w_); \
      fprintf(stderr, __VA_ARGS__);                                                         \
      fputc('\n', stderr);                                                                  \
      gFailures++;                                                                          \
    }                                                                                       \
  } while (0)

void checkTeams(int nRanks, bool p2p) {
  std::vector<ncclComm_t> comms(nRanks);
  std::vector<int> devs(nRanks);
  for (int i = 0; i < nRanks; i++) devs[i] = i;
  ncclResult_t res = ncclCommInitAll(comms.data(), nRanks, devs.data());
  if (res != ncclSuccess) {
    fprintf(stderr, "FAIL ncclCommInitAll(%d): %s (%s)\n", nRanks, ncclGetErrorString(res), ncclGetLastError(nullptr));
    gFailures++;
    return;
  }
  int lsaSize = p2p ? nRanks : 1;
  for (int r = 0; r < nRanks; r++) {
    ncclComm_t c = comms[r];
    ncclTeam_t world = ncclTeamWorld(c), lsa = ncclTeamLsa(c), rail = ncclTeamRail(c);
    EXPECT_EQI(world.nRanks, nRanks, "rank %d", r);
    EXPECT_EQI(world.rank, r, "rank %d", r);
    EXPECT_EQI(lsa.nRanks, lsaSize, "rank %d of %d", r, nRanks);
    EXPECT_EQI(lsa.rank, r % lsaSize, "rank %d of %d", r, nRanks);
    EXPECT_EQI(rail.nRanks, nRanks / lsaSize, "rank %d of %d", r, nRanks);
    EXPECT_EQI(rail.stride, lsaSize, "rank %d of %d", r, nRanks);
    for (int i = 0; i < lsa.nRanks; i++) EXPECT_EQI(ncclTeamRankToWorld(c, lsa, i), r - r % lsaSize + i, "lsa %d", i);
    for (int i = 0; i < rail.nRanks; i++) EXPECT_EQI(ncclTeamRankToWorld(c, rail, i), r % lsaSize + i * lsaSize, "rail %d", i);
  }
  // Device communicators (collective: one group drives every rank) carry the same teams.
  std::vector<ncclDevComm> dc(nRanks);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1;
  ncclGroupStart();
  for (int r = 0; r < nRanks; r++) ncclDevCommCreate(comms[r], &reqs, &dc[r]);
  res = ncclGroupEnd();
  EXPECT_EQI(res, ncclSuccess, "ncclDevCommCreate: %s", ncclGetLastError(nullptr));
  for (int r = 0; r < nRanks && res == ncclSuccess; r++) {
    EXPECT_EQI(dc[r].lsaSize, lsaSize, "devComm of rank %d", r);
    EXPECT_EQI(dc[r].lsaRank, r % lsaSize, "devComm of rank %d", r);
    ncclTeam_t rail = ncclTeamRail(dc[r]);
    EXPECT_EQI(rail.nRanks, nRanks / lsaSize, "devComm rail of rank %d", r);
    EXPECT_EQI(ncclDevCommDestroy(comms[r], &dc[r]), ncclSuccess, "%s", ncclGetLastError(nullptr));
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  printf("%d ranks: LSA teams of %d, rails of %d\n", nRanks, lsaSize, nRanks / lsaSize);
}

}  // namespace

int main(int argc, char** argv) {
  bool p2p = !(argc > 1 && strcmp(argv[1], "--no-p2p") == 0);
  for (int n = 2; n <= 4; n++) checkTeams(n, p2p);
  printf("%s\n", gFailures ? "FAILED" : "ok");
  return gFailures ? 1 : 0;
}
