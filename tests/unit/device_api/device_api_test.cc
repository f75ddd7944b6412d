// The host side of the Device API (src/common/device_api): LSA team sizes
// from reachability (topo/lsa_team.h), the team functions on hand-built
// communicators of 1-4 ranks (fake GPU backend), the requirement builders
// against NCCL 2.28.9's sizes, device communicators' resource placement and
// refusals (GIN, multimem), bad handles, and windows' flat layout.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/core/comm.h"
#include "common/device_api/resource_layout.h"
#include "common/symmetric/flat_layout.h"
#include "common/topo/lsa_team.h"
#include "fake_gpu.h"
#include "nccl_device.h"

namespace uniccl {
namespace {

// ncclGetLastError's text, and whether it contains `word`.
std::string lastError() { return ncclGetLastError(nullptr); }
void clearError() { ncclGetVersion(nullptr); }   // leaves a WARN of its own

// host[r]: the host of rank r; ranks of one host reach each other unless
// `broken` names the pair.
std::vector<uint8_t> reach(const std::vector<int>& host, std::vector<std::pair<int, int>> broken = {}) {
  int n = (int)host.size();
  std::vector<uint8_t> m((size_t)n * n, 0);
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) m[(size_t)a * n + b] = a != b && host[a] == host[b];
  for (auto [a, b] : broken) m[(size_t)a * n + b] = m[(size_t)b * n + a] = 0;
  return m;
}

int lsaSize(const std::vector<int>& host, int hint = 0, std::vector<std::pair<int, int>> broken = {}) {
  int n = (int)host.size();
  std::vector<uint8_t> m = reach(host, broken);
  return lsaTeamSize(n, hint, [&](int a, int b) { return m[(size_t)a * n + b] && m[(size_t)b * n + a]; });
}

TEST(LsaTeamSize, FromRunsOfReachableRanks) {
  EXPECT_EQ(lsaSize({0}), 1);
  EXPECT_EQ(lsaSize({0, 0}), 2);
  EXPECT_EQ(lsaSize({0, 0, 0}), 3);
  EXPECT_EQ(lsaSize({0, 0, 0, 0}), 4);
  EXPECT_EQ(lsaSize({0, 0, 1, 1}), 2);           // 2 hosts of 2
  EXPECT_EQ(lsaSize({0, 1, 2, 3}), 1);           // one rank per host
  EXPECT_EQ(lsaSize({0, 0, 0, 0, 1, 1}), 2);     // gcd(4, 2)
  EXPECT_EQ(lsaSize({0, 0, 0, 1, 1}), 1);        // gcd(3, 2)
  EXPECT_EQ(lsaSize({0, 1, 0, 1}), 1);           // hosts interleaved: no consecutive block
}

TEST(LsaTeamSize, NoP2pBetweenSomeGpus) {
  EXPECT_EQ(lsaSize({0, 0, 0, 0}, 0, {{1, 2}}), 2);          // runs 0-1 and 2-3
  EXPECT_EQ(lsaSize({0, 0, 0}, 0, {{0, 2}}), 1);             // 2 reaches 1 but not 0: runs 0-1, 2
  EXPECT_EQ(lsaSize({0, 0, 0, 0}, 0, {{0, 1}, {2, 3}}), 1);  // nobody pairs up
}

TEST(LsaTeamSize, SizeHint) {   // NCCL_LSA_TEAM_SIZE joins the gcd
  EXPECT_EQ(lsaSize({0, 0, 0, 0}, 2), 2);
  EXPECT_EQ(lsaSize({0, 0, 0, 0}, 3), 1);
  EXPECT_EQ(lsaSize({0, 0, 1, 1}, 4), 2);
}

// A Ready communicator of host.size() ranks seen from `rank`, with the reach
// matrix init would have exchanged.
class DeviceApiComm : public ::testing::Test {
 protected:
  void SetUp() override { fake::reset(); }
  void TearDown() override {
    for (ncclComm* c : comms_) delete c;
    fake::reset();
  }
  ncclComm* make(int rank, const std::vector<int>& host) {
    ncclComm* c = new ncclComm();
    comms_.push_back(c);
    c->rank = rank;
    c->nRanks = (int)host.size();
    c->asyncError.store(ncclSuccess);
    c->state.store(CommState::Ready);
    if (host.size() > 1) c->transports.setReachForTesting(c->nRanks, reach(host));
    return c;
  }
  std::vector<ncclComm*> comms_;
};

void expectTeam(ncclTeam_t t, int nRanks, int rank, int stride) {
  EXPECT_EQ(t.nRanks, nRanks);
  EXPECT_EQ(t.rank, rank);
  EXPECT_EQ(t.stride, stride);
}

TEST_F(DeviceApiComm, OneRank) {
  ncclComm* c = make(0, {0});
  expectTeam(ncclTeamWorld(c), 1, 0, 1);
  expectTeam(ncclTeamLsa(c), 1, 0, 1);
  expectTeam(ncclTeamRail(c), 1, 0, 1);
  EXPECT_EQ(ncclTeamRankToWorld(c, ncclTeamLsa(c), 0), 0);
  EXPECT_EQ(ncclTeamRankToLsa(c, ncclTeamWorld(c), 0), 0);
}

TEST_F(DeviceApiComm, TwoHostsOfTwo) {
  // ranks 0 1 | 2 3: LSA teams {0,1} {2,3}, rails {0,2} {1,3}.
  const std::vector<int> hosts = {0, 0, 1, 1};
  for (int r = 0; r < 4; r++) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ncclComm* c = make(r, hosts);
    ncclTeam_t world = ncclTeamWorld(c), lsa = ncclTeamLsa(c), rail = ncclTeamRail(c);
    expectTeam(world, 4, r, 1);
    expectTeam(lsa, 2, r % 2, 1);
    expectTeam(rail, 2, r / 2, 2);
    for (int i = 0; i < 2; i++) {
      EXPECT_EQ(ncclTeamRankToWorld(c, lsa, i), r - r % 2 + i);
      EXPECT_EQ(ncclTeamRankToWorld(c, rail, i), r % 2 + 2 * i);
      EXPECT_EQ(ncclTeamRankToLsa(c, lsa, i), i);
    }
    EXPECT_EQ(ncclTeamRankToLsa(c, rail, rail.rank), r % 2);   // itself
    // World ranks of the own host are LSA ranks; the others' are not.
    for (int w = 0; w < 4; w++) {
      clearError();
      int got = ncclTeamRankToLsa(c, world, w);
      if (w / 2 == r / 2) {
        EXPECT_EQ(got, w % 2) << w;
      } else {
        EXPECT_EQ(got, -1) << w;
        EXPECT_NE(lastError().find("not in this rank's LSA team"), std::string::npos) << lastError();
      }
    }
  }
}

TEST_F(DeviceApiComm, ThreeRanksOneHost) {
  ncclComm* c = make(2, {0, 0, 0});
  expectTeam(ncclTeamLsa(c), 3, 2, 1);
  expectTeam(ncclTeamRail(c), 1, 0, 3);
  EXPECT_EQ(ncclTeamRankToWorld(c, ncclTeamLsa(c), 0), 0);
}

TEST_F(DeviceApiComm, BadInput) {
  clearError();
  expectTeam(ncclTeamWorld(nullptr), 0, 0, 0);
  EXPECT_NE(lastError().find("comm is NULL"), std::string::npos) << lastError();
  expectTeam(ncclTeamLsa(nullptr), 0, 0, 0);
  expectTeam(ncclTeamRail(nullptr), 0, 0, 0);
  EXPECT_EQ(ncclTeamRankToLsa(nullptr, ncclTeam_t{1, 0, 1}, 0), -1);

  ncclComm* c = make(1, {0, 0});
  ncclTeam_t world = ncclTeamWorld(c);
  clearError();
  EXPECT_EQ(ncclTeamRankToWorld(c, world, 2), -1);
  EXPECT_NE(lastError().find("rank 2 is out of range"), std::string::npos) << lastError();
  EXPECT_EQ(ncclTeamRankToWorld(c, world, -1), -1);
  clearError();
  EXPECT_EQ(ncclTeamRankToWorld(c, ncclTeam_t{0, 0, 1}, 0), -1);
  EXPECT_NE(lastError().find("is not a team of this communicator"), std::string::npos) << lastError();
  EXPECT_EQ(ncclTeamRankToWorld(c, ncclTeam_t{4, 1, 1}, 3), -1);   // world rank 3 of 2

  c->state.store(CommState::Aborted);
  expectTeam(ncclTeamWorld(c), 0, 0, 0);
}

TEST(DeviceApiRequirements, LsaBarrier) {
  ncclLsaBarrierHandle_t h{};
  ncclDevResourceRequirements_t req;
  memset(&req, 0x5a, sizeof(req));   // every field must be written
  ASSERT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam_t{4, 1, 1}, 3, &h, &req), ncclSuccess);
  EXPECT_EQ(req.bufferSize, (3u * 3 + 3 * 4) * 4);   // 3 state words + one per rank, per barrier
  EXPECT_EQ(req.bufferAlign, 4u);
  EXPECT_EQ(req.outBufferHandle, &h.bufHandle);
  EXPECT_EQ(req.next, nullptr);
  EXPECT_EQ(req.ginSignalCount, 0);
  EXPECT_EQ(req.ginCounterCount, 0);
  EXPECT_EQ(req.outGinSignalStart, nullptr);
  EXPECT_EQ(req.outGinCounterStart, nullptr);
  EXPECT_EQ(h.nBarriers, 3);

  clearError();
  EXPECT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam_t{4, 1, 1}, 3, &h, nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("outReq is a null pointer"), std::string::npos) << lastError();
  EXPECT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam_t{4, 1, 1}, 3, nullptr, &req), ncclInvalidArgument);
  clearError();
  EXPECT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam_t{4, 1, 1}, -1, &h, &req), ncclInvalidArgument);
  EXPECT_NE(lastError().find("nBarriers is -1"), std::string::npos) << lastError();
  EXPECT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam_t{0, 0, 1}, 1, &h, &req), ncclInvalidArgument);
}

TEST_F(DeviceApiComm, GinBarrier) {
  ncclComm* c = make(0, {0, 0});
  ncclGinBarrierHandle_t h{};
  ncclDevResourceRequirements_t req;
  memset(&req, 0x5a, sizeof(req));
  ASSERT_EQ(ncclGinBarrierCreateRequirement(c, ncclTeam_t{8, 0, 2}, 5, &h, &req), ncclSuccess);
  EXPECT_EQ(req.bufferSize, 5u * 16);   // NCCL 2.28.9: 16 bytes and one signal per barrier
  EXPECT_EQ(req.bufferAlign, 4u);
  EXPECT_EQ(req.outBufferHandle, &h.bufHandle);
  EXPECT_EQ(req.ginSignalCount, 5);
  EXPECT_EQ(req.outGinSignalStart, &h.signal0);
  EXPECT_EQ(req.ginCounterCount, 0);
  EXPECT_EQ(req.outGinCounterStart, nullptr);
  EXPECT_EQ(req.next, nullptr);

  EXPECT_EQ(ncclGinBarrierCreateRequirement(nullptr, ncclTeam_t{2, 0, 1}, 1, &h, &req), ncclInvalidArgument);
  clearError();
  EXPECT_EQ(ncclGinBarrierCreateRequirement(c, ncclTeam_t{2, 0, 1}, 1, nullptr, &req), ncclInvalidArgument);
  EXPECT_NE(lastError().find("outHandle is a null pointer"), std::string::npos) << lastError();
}

TEST(DeviceApiRequirements, LlAllToAll) {
  EXPECT_EQ(ncclLLA2ACalcSlots(10, 8), 10);
  EXPECT_EQ(ncclLLA2ACalcSlots(10, 9), 20);    // 9 bytes take two 8-byte slots
  EXPECT_EQ(ncclLLA2ACalcSlots(3, 1), 3);
  EXPECT_EQ(ncclLLA2ACalcSlots(0, 4), 0);
  clearError();
  EXPECT_EQ(ncclLLA2ACalcSlots(4, 0), -1);
  EXPECT_NE(lastError().find("maxEltSize is 0"), std::string::npos) << lastError();
  EXPECT_EQ(ncclLLA2ACalcSlots(-1, 8), -1);
  EXPECT_EQ(ncclLLA2ACalcSlots(1 << 30, 64), -1);   // overflows an int

  ncclLLA2AHandle_t h{};
  ncclDevResourceRequirements_t req;
  memset(&req, 0x5a, sizeof(req));
  ASSERT_EQ(ncclLLA2ACreateRequirement(4, 6, &h, &req), ncclSuccess);
  EXPECT_EQ(req.bufferSize, 4u * (1 + 2 * 6) * 16);
  EXPECT_EQ(req.bufferAlign, 16u);
  EXPECT_EQ(req.outBufferHandle, &h.bufHandle);
  EXPECT_EQ(req.ginSignalCount, 0);
  EXPECT_EQ(req.next, nullptr);
  EXPECT_EQ(h.nSlots, 6u);
  EXPECT_EQ(ncclLLA2ACreateRequirement(4, -6, &h, &req), ncclInvalidArgument);
  EXPECT_EQ(ncclLLA2ACreateRequirement(4, 6, &h, nullptr), ncclInvalidArgument);
}

TEST_F(DeviceApiComm, DevCommBadHandles) {
  ncclComm* c = make(0, {0, 0});
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ncclDevComm dc;
  memset(&dc, 0xab, sizeof(dc));
  ncclDevComm untouched = dc;

  clearError();
  EXPECT_EQ(ncclDevCommCreate(nullptr, &reqs, &dc), ncclInvalidArgument);
  EXPECT_NE(lastError().find("comm is NULL"), std::string::npos) << lastError();
  EXPECT_EQ(memcmp(&dc, &untouched, sizeof(dc)), 0) << "a failed create wrote its output";
  // (NULL reqs / outDevComm on a real communicator: emu-symmetric, where
  // every rank fails together.)

  clearError();
  EXPECT_EQ(ncclDevCommDestroy(c, nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("devComm is a null pointer"), std::string::npos) << lastError();
  clearError();
  EXPECT_EQ(ncclDevCommDestroy(c, &dc), ncclInvalidArgument);
  EXPECT_NE(lastError().find("was not made by ncclDevCommCreate"), std::string::npos) << lastError();
  EXPECT_EQ(ncclDevCommDestroy(nullptr, &dc), ncclInvalidArgument);
}

// Where ncclDevCommCreate puts the resources, and what it refuses.
TEST(DeviceApiResources, PlacesBarriersThenTheListAligned) {
  ncclLLA2AHandle_t a2a{};
  ncclDevResourceRequirements_t a2aReq, user;
  ASSERT_EQ(ncclLLA2ACreateRequirement(2, 5, &a2a, &a2aReq), ncclSuccess);
  ncclDevResourceHandle_t userHandle = 0xffffffffu;
  memset(&user, 0, sizeof(user));
  user.bufferSize = 1000;
  user.bufferAlign = 1024;
  user.outBufferHandle = &userHandle;
  user.next = &a2aReq;
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 2;
  reqs.resourceRequirementsList = &user;
  ResourceLayout l;
  ASSERT_EQ(planResources(reqs, 8, 4, 1, &l), ncclSuccess);
  EXPECT_EQ(l.lsaBarrier.nBarriers, 2);
  EXPECT_EQ(l.lsaBarrier.bufHandle, 0u);
  ASSERT_EQ(l.placements.size(), 2u);
  EXPECT_EQ(l.placements[0].out, &userHandle);
  EXPECT_EQ(l.placements[0].handle * 128 % 1024, 0u);
  EXPECT_GE(l.placements[0].handle * 128, 2u * (3 + 4) * 4);   // after the barriers of a 4-rank team
  EXPECT_EQ(l.placements[1].out, &a2a.bufHandle);
  EXPECT_GE(l.placements[1].handle * 128, l.placements[0].handle * 128 + 1000);
  EXPECT_GE(l.bytes, l.placements[1].handle * 128 + a2aReq.bufferSize);
  EXPECT_EQ(l.bytes % 4096, 0u);
  EXPECT_EQ(userHandle, 0xffffffffu) << "handles are written by ncclDevCommCreate on success only";

  // barrierCount asks for LSA barriers too; with one LSA team it needs no GIN.
  reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.barrierCount = 3;
  ASSERT_EQ(planResources(reqs, 4, 4, 0, &l), ncclSuccess);
  EXPECT_EQ(l.lsaBarrier.nBarriers, 3);
  EXPECT_EQ(l.bytes, 4096u);

  // Rail GIN barriers with one LSA team (PyTorch 2.11's request): the rail is
  // this rank alone; their 16 bytes each come after the LSA barriers.
  reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 2;
  reqs.railGinBarrierCount = 40;
  ASSERT_EQ(planResources(reqs, 4, 4, 0, &l), ncclSuccess);
  EXPECT_EQ(l.railGinBarrier.signal0, 0u);
  EXPECT_GE(l.railGinBarrier.bufHandle * 128, 2u * (3 + 4) * 4);
  EXPECT_GE(l.bytes, l.railGinBarrier.bufHandle * 128 + 40u * 16);
  EXPECT_FALSE(l.gin) << "a rail of one rank needs no GIN";
  reqs.ginSignalCount = 1;   // anything else that asks for GIN still gets it
  ASSERT_EQ(planResources(reqs, 4, 4, 0, &l), ncclSuccess);
  EXPECT_TRUE(l.gin);
  EXPECT_EQ(l.railGinBarrier.signal0, 1u);
}

// GIN signals and counters: the requirements' ids from 0, then each resource
// requirement's in list order; ginForceEnable alone asks for GIN too.
TEST(DeviceApiResources, PlansGinSignalsAndCounters) {
  ResourceLayout l;
  ncclDevCommRequirements r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ASSERT_EQ(planResources(r, 8, 4, 0, &l), ncclSuccess);
  EXPECT_FALSE(l.gin);
  r.ginForceEnable = true;
  ASSERT_EQ(planResources(r, 8, 4, 0, &l), ncclSuccess);
  EXPECT_TRUE(l.gin);
  EXPECT_EQ(l.ginSignalCount, 0);
  ncclDevResourceRequirements_t a{}, b{};
  ncclGinSignal_t sa = 99, sb = 99;
  ncclGinCounter_t cb = 99;
  a.ginSignalCount = 2;
  a.outGinSignalStart = &sa;
  a.next = &b;
  b.ginSignalCount = 3;
  b.ginCounterCount = 4;
  b.outGinSignalStart = &sb;
  b.outGinCounterStart = &cb;
  r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  r.ginSignalCount = 5;
  r.ginCounterCount = 1;
  r.resourceRequirementsList = &a;
  ASSERT_EQ(planResources(r, 8, 4, 0, &l), ncclSuccess);
  EXPECT_TRUE(l.gin);
  EXPECT_EQ(l.ginSignalCount, 10);
  EXPECT_EQ(l.ginCounterCount, 5);
  ASSERT_EQ(l.ginSignals.size(), 2u);
  EXPECT_EQ(l.ginSignals[0].first, 5u);
  EXPECT_EQ(l.ginSignals[1].first, 7u);
  ASSERT_EQ(l.ginCounters.size(), 1u);
  EXPECT_EQ(l.ginCounters[0].first, 1u);
  EXPECT_EQ(sa, 99u);   // written by ncclDevCommCreate on success, not by the plan
  b.ginCounterCount = 70000;   // descriptors carry 16-bit ids
  EXPECT_EQ(planResources(r, 8, 4, 0, &l), ncclInvalidArgument);
  b.ginCounterCount = -1;
  EXPECT_EQ(planResources(r, 8, 4, 0, &l), ncclInvalidArgument);
}

// Rail GIN barriers: asked for, or for world barriers across LSA teams; a
// signal each after the requirements' own, 4 epoch words each.
TEST(DeviceApiResources, PlansRailGinBarriers) {
  ResourceLayout l;
  ncclDevCommRequirements r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  r.ginSignalCount = 2;
  r.railGinBarrierCount = 3;
  ASSERT_EQ(planResources(r, 8, 4, 0, &l), ncclSuccess);
  EXPECT_TRUE(l.gin);
  EXPECT_EQ(l.railGinBarrier.signal0, 2u);
  EXPECT_EQ(l.ginSignalCount, 5);
  r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  r.barrierCount = 4;   // 8 ranks in LSA teams of 4: the world barrier crosses teams
  ASSERT_EQ(planResources(r, 8, 4, 0, &l), ncclSuccess);
  EXPECT_TRUE(l.gin);
  EXPECT_EQ(l.lsaBarrier.nBarriers, 4);
  EXPECT_EQ(l.ginSignalCount, 4);
  EXPECT_EQ(l.railGinBarrier.signal0, 0u);
  EXPECT_GT(l.railGinBarrier.bufHandle, l.lsaBarrier.bufHandle);
  ASSERT_EQ(planResources(r, 4, 4, 0, &l), ncclSuccess);   // one LSA team: no GIN
  EXPECT_FALSE(l.gin);
}

TEST(DeviceApiResources, RefusesMultimemAndMalformedLists) {
  ResourceLayout l;
  auto refused = [&](const ncclDevCommRequirements& r, ncclResult_t want, const char* word) {
    clearError();
    EXPECT_EQ(planResources(r, 8, 4, 0, &l), want) << word;
    EXPECT_NE(lastError().find(word), std::string::npos) << lastError();
  };
  ncclDevCommRequirements r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  r.lsaMultimem = true;
  refused(r, ncclInvalidUsage, "multicast");
  ncclTeamRequirements_t team{};
  team.multimem = true;
  r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  r.teamRequirementsList = &team;
  refused(r, ncclInvalidUsage, "multimem");
  ncclDevResourceRequirements_t loop{};
  loop.bufferSize = 8;
  loop.next = &loop;
  r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  r.resourceRequirementsList = &loop;
  refused(r, ncclInvalidArgument, "a cycle");
  ncclDevResourceRequirements_t odd{};
  odd.bufferSize = 8;
  odd.bufferAlign = 48;
  r.resourceRequirementsList = &odd;
  refused(r, ncclInvalidArgument, "power of two");
  r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  r.lsaBarrierCount = -1;
  refused(r, ncclInvalidArgument, "negative");
}

// The flat range of a window: every peer's buffer at base + p * stride.
TEST(FlatLayout, PeersAtOneStrideWhateverTheirOffsets) {
  const size_t g = 1 << 21;
  std::vector<FlatPeer> peers = {{4 * g, g + 4096}, {2 * g, 4096}, {6 * g, 3 * g + 4096}};
  FlatLayout l;
  const char* why = nullptr;
  ASSERT_TRUE(planFlatLayout(peers, g, &l, &why)) << why;
  EXPECT_EQ(l.stride % kFlatStrideUnit, 0u);
  for (size_t p = 0; p < peers.size(); p++) {
    EXPECT_EQ(l.mapOffset[p] % g, 0u) << p;
    // The buffer of peer p lands at flatBase + p * stride.
    EXPECT_EQ(l.mapOffset[p] + peers[p].offset, l.flatBaseOffset + p * l.stride) << p;
    EXPECT_LE(l.mapOffset[p] + peers[p].allocBytes, l.reserveBytes) << p;
    if (p > 0) {
      EXPECT_LE(l.mapOffset[p - 1] + peers[p - 1].allocBytes, l.mapOffset[p]) << "overlap at " << p;
    }
  }
  // Over 4 GiB an allocation takes a wider stride.
  std::vector<FlatPeer> big = {{(size_t)5 << 30, 0}, {(size_t)5 << 30, 0}};
  ASSERT_TRUE(planFlatLayout(big, g, &l, &why)) << why;
  EXPECT_EQ(l.stride, (size_t)8 << 30);
}

TEST(FlatLayout, RefusesOffsetsThatDifferModuloTheGranularity) {
  const size_t g = 1 << 21;
  FlatLayout l;
  const char* why = nullptr;
  EXPECT_FALSE(planFlatLayout({{2 * g, 4096}, {2 * g, 8192}}, g, &l, &why));
  EXPECT_NE(std::string(why).find("different offsets"), std::string::npos) << why;
  EXPECT_FALSE(planFlatLayout({{g + 1, 0}}, g, &l, &why));
  EXPECT_FALSE(planFlatLayout({{g, g}}, g, &l, &why));
}

}  // namespace
}  // namespace uniccl
