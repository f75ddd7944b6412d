// The planner on the fake GPU (core/planner.h, core/launch_plan.h): what a
// group's tasks become (work items, their tasks' sequence numbers, kernel
// launches) before anything launches. Hand-built communicators have no
// transports: the groups are planned with planWorks and then dropped with
// ncclGroupSimulateEnd.
#include <gtest/gtest.h>

#include <vector>

#include "common/core/comm.h"
#include "common/core/launch.h"
#include "common/core/planner.h"
#include "device/kernels.h"
#include "fake_comm.h"
#include "fake_gpu.h"
#include "uniccl.h"

namespace uniccl {
namespace {

class Planner : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::setAutoComplete(true);
    ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
    gpu::Stream s = nullptr;
    ASSERT_EQ(gpu::streamCreate(&s), ncclSuccess);
    stream = static_cast<uniccl_stream_t>(s);
    ASSERT_EQ(gpu::deviceAlloc(&buf, kBytes), ncclSuccess);
    comm = test::makeFakeComm(/*rank=*/1, /*nRanks=*/4);
    comm->nChannels = 4;
    // Four GPUs that reach each other, no transports wired: the p2p
    // protocol choice asks for the transport kind between two ranks.
    comm->peers.resize(4);
    for (PeerInfo& p : comm->peers) p.hostHash = 0x1234;
    comm->transports.setReachForTesting(4, std::vector<uint8_t>(16, 1));
  }
  void TearDown() override {
    // A failed assertion leaves its group open: close it, so that the next
    // test starts without this one's tasks.
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    while (ncclGroupSimulateEnd(&sim) == ncclSuccess) {}
    delete comm;
    fake::reset();
  }
  // Ends the open group without launching (the plan is dropped with it).
  void drop() {
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    ASSERT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess);
    EXPECT_TRUE(comm->tasks.empty());
    EXPECT_TRUE(comm->plan.works.empty());
    EXPECT_TRUE(comm->plan.launches.empty());
  }
  ncclResult_t allReduce(size_t count, ncclDataType_t t) {
    return ncclAllReduce(buf, buf, count, t, ncclSum, comm, stream);
  }

  static constexpr size_t kBytes = 1 << 20;
  void* buf = nullptr;
  uniccl_stream_t stream = nullptr;
  ncclComm* comm = nullptr;
};

// Consecutive collectives of one datatype share a launch, a new datatype
// starts one, p2p rounds ride along with the last kernel; every work item
// carries its own task's sequence number (the watchdog's message names it).
TEST_F(Planner, GroupsWorksIntoLaunchesByDatatype) {
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(allReduce(1000, ncclFloat32), ncclSuccess);
  ASSERT_EQ(allReduce(3, ncclFloat32), ncclSuccess);
  ASSERT_EQ(ncclBroadcast(buf, buf, 77, ncclBfloat16, 2, comm, stream), ncclSuccess);
  ASSERT_EQ(allReduce(5, ncclFloat32), ncclSuccess);
  ASSERT_EQ(ncclSend(buf, 10, ncclInt8, 2, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclRecv(buf, 10, ncclInt8, 0, comm, stream), ncclSuccess);
  ASSERT_EQ(planWorks(comm), ncclSuccess);
  const LaunchPlan& p = comm->plan;

  ASSERT_EQ(p.nColl, 4u);
  ASSERT_EQ(p.works.size(), p.workSeq.size());
  ASSERT_EQ(p.works.size(), p.workTask.size());
  // Rank 1 of 4 sends to 2 (round 1) and receives from 0 (round 1): one item.
  ASSERT_EQ(p.works.size(), 5u);
  EXPECT_EQ(p.works[0].coll, dev::kCollAllReduce);
  EXPECT_EQ(p.works[0].c.count, 1000u);
  EXPECT_EQ(p.works[2].coll, dev::kCollBroadcast);
  EXPECT_EQ(p.works[2].c.root, 2);
  EXPECT_EQ(p.works[4].coll, dev::kCollP2p);
  EXPECT_EQ(p.works[4].p.sendPeer, 2);
  EXPECT_EQ(p.works[4].p.recvPeer, 0);
  for (size_t i = 0; i < 4; i++) {
    EXPECT_EQ(p.workTask[i], (int)i);
    EXPECT_EQ(p.workSeq[i], comm->tasks.colls[i].seq) << "work " << i;
  }
  EXPECT_EQ(p.workTask[4], 4);   // the send: the first p2p task, after the 4 collectives
  EXPECT_EQ(p.workSeq[4], comm->tasks.p2p[0].seq);

  ASSERT_EQ(p.launches.size(), 3u);
  EXPECT_EQ(p.launches[0].firstWork, 0u);
  EXPECT_EQ(p.launches[0].nWorks, 2u);
  EXPECT_EQ(p.launches[0].kernel, dev::collectiveKernel(ncclFloat32));
  EXPECT_EQ(p.launches[1].firstWork, 2u);
  EXPECT_EQ(p.launches[1].nWorks, 1u);
  EXPECT_EQ(p.launches[1].kernel, dev::collectiveKernel(ncclBfloat16));
  EXPECT_EQ(p.launches[2].firstWork, 3u);
  EXPECT_EQ(p.launches[2].nWorks, 2u);   // the last AllReduce and the p2p item
  EXPECT_EQ(p.launches[2].kernel, dev::collectiveKernel(ncclFloat32));
  for (const KernelLaunch& L : p.launches) {
    unsigned grid = 0;
    for (uint32_t i = L.firstWork; i < L.firstWork + L.nWorks; i++)
      grid = std::max(grid, (unsigned)p.works[i].channelHi + 1);
    EXPECT_EQ(L.grid, grid);
    EXPECT_GE(L.grid, 1u);
  }
  drop();
}

// A group of only p2p goes to the p2p kernel; over kMaxWorksPerLaunch items
// split into several launches that cover every item once, in order.
TEST_F(Planner, SplitsLongGroupsAndUsesTheP2pKernel) {
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(buf, 4, ncclFloat32, 3, comm, stream), ncclSuccess);
  ASSERT_EQ(planWorks(comm), ncclSuccess);
  ASSERT_EQ(comm->plan.launches.size(), 1u);
  EXPECT_EQ(comm->plan.launches[0].kernel, dev::p2pKernel());
  drop();

  const size_t n = 2 * kMaxWorksPerLaunch + 7;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (size_t i = 0; i < n; i++) ASSERT_EQ(allReduce(1 + i % 9, ncclFloat32), ncclSuccess);
  ASSERT_EQ(planWorks(comm), ncclSuccess);
  const LaunchPlan& p = comm->plan;
  ASSERT_EQ(p.launches.size(), 3u);
  uint32_t next = 0;
  for (const KernelLaunch& L : p.launches) {
    EXPECT_EQ(L.firstWork, next);
    EXPECT_LE(L.nWorks, kMaxWorksPerLaunch);
    next += L.nWorks;
  }
  EXPECT_EQ(next, n);
  for (size_t i = 1; i < n; i++) EXPECT_GT(p.workSeq[i], p.workSeq[i - 1]);
  drop();
}

// A send to itself without its recv is refused by the planner, and the
// group leaves nothing behind.
TEST_F(Planner, RefusesAnUnpairedMessageToItself) {
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(buf, 4, ncclFloat32, 1, comm, stream), ncclSuccess);
  EXPECT_EQ(planWorks(comm), ncclInvalidUsage);
  drop();
}

}  // namespace
}  // namespace uniccl
