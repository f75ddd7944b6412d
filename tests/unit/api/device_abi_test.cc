// ABI of include/nccl_device.h (uniccl's Device API header): every size,
// alignment and offset NCCL-built code may read inline, written out
// literally from NVIDIA's NCCL 2.28.9 headers (measured with g++ on LP64),
// never derived from our own header. Also: the header wins over the vendor's,
// compiles as plain host C++17, and its team arithmetic says what NCCL's does.
#include "nccl_device.h"

#ifndef UNICCL_NCCL_DEVICE_H
#error "nccl_device.h did not resolve to uniccl's include/nccl_device.h: fix the include order"
#endif

#include <gtest/gtest.h>

#include <cstddef>

static_assert(sizeof(void*) == 8, "the offsets below are for LP64");

static_assert(sizeof(ncclTeam) == 12 && alignof(ncclTeam) == 4, "ncclTeam");
static_assert(offsetof(ncclTeam, nRanks) == 0, "ncclTeam::nRanks");
static_assert(offsetof(ncclTeam, rank) == 4, "ncclTeam::rank");
static_assert(offsetof(ncclTeam, stride) == 8, "ncclTeam::stride");
static_assert(sizeof(ncclMultimemHandle) == 8 && alignof(ncclMultimemHandle) == 8, "ncclMultimemHandle");
static_assert(sizeof(ncclLsaBarrierHandle) == 8 && alignof(ncclLsaBarrierHandle) == 4, "ncclLsaBarrierHandle");
static_assert(offsetof(ncclLsaBarrierHandle, bufHandle) == 0, "ncclLsaBarrierHandle::bufHandle");
static_assert(offsetof(ncclLsaBarrierHandle, nBarriers) == 4, "ncclLsaBarrierHandle::nBarriers");
static_assert(sizeof(ncclGinBarrierHandle) == 8 && alignof(ncclGinBarrierHandle) == 4, "ncclGinBarrierHandle");
static_assert(offsetof(ncclGinBarrierHandle, signal0) == 0, "ncclGinBarrierHandle::signal0");
static_assert(offsetof(ncclGinBarrierHandle, bufHandle) == 4, "ncclGinBarrierHandle::bufHandle");
static_assert(sizeof(ncclLLA2AHandle) == 8 && alignof(ncclLLA2AHandle) == 4, "ncclLLA2AHandle");
static_assert(offsetof(ncclLLA2AHandle, bufHandle) == 0, "ncclLLA2AHandle::bufHandle");
static_assert(offsetof(ncclLLA2AHandle, nSlots) == 4, "ncclLLA2AHandle::nSlots");
static_assert(sizeof(ncclWindow_vidmem) == 72 && alignof(ncclWindow_vidmem) == 8, "ncclWindow_vidmem");
static_assert(offsetof(ncclWindow_vidmem, winHost) == 0, "ncclWindow_vidmem::winHost");
static_assert(offsetof(ncclWindow_vidmem, lsaFlatBase) == 8, "ncclWindow_vidmem::lsaFlatBase");
static_assert(offsetof(ncclWindow_vidmem, lsaRank) == 16, "ncclWindow_vidmem::lsaRank");
static_assert(offsetof(ncclWindow_vidmem, worldRank) == 20, "ncclWindow_vidmem::worldRank");
static_assert(offsetof(ncclWindow_vidmem, stride4G) == 24, "ncclWindow_vidmem::stride4G");
static_assert(offsetof(ncclWindow_vidmem, mcOffset4K) == 28, "ncclWindow_vidmem::mcOffset4K");
static_assert(offsetof(ncclWindow_vidmem, ginOffset4K) == 32, "ncclWindow_vidmem::ginOffset4K");
static_assert(offsetof(ncclWindow_vidmem, ginWins) == 40, "ncclWindow_vidmem::ginWins");
static_assert(sizeof(ncclDevCommWindowTable) == 776 && alignof(ncclDevCommWindowTable) == 8, "ncclDevCommWindowTable");
static_assert(offsetof(ncclDevCommWindowTable, entries) == 0, "ncclDevCommWindowTable::entries");
static_assert(offsetof(ncclDevCommWindowTable, next) == 768, "ncclDevCommWindowTable::next");
static_assert(sizeof(ncclDevCommWindowTable::Entry) == 24 && alignof(ncclDevCommWindowTable::Entry) == 8, "ncclDevCommWindowTable::Entry");
static_assert(offsetof(ncclDevCommWindowTable::Entry, base) == 0, "ncclDevCommWindowTable::Entry::base");
static_assert(offsetof(ncclDevCommWindowTable::Entry, size) == 8, "ncclDevCommWindowTable::Entry::size");
static_assert(offsetof(ncclDevCommWindowTable::Entry, window) == 16, "ncclDevCommWindowTable::Entry::window");
static_assert(sizeof(ncclDevComm) == 200 && alignof(ncclDevComm) == 8, "ncclDevComm");
static_assert(offsetof(ncclDevComm, rank) == 0, "ncclDevComm::rank");
static_assert(offsetof(ncclDevComm, nRanks) == 4, "ncclDevComm::nRanks");
static_assert(offsetof(ncclDevComm, nRanks_rcp32) == 8, "ncclDevComm::nRanks_rcp32");
static_assert(offsetof(ncclDevComm, lsaRank) == 12, "ncclDevComm::lsaRank");
static_assert(offsetof(ncclDevComm, lsaSize) == 16, "ncclDevComm::lsaSize");
static_assert(offsetof(ncclDevComm, lsaSize_rcp32) == 20, "ncclDevComm::lsaSize_rcp32");
static_assert(offsetof(ncclDevComm, windowTable) == 24, "ncclDevComm::windowTable");
static_assert(offsetof(ncclDevComm, resourceWindow) == 32, "ncclDevComm::resourceWindow");
static_assert(offsetof(ncclDevComm, resourceWindow_inlined) == 40, "ncclDevComm::resourceWindow_inlined");
static_assert(offsetof(ncclDevComm, lsaMultimem) == 112, "ncclDevComm::lsaMultimem");
static_assert(offsetof(ncclDevComm, lsaBarrier) == 120, "ncclDevComm::lsaBarrier");
static_assert(offsetof(ncclDevComm, railGinBarrier) == 128, "ncclDevComm::railGinBarrier");
static_assert(offsetof(ncclDevComm, ginContextCount) == 136, "ncclDevComm::ginContextCount");
static_assert(offsetof(ncclDevComm, ginTypes) == 137, "ncclDevComm::ginTypes");
static_assert(offsetof(ncclDevComm, ginHandles) == 144, "ncclDevComm::ginHandles");
static_assert(offsetof(ncclDevComm, ginSignalBase) == 176, "ncclDevComm::ginSignalBase");
static_assert(offsetof(ncclDevComm, ginSignalCount) == 180, "ncclDevComm::ginSignalCount");
static_assert(offsetof(ncclDevComm, ginCounterBase) == 184, "ncclDevComm::ginCounterBase");
static_assert(offsetof(ncclDevComm, ginCounterCount) == 188, "ncclDevComm::ginCounterCount");
static_assert(offsetof(ncclDevComm, ginSignalShadows) == 192, "ncclDevComm::ginSignalShadows");
static_assert(sizeof(ncclDevResourceRequirements) == 56 && alignof(ncclDevResourceRequirements) == 8, "ncclDevResourceRequirements");
static_assert(offsetof(ncclDevResourceRequirements, next) == 0, "ncclDevResourceRequirements::next");
static_assert(offsetof(ncclDevResourceRequirements, bufferSize) == 8, "ncclDevResourceRequirements::bufferSize");
static_assert(offsetof(ncclDevResourceRequirements, bufferAlign) == 16, "ncclDevResourceRequirements::bufferAlign");
static_assert(offsetof(ncclDevResourceRequirements, outBufferHandle) == 24, "ncclDevResourceRequirements::outBufferHandle");
static_assert(offsetof(ncclDevResourceRequirements, ginSignalCount) == 32, "ncclDevResourceRequirements::ginSignalCount");
static_assert(offsetof(ncclDevResourceRequirements, ginCounterCount) == 36, "ncclDevResourceRequirements::ginCounterCount");
static_assert(offsetof(ncclDevResourceRequirements, outGinSignalStart) == 40, "ncclDevResourceRequirements::outGinSignalStart");
static_assert(offsetof(ncclDevResourceRequirements, outGinCounterStart) == 48, "ncclDevResourceRequirements::outGinCounterStart");
static_assert(sizeof(ncclTeamRequirements) == 32 && alignof(ncclTeamRequirements) == 8, "ncclTeamRequirements");
static_assert(offsetof(ncclTeamRequirements, next) == 0, "ncclTeamRequirements::next");
static_assert(offsetof(ncclTeamRequirements, team) == 8, "ncclTeamRequirements::team");
static_assert(offsetof(ncclTeamRequirements, multimem) == 20, "ncclTeamRequirements::multimem");
static_assert(offsetof(ncclTeamRequirements, outMultimemHandle) == 24, "ncclTeamRequirements::outMultimemHandle");
static_assert(sizeof(ncclDevCommRequirements) == 56 && alignof(ncclDevCommRequirements) == 8, "ncclDevCommRequirements");
static_assert(offsetof(ncclDevCommRequirements, resourceRequirementsList) == 0, "ncclDevCommRequirements::resourceRequirementsList");
static_assert(offsetof(ncclDevCommRequirements, teamRequirementsList) == 8, "ncclDevCommRequirements::teamRequirementsList");
static_assert(offsetof(ncclDevCommRequirements, lsaMultimem) == 16, "ncclDevCommRequirements::lsaMultimem");
static_assert(offsetof(ncclDevCommRequirements, barrierCount) == 20, "ncclDevCommRequirements::barrierCount");
static_assert(offsetof(ncclDevCommRequirements, lsaBarrierCount) == 24, "ncclDevCommRequirements::lsaBarrierCount");
static_assert(offsetof(ncclDevCommRequirements, railGinBarrierCount) == 28, "ncclDevCommRequirements::railGinBarrierCount");
static_assert(offsetof(ncclDevCommRequirements, lsaLLA2ABlockCount) == 32, "ncclDevCommRequirements::lsaLLA2ABlockCount");
static_assert(offsetof(ncclDevCommRequirements, lsaLLA2ASlotCount) == 36, "ncclDevCommRequirements::lsaLLA2ASlotCount");
static_assert(offsetof(ncclDevCommRequirements, ginForceEnable) == 40, "ncclDevCommRequirements::ginForceEnable");
static_assert(offsetof(ncclDevCommRequirements, ginContextCount) == 44, "ncclDevCommRequirements::ginContextCount");
static_assert(offsetof(ncclDevCommRequirements, ginSignalCount) == 48, "ncclDevCommRequirements::ginSignalCount");
static_assert(offsetof(ncclDevCommRequirements, ginCounterCount) == 52, "ncclDevCommRequirements::ginCounterCount");

// A plain host translation unit sees the host-visible types (ncclSymPtr,
// the team tags) but none of the device-side functions.
static_assert(UNICCL_DEVICE_API == 0, "host C++ must not see the device-side functions");
static_assert(sizeof(ncclSymPtr<float>) == 16, "ncclSymPtr: a window and an offset");

namespace {

TEST(DeviceAbi, HandleTypes) {
  EXPECT_EQ(sizeof(ncclDevResourceHandle_t), 4u);
  EXPECT_EQ(sizeof(ncclGinSignal_t), 4u);
  EXPECT_EQ(sizeof(ncclGinCounter_t), 4u);
  EXPECT_EQ(NCCL_GIN_MAX_CONTEXTS, 4);
  EXPECT_EQ(ncclGetResourceBufferOffset(3), 384u);   // 128-byte units
}

TEST(DeviceAbi, RequirementsInitializerZeroes) {
  ncclDevCommRequirements r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  EXPECT_EQ(r.resourceRequirementsList, nullptr);
  EXPECT_EQ(r.teamRequirementsList, nullptr);
  EXPECT_FALSE(r.lsaMultimem);
  EXPECT_EQ(r.lsaBarrierCount, 0);
  EXPECT_EQ(r.ginCounterCount, 0);
}

// 8 ranks = 2 LSA blocks of 4; this rank is world 6 (LSA rank 2, rail rank 1).
ncclDevComm devComm() {
  ncclDevComm c{};
  c.rank = 6;
  c.nRanks = 8;
  c.lsaRank = 2;
  c.lsaSize = 4;
  return c;
}

TEST(DeviceTeams, FromDevComm) {
  ncclDevComm c = devComm();
  ncclTeam w = ncclTeamWorld(c), l = ncclTeamLsa(c), r = ncclTeamRail(c);
  EXPECT_EQ(w.nRanks, 8); EXPECT_EQ(w.rank, 6); EXPECT_EQ(w.stride, 1);
  EXPECT_EQ(l.nRanks, 4); EXPECT_EQ(l.rank, 2); EXPECT_EQ(l.stride, 1);
  EXPECT_EQ(r.nRanks, 2); EXPECT_EQ(r.rank, 1); EXPECT_EQ(r.stride, 4);
  EXPECT_EQ(ncclTeamRankToWorld(c, r, 0), 2);   // rail rank 0 = world 2
  EXPECT_EQ(ncclTeamRankToWorld(c, l, 0), 4);   // LSA rank 0 = world 4
  EXPECT_EQ(ncclTeamRankToLsa(c, l, 3), 3);
  EXPECT_EQ(ncclTeamRankToLsa(c, w, 5), 1);     // world 5 = LSA rank 1
}

TEST(DeviceTeams, Membership) {
  ncclDevComm c = devComm();
  ncclTeam w = ncclTeamWorld(c), l = ncclTeamLsa(c), r = ncclTeamRail(c);
  for (int wr = 0; wr < 8; wr++) {
    EXPECT_EQ(ncclTeamRankIsMember(l, w, wr), wr >= 4) << wr;
    EXPECT_EQ(ncclTeamRankIsMember(r, w, wr), wr % 4 == 2) << wr;
  }
  EXPECT_EQ(ncclTeamRankToTeam(l, w, 7), 3);
  EXPECT_EQ(ncclTeamRankToTeam(r, w, 2), 0);
  EXPECT_EQ(ncclTeamRankToTeam(w, r, 0), 2);
}

TEST(DeviceTeams, Factors) {
  ncclTeam w{8, 6, 1};
  ncclTeam in = ncclTeamInnerFactor(w, 4), out = ncclTeamOuterFactor(w, 4);
  EXPECT_EQ(in.nRanks, 4); EXPECT_EQ(in.rank, 2); EXPECT_EQ(in.stride, 1);
  EXPECT_EQ(out.nRanks, 2); EXPECT_EQ(out.rank, 1); EXPECT_EQ(out.stride, 4);
}

TEST(DeviceTeams, RankInDifference) {
  // world {0..7} minus the rail {2, 6}: 0 1 3 4 5 7.
  ncclTeam w{8, 6, 1}, r{2, 1, 4};
  const int want[] = {0, 1, 3, 4, 5, 7};
  for (int i = 0; i < 6; i++) EXPECT_EQ(ncclTeamRankInDifference(w, r, i), want[i]) << i;
  EXPECT_EQ(ncclTeamRankInDifference(w, r, 6), -1);
  // world minus the odd ranks (this rank is world 3): 0 2 4 6.
  ncclTeam w3{8, 3, 1}, odd{4, 1, 2};
  const int even[] = {0, 2, 4, 6};
  for (int i = 0; i < 4; i++) EXPECT_EQ(ncclTeamRankInDifference(w3, odd, i), even[i]) << i;
}

TEST(DeviceSymPtr, ArithmeticInElements) {
  ncclWindow_vidmem w{};
  ncclSymPtr<uint32_t> p(&w, 64);
  ncclSymPtr<uint32_t> q = p + 5;
  EXPECT_EQ(q.offset, 84u);
  EXPECT_EQ(q - p, 5);
  q -= 2;
  EXPECT_EQ(q.offset, 76u);
  EXPECT_TRUE(q != p);
  EXPECT_TRUE((q - 3) == p);
  q += -1;
  EXPECT_EQ(q.offset, 72u);
  ncclSymPtr<char> c = q;   // conversion keeps the byte offset
  EXPECT_EQ(c.window, &w);
  EXPECT_EQ((c + 1).offset, 73u);
  EXPECT_EQ(ncclSymPtr<double>().window, nullptr);
  ncclTeamTagLsa lsa;
  ncclTeamTagWorld world;
  ncclTeamTagRail rail;
  (void)lsa, (void)world, (void)rail;
}

}  // namespace
