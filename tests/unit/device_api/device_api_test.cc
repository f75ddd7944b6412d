// The host side of the Device API (src/common/device_api): LSA team sizes
// from reachability, the team functions on hand-built communicators of 1-4
// ranks (fake GPU backend), the requirement builders against NCCL 2.28.9's
// sizes, and ncclDevCommCreate/Destroy's explicit refusal.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/core/comm.h"
#include "common/device_api/lsa.h"
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

TEST_F(DeviceApiComm, DevCommCreateIsAnExplicitUnsupportedFeature) {
  ncclComm* c = make(0, {0, 0});
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ncclDevComm dc;
  memset(&dc, 0xab, sizeof(dc));
  ncclDevComm untouched = dc;

  clearError();
  EXPECT_EQ(ncclDevCommCreate(nullptr, &reqs, &dc), ncclInvalidArgument);
  EXPECT_NE(lastError().find("comm is NULL"), std::string::npos) << lastError();
  clearError();
  EXPECT_EQ(ncclDevCommCreate(c, nullptr, &dc), ncclInvalidArgument);
  EXPECT_NE(lastError().find("reqs is a null pointer"), std::string::npos) << lastError();
  clearError();
  EXPECT_EQ(ncclDevCommCreate(c, &reqs, nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("outDevComm is a null pointer"), std::string::npos) << lastError();

  clearError();
  EXPECT_EQ(ncclDevCommCreate(c, &reqs, &dc), ncclInvalidUsage);
  EXPECT_NE(lastError().find("not supported by this uniccl version"), std::string::npos) << lastError();
  EXPECT_EQ(memcmp(&dc, &untouched, sizeof(dc)), 0) << "a failed create wrote its output";

  clearError();
  EXPECT_EQ(ncclDevCommDestroy(c, nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("devComm is a null pointer"), std::string::npos) << lastError();
  clearError();
  EXPECT_EQ(ncclDevCommDestroy(c, &dc), ncclInvalidArgument);
  EXPECT_NE(lastError().find("was not made by ncclDevCommCreate"), std::string::npos) << lastError();
  EXPECT_EQ(ncclDevCommDestroy(nullptr, &dc), ncclInvalidArgument);
}

}  // namespace
}  // namespace uniccl
