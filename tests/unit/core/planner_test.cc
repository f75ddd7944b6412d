// The planner on the fake GPU (core/planner.h, core/launch_plan.h): what a
// group's tasks become (work items, their tasks' sequence numbers, kernel
// launches) before anything launches, and tuning's side-stream choices
// recorded in the plan (planSideStreams: copy engines, side kernels).
// Hand-built communicators have no transports: the groups are planned with
// planSideStreams / planWorks and then dropped with ncclGroupSimulateEnd.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/core/comm.h"
#include "common/core/comm_plan.h"
#include "common/core/launch.h"
#include "common/core/planner.h"
#include "common/core/side_state.h"
#include "common/core/side_stream.h"
#include "common/core/tuning.h"
#include "device/kernels.h"
#include "fake_comm.h"
#include "fake_kernels.h"
#include "fake_gpu.h"
#include "uniccl.h"

namespace uniccl {
namespace {

// The plan a group end would make of the open group's communicators, built
// on demand (over the tasks each communicator recorded) and dropped
// with the group.
struct OpenPlan {
  std::unique_ptr<GroupPlan> group;
  CommPlan& of(ncclComm* c) {
    if (!group) group = std::make_unique<GroupPlan>();
    CommPlan* p = group->find(c);
    return p != nullptr ? *p : group->add(c);
  }
};

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
    plans.group.reset();
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    while (ncclGroupSimulateEnd(&sim) == ncclSuccess) {}
    delete comm;
    fake::reset();
  }
  // Ends the open group without launching (the plan is dropped with it:
  // its storage goes back to the communicator, cleared).
  void drop() {
    plans.group.reset();
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    ASSERT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess);
    EXPECT_TRUE(comm->tasks.empty());
    ASSERT_NE(comm->planStorage, nullptr);
    EXPECT_TRUE(comm->planStorage->tasks.empty());
    EXPECT_TRUE(comm->planStorage->launch.works.empty());
    EXPECT_TRUE(comm->planStorage->launch.launches.empty());
  }
  CommPlan& planOf(ncclComm* c) { return plans.of(c); }
  ncclResult_t allReduce(size_t count, ncclDataType_t t) {
    return ncclAllReduce(buf, buf, count, t, ncclSum, comm, stream);
  }

  static constexpr size_t kBytes = 1 << 20;
  void* buf = nullptr;
  uniccl_stream_t stream = nullptr;
  ncclComm* comm = nullptr;
  OpenPlan plans;
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
  ASSERT_EQ(planWorks(planOf(comm)), ncclSuccess);
  const LaunchPlan& p = planOf(comm).launch;

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
    EXPECT_EQ(p.workSeq[i], planOf(comm).tasks.colls[i].seq) << "work " << i;
  }
  EXPECT_EQ(p.workTask[4], 4);   // the send: the first p2p task, after the 4 collectives
  EXPECT_EQ(p.workSeq[4], planOf(comm).tasks.p2p[0].seq);

  ASSERT_EQ(p.launches.size(), 3u);
  EXPECT_EQ(p.launches[0].firstWork, 0u);
  EXPECT_EQ(p.launches[0].nWorks, 2u);
  // Small collectives: all on LL, one kernel per datatype and protocol.
  for (size_t i = 0; i < 4; i++) EXPECT_EQ(p.works[i].proto, dev::kProtoLL) << "work " << i;
  EXPECT_EQ(p.launches[0].kernel, dev::collectiveKernel(ncclFloat32, dev::kProtoLL));
  EXPECT_EQ(p.launches[1].firstWork, 2u);
  EXPECT_EQ(p.launches[1].nWorks, 1u);
  EXPECT_EQ(p.launches[1].kernel, dev::collectiveKernel(ncclBfloat16, dev::kProtoLL));
  EXPECT_EQ(p.launches[2].firstWork, 3u);
  EXPECT_EQ(p.launches[2].nWorks, 2u);   // the last AllReduce and the p2p item
  EXPECT_EQ(p.launches[2].kernel, dev::collectiveKernel(ncclFloat32, dev::kProtoLL));
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
  ASSERT_EQ(planWorks(planOf(comm)), ncclSuccess);
  ASSERT_EQ(planOf(comm).launch.launches.size(), 1u);
  EXPECT_EQ(planOf(comm).launch.launches[0].kernel, dev::p2pKernel());
  drop();

  const size_t n = 2 * kMaxWorksPerLaunch + 7;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (size_t i = 0; i < n; i++) ASSERT_EQ(allReduce(1 + i % 9, ncclFloat32), ncclSuccess);
  ASSERT_EQ(planWorks(planOf(comm)), ncclSuccess);
  const LaunchPlan& p = planOf(comm).launch;
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
  EXPECT_EQ(planWorks(planOf(comm)), ncclInvalidUsage);
  drop();
}


// ---------------------------------------------------------------- side streams
// Tuning's side-stream choices (core/tuning.h, planSideStreams) as the plan
// records them (SidePlan): which tasks leave the kernels, the copies they
// become (what, when, on which stream), and the works the planner then
// makes of the rest. The default knobs (read from an empty environment)
// give the documented thresholds: 8 MiB for copy engines and messages to
// itself, 512 MiB for the AllReduce split (the tests take that one lower:
// meson's MALLOC_PERTURB_ fills the fake GPU's allocations).
class SidePlanTest : public ::testing::Test {
 protected:
  static constexpr size_t kMiB = 1 << 20;
  static constexpr size_t kBufBytes = 20 * kMiB;

  void SetUp() override {
    for (const char* k : kKnobs) unsetenv(k);
    fake::reset();
    fake::setAutoComplete(true);
    ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
    for (int i = 0; i < 2; i++) {
      gpu::Stream s = nullptr;
      ASSERT_EQ(gpu::streamCreate(&s), ncclSuccess);
      streams[i] = static_cast<uniccl_stream_t>(s);
      ASSERT_EQ(gpu::deviceAlloc(&send[i], kBufBytes), ncclSuccess);
      ASSERT_EQ(gpu::deviceAlloc(&recv[i], kBufBytes), ncclSuccess);
    }
    knobs = readSideStreamKnobs();
  }
  void TearDown() override {
    plans.group.reset();
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    while (ncclGroupSimulateEnd(&sim) == ncclSuccess) {}
    for (ncclComm* c : comms) delete c;
    for (const char* k : kKnobs) unsetenv(k);
    fake::reset();
  }
  // n ranks of one communicator on the fake GPU 0, every pair over P2P.
  void makeComms(int n, uint64_t hash = 0x5eed) {
    for (int r = 0; r < n; r++) {
      ncclComm* c = test::makeFakeComm(r, n, hash);
      c->nChannels = 4;
      c->peers.resize(n);
      for (PeerInfo& p : c->peers) p.hostHash = 0x1234;
      c->transports.setReachForTesting(n, std::vector<uint8_t>((size_t)n * n, 1));
      comms.push_back(c);
    }
  }
  // The group plan of `cs` (in that order), and tuning's side-stream
  // choices in it; ceComms: the communicators matched for copy engines.
  ncclResult_t plan(const std::vector<ncclComm*>& cs) {
    for (ncclComm* c : cs) plans.of(c);
    const ncclResult_t res = planSideStreams(*plans.group, knobs);
    ceComms.clear();
    for (const CommPlan& p : *plans.group)
      if (p.side.ceMatched) ceComms.push_back(p.comm);
    return res;
  }
  CommPlan& planOf(ncclComm* c) { return plans.of(c); }
  // Ends the open group without launching; the plans go with it.
  void drop() {
    plans.group.reset();
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    ASSERT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess);
  }
  void expectNoSideWork(ncclComm* c) {
    const SidePlan& side = planOf(c).side;
    EXPECT_TRUE(side.empty()) << "rank " << c->rank;
    EXPECT_TRUE(side.collPath.empty()) << "rank " << c->rank;
    EXPECT_TRUE(side.p2pPath.empty()) << "rank " << c->rank;
    EXPECT_EQ(side.stream, nullptr) << "rank " << c->rank;
    EXPECT_FALSE(side.forksKernel()) << "rank " << c->rank;
  }
  char* sendAt(int r, size_t off = 0) { return static_cast<char*>(send[r]) + off; }
  char* recvAt(int r, size_t off = 0) { return static_cast<char*>(recv[r]) + off; }

  static constexpr const char* kKnobs[] = {
      "UNICCL_COPY_ENGINE",       "UNICCL_COPY_ENGINE_MIN_BYTES", "UNICCL_COPY_ENGINE_ALLREDUCE_MIN_BYTES",
      "UNICCL_SELF_COPY_BLOCKS",  "UNICCL_SELF_COPY_MIN_BYTES",   "UNICCL_SELF_COPY_GRAPH_MIN_BYTES"};
  std::vector<ncclComm*> comms;
  std::vector<ncclComm*> ceComms;
  OpenPlan plans;
  uniccl_stream_t streams[2] = {};
  void* send[2] = {};
  void* recv[2] = {};
  SideStreamKnobs knobs;
};

TEST_F(SidePlanTest, DefaultKnobs) {
  EXPECT_TRUE(knobs.copyEngine);
  EXPECT_EQ(knobs.copyEngineMinBytes, 8 * kMiB);
  EXPECT_EQ(knobs.allReduceMinBytes, 512 * kMiB);
  EXPECT_EQ(knobs.selfCopyBlocks, 64u);
  EXPECT_EQ(knobs.selfCopyMinBytes, 8 * kMiB);
  EXPECT_EQ(knobs.selfCopyGraphMinBytes, 64u << 10);
}

// A send from rank 0 with its recv on rank 1 in one group: one peer copy on
// rank 0's side stream, recorded in both plans; the tasks need no kernel
// and no connection. Below 8 MiB the kernels keep it.
TEST_F(SidePlanTest, SendRecvOverCopyEngine) {
  makeComms(2);
  const size_t n = 8 * kMiB / 4;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(send[0], n, ncclFloat32, 1, comms[0], streams[0]), ncclSuccess);
  ASSERT_EQ(ncclRecv(recv[1], n, ncclFloat32, 0, comms[1], streams[1]), ncclSuccess);
  ASSERT_EQ(plan(comms), ncclSuccess);
  EXPECT_EQ(ceComms.size(), 2u);
  for (int r = 0; r < 2; r++) {
    const SidePlan& side = planOf(comms[r]).side;
    EXPECT_EQ(side.stream, static_cast<gpu::Stream>(streams[r]));
    ASSERT_EQ(side.p2pPath.size(), 1u);
    EXPECT_EQ(side.p2pPath[0], TaskPath::CopyEngine);
    ASSERT_EQ(side.copies.size(), 1u);
    const SideCopy& x = side.copies[0];
    EXPECT_EQ(x.what, SideWhat::SendRecv);
    EXPECT_EQ(x.when, SideWhen::WithKernels);
    EXPECT_EQ(x.on, SideOn::SideStream);
    EXPECT_EQ(x.from->comm, comms[0]);
    EXPECT_EQ(x.to->comm, comms[1]);
    EXPECT_EQ(x.src, send[0]);
    EXPECT_EQ(x.dst, recv[1]);
    EXPECT_EQ(x.bytes, 8 * kMiB);
    EXPECT_FALSE(side.forksKernel());
    std::vector<PeerNeed> peers;
    peersToConnect(planOf(comms[r]), &peers);
    EXPECT_TRUE(peers.empty());
    ASSERT_EQ(planWorks(planOf(comms[r])), ncclSuccess);
    EXPECT_TRUE(planOf(comms[r]).launch.works.empty());
  }
  drop();

  for (ncclComm* c : comms) c->sideState->streams.copyEngineOff = false;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(send[0], n - 1, ncclFloat32, 1, comms[0], streams[0]), ncclSuccess);
  ASSERT_EQ(ncclRecv(recv[1], n - 1, ncclFloat32, 0, comms[1], streams[1]), ncclSuccess);
  ASSERT_EQ(plan(comms), ncclSuccess);
  EXPECT_TRUE(ceComms.empty());
  for (ncclComm* c : comms) {
    expectNoSideWork(c);
    ASSERT_EQ(planWorks(planOf(c)), ncclSuccess);
    EXPECT_EQ(planOf(c).launch.works.size(), 1u);
  }
  drop();
}

// The matching rules stay with the mechanism, the choices with tuning: a
// recv posted before the group on one side (counts disagree), a sender that
// fans out to two peers, and a size mismatch all keep the kernels.
TEST_F(SidePlanTest, SendRecvKeepsKernelsWhenNotMatched) {
  makeComms(3);
  const size_t n = 8 * kMiB / 4;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(send[0], n, ncclFloat32, 1, comms[0], streams[0]), ncclSuccess);
  ASSERT_EQ(ncclRecv(recv[1], n, ncclFloat32, 0, comms[1], streams[1]), ncclSuccess);
  ensurePostedCounters(&comms[1]->sideState->streams, comms[1]->nRanks);
  comms[1]->sideState->streams.recvdFrom[0] = 1;   // a recv from rank 0 posted in an earlier group
  ASSERT_EQ(plan(comms), ncclSuccess);
  for (ncclComm* c : comms) expectNoSideWork(c);
  drop();

  for (ncclComm* c : comms) c->sideState->streams.copyEngineOff = false;
  comms[1]->sideState->streams.recvdFrom[0] = 0;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(send[0], n, ncclFloat32, 1, comms[0], streams[0]), ncclSuccess);
  ASSERT_EQ(ncclRecv(recv[1], n, ncclFloat32, 0, comms[1], streams[1]), ncclSuccess);
  ASSERT_EQ(ncclSend(send[1], n, ncclFloat32, 2, comms[0], streams[0]), ncclSuccess);   // fan-out
  ASSERT_EQ(plan(comms), ncclSuccess);
  for (ncclComm* c : comms) expectNoSideWork(c);
  drop();

  for (ncclComm* c : comms) c->sideState->streams.copyEngineOff = false;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(send[0], n, ncclFloat32, 1, comms[0], streams[0]), ncclSuccess);
  ASSERT_EQ(ncclRecv(recv[1], n + 1, ncclFloat32, 0, comms[1], streams[1]), ncclSuccess);
  ASSERT_EQ(plan(comms), ncclSuccess);
  for (ncclComm* c : comms) expectNoSideWork(c);
  drop();
}

// A 2-rank Broadcast from rank 1, out of place: the root's side stream
// copies into rank 0's receive buffer, and the root copies its own buffer
// on its task stream; in place it has no local copy. No works remain.
TEST_F(SidePlanTest, TwoRankBroadcastOverCopyEngine) {
  makeComms(2);
  const size_t n = 8 * kMiB / 4;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++)
    ASSERT_EQ(ncclBroadcast(send[r], recv[r], n, ncclFloat32, 1, comms[r], streams[r]), ncclSuccess);
  ASSERT_EQ(plan(comms), ncclSuccess);
  const SidePlan& root = planOf(comms[1]).side;
  const SidePlan& other = planOf(comms[0]).side;
  ASSERT_EQ(root.copies.size(), 2u);
  EXPECT_EQ(root.copies[0].what, SideWhat::Broadcast);
  EXPECT_EQ(root.copies[0].on, SideOn::SideStream);
  EXPECT_EQ(root.copies[0].from->comm, comms[1]);
  EXPECT_EQ(root.copies[0].to->comm, comms[0]);
  EXPECT_EQ(root.copies[0].src, send[1]);
  EXPECT_EQ(root.copies[0].dst, recv[0]);
  EXPECT_EQ(root.copies[1].what, SideWhat::BroadcastLocal);
  EXPECT_EQ(root.copies[1].on, SideOn::TaskStream);
  EXPECT_EQ(root.copies[1].from->comm, comms[1]);
  EXPECT_EQ(root.copies[1].to->comm, comms[1]);
  EXPECT_EQ(root.copies[1].src, send[1]);
  EXPECT_EQ(root.copies[1].dst, recv[1]);
  ASSERT_EQ(other.copies.size(), 1u);
  EXPECT_EQ(other.copies[0].what, SideWhat::Broadcast);
  for (ncclComm* c : comms) {
    ASSERT_EQ(planOf(c).side.collPath.size(), 1u);
    EXPECT_EQ(planOf(c).side.collPath[0], TaskPath::CopyEngine);
    EXPECT_EQ(planOf(c).side.copies[0].when, SideWhen::WithKernels);
    EXPECT_EQ(planOf(c).side.copies[0].bytes, 8 * kMiB);
    ASSERT_EQ(planWorks(planOf(c)), ncclSuccess);
    EXPECT_TRUE(planOf(c).launch.works.empty());
  }
  drop();

  for (ncclComm* c : comms) c->sideState->streams.copyEngineOff = false;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++)
    ASSERT_EQ(ncclBroadcast(recv[r], recv[r], n, ncclFloat32, 0, comms[r], streams[r]), ncclSuccess);
  ASSERT_EQ(plan(comms), ncclSuccess);
  ASSERT_EQ(planOf(comms[0]).side.copies.size(), 1u);   // in place: no local copy
  EXPECT_EQ(planOf(comms[0]).side.copies[0].from->comm, comms[0]);
  drop();

  // More ranks: the ring stays better.
  std::vector<ncclComm*> three;
  makeComms(3, 0x3333);
  three.assign(comms.end() - 3, comms.end());
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 3; r++)
    ASSERT_EQ(ncclBroadcast(send[0], recv[0], n, ncclFloat32, 0, three[r], streams[0]), ncclSuccess);
  ASSERT_EQ(plan(three), ncclSuccess);
  for (ncclComm* c : three) expectNoSideWork(c);
  drop();
}

// A 2-rank AllReduce from UNICCL_COPY_ENGINE_ALLREDUCE_MIN_BYTES (16 MiB
// here): the task stays an AllReduce, the plan says ReduceScatterThenCopy,
// the kernels get NCCL's ReduceScatter of the half counts (rank 1 into the
// second half of its buffer), and each rank's half goes across after the
// kernels. An odd count stays whole, and so does one below the threshold.
TEST_F(SidePlanTest, TwoRankAllReduceSplit) {
  makeComms(2);
  knobs.allReduceMinBytes = 16 * kMiB;
  const size_t n = 16 * kMiB / 4, half = n / 2, halfBytes = half * 4;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++)
    ASSERT_EQ(ncclAllReduce(send[r], recv[r], n, ncclFloat32, ncclSum, comms[r], streams[r]), ncclSuccess);
  ASSERT_EQ(plan(comms), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    ncclComm* c = comms[r];
    const SidePlan& side = planOf(c).side;
    EXPECT_EQ(planOf(c).tasks.colls[0].kind, TaskKind::AllReduce);
    EXPECT_EQ(planOf(c).tasks.colls[0].count, n);
    ASSERT_EQ(side.collPath.size(), 1u);
    EXPECT_EQ(side.collPath[0], TaskPath::ReduceScatterThenCopy);
    ASSERT_EQ(side.copies.size(), 2u);
    for (const SideCopy& x : side.copies) {
      EXPECT_EQ(x.what, SideWhat::AllReduceHalf);
      EXPECT_EQ(x.when, SideWhen::AfterKernels);
      EXPECT_EQ(x.on, SideOn::SideStream);
      EXPECT_EQ(x.bytes, halfBytes);
    }
    EXPECT_EQ(side.copies[0].from->comm, comms[0]);
    EXPECT_EQ(side.copies[0].src, recv[0]);
    EXPECT_EQ(side.copies[0].dst, recv[1]);
    EXPECT_EQ(side.copies[1].from->comm, comms[1]);
    EXPECT_EQ(side.copies[1].src, recvAt(1, halfBytes));
    EXPECT_EQ(side.copies[1].dst, recvAt(0, halfBytes));
    ASSERT_EQ(planWorks(planOf(c)), ncclSuccess);
    ASSERT_EQ(planOf(c).launch.works.size(), 1u);
    const dev::Work& w = planOf(c).launch.works[0];
    EXPECT_EQ(w.coll, dev::kCollReduceScatter);
    EXPECT_EQ(w.c.count, half);
    EXPECT_EQ(w.c.sendbuff, send[r]);
    EXPECT_EQ(w.c.recvbuff, recvAt(r, r * halfBytes));
    EXPECT_EQ(planOf(c).launch.workSeq[0], planOf(c).tasks.colls[0].seq);
  }
  drop();

  for (size_t count : {n + 1, n - 2}) {
    for (ncclComm* c : comms) c->sideState->streams.copyEngineOff = false;
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; r++)
      ASSERT_EQ(ncclAllReduce(send[r], recv[r], count, ncclFloat32, ncclSum, comms[r], streams[r]), ncclSuccess);
    ASSERT_EQ(plan(comms), ncclSuccess);
    for (ncclComm* c : comms) expectNoSideWork(c);
    drop();
  }
}

// A large message to itself with other work for the kernels: a side kernel
// of UNICCL_SELF_COPY_BLOCKS blocks, and the group's kernel launches plainly
// (forksKernel). Alone in its group, or small, it stays with the kernels;
// in graph capture from 64 KiB.
TEST_F(SidePlanTest, SelfCopyKernel) {
  makeComms(4);
  ncclComm* c = comms[1];
  const std::vector<ncclComm*> group{c};
  const size_t n = 8 * kMiB / 4;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(send[0], n, ncclFloat32, 1, c, streams[0]), ncclSuccess);
  ASSERT_EQ(ncclSend(send[1], 10, ncclFloat32, 2, c, streams[0]), ncclSuccess);
  ASSERT_EQ(ncclRecv(recv[0], n, ncclFloat32, 1, c, streams[0]), ncclSuccess);
  ASSERT_EQ(plan(group), ncclSuccess);
  const SidePlan& side = planOf(c).side;
  EXPECT_EQ(side.stream, static_cast<gpu::Stream>(streams[0]));
  ASSERT_EQ(side.p2pPath.size(), 3u);
  EXPECT_EQ(side.p2pPath[0], TaskPath::SelfCopyKernel);
  EXPECT_EQ(side.p2pPath[1], TaskPath::Kernels);
  EXPECT_EQ(side.p2pPath[2], TaskPath::SelfCopyKernel);
  ASSERT_EQ(side.copies.size(), 1u);
  EXPECT_EQ(side.copies[0].what, SideWhat::SelfCopy);
  EXPECT_EQ(side.copies[0].when, SideWhen::WithKernels);
  EXPECT_EQ(side.copies[0].on, SideOn::SideStream);
  EXPECT_EQ(side.copies[0].from->comm, c);
  EXPECT_EQ(side.copies[0].to->comm, c);
  EXPECT_EQ(side.copies[0].src, send[0]);
  EXPECT_EQ(side.copies[0].dst, recv[0]);
  EXPECT_EQ(side.copies[0].bytes, 8 * kMiB);
  EXPECT_EQ(side.copies[0].blocks, 64u);
  EXPECT_TRUE(side.forksKernel());
  EXPECT_TRUE(ceComms.empty());
  ASSERT_EQ(planWorks(planOf(c)), ncclSuccess);
  ASSERT_EQ(planOf(c).launch.works.size(), 1u);   // the message to rank 2 only
  EXPECT_EQ(planOf(c).launch.works[0].p.sendPeer, 2);
  EXPECT_EQ(planOf(c).launch.works[0].p.recvPeer, -1);
  drop();

  // Alone: nothing else for the kernels.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(send[0], n, ncclFloat32, 1, c, streams[0]), ncclSuccess);
  ASSERT_EQ(ncclRecv(recv[0], n, ncclFloat32, 1, c, streams[0]), ncclSuccess);
  ASSERT_EQ(plan(group), ncclSuccess);
  expectNoSideWork(c);
  drop();

  // 64 KiB with other work: eager no, captured yes.
  for (bool capture : {false, true}) {
    if (capture) fake::beginCapture(static_cast<gpu::Stream>(streams[0]));
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclSend(send[0], 16384, ncclFloat32, 1, c, streams[0]), ncclSuccess);
    ASSERT_EQ(ncclRecv(recv[0], 16384, ncclFloat32, 1, c, streams[0]), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(send[1], recv[1], 10, ncclFloat32, ncclSum, c, streams[0]), ncclSuccess);
    ASSERT_EQ(checkTaskStreams(planOf(c)), ncclSuccess);
    ASSERT_EQ(plan(group), ncclSuccess);
    EXPECT_EQ(planOf(c).side.forksKernel(), capture);
    EXPECT_EQ(planOf(c).side.copies.size(), capture ? 1u : 0u);
    drop();
    if (capture) fake::endCapture(static_cast<gpu::Stream>(streams[0]));
  }
}

// The knobs from the environment: every case above in one group of two
// 2-rank communicators (send/recv and Broadcast on one, AllReduce on the
// other) and a message to itself on a third communicator; with low
// thresholds each is chosen, with UNICCL_COPY_ENGINE=0 and
// UNICCL_SELF_COPY_BLOCKS=0 none is, and every task keeps its work item.
TEST_F(SidePlanTest, KnobsTurnEachChoiceOnAndOff) {
  makeComms(2, 0x1111);
  makeComms(2, 0x2222);
  makeComms(3, 0x3333);
  const std::vector<ncclComm*> group{comms[0], comms[1], comms[2], comms[3], comms[4]};
  const size_t n = 4096;   // 16 KiB
  auto post = [&] {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclSend(sendAt(0), n, ncclFloat32, 1, comms[0], streams[0]), ncclSuccess);
    ASSERT_EQ(ncclRecv(recvAt(1), n, ncclFloat32, 0, comms[1], streams[1]), ncclSuccess);
    for (int r = 0; r < 2; r++) {
      ASSERT_EQ(ncclBroadcast(sendAt(r, kMiB), recvAt(r, kMiB), n, ncclFloat32, 0, comms[r], streams[r]),
                ncclSuccess);
      ASSERT_EQ(ncclAllReduce(sendAt(r, 2 * kMiB), recvAt(r, 2 * kMiB), n, ncclFloat32, ncclSum, comms[2 + r],
                              streams[r]),
                ncclSuccess);
    }
    ASSERT_EQ(ncclSend(sendAt(0, 3 * kMiB), n, ncclFloat32, 0, comms[2 + 2], streams[0]), ncclSuccess);
    ASSERT_EQ(ncclSend(sendAt(0, 4 * kMiB), 10, ncclFloat32, 1, comms[2 + 2], streams[0]), ncclSuccess);
    ASSERT_EQ(ncclRecv(recvAt(0, 3 * kMiB), n, ncclFloat32, 0, comms[2 + 2], streams[0]), ncclSuccess);
  };
  setenv("UNICCL_COPY_ENGINE_MIN_BYTES", "16384", 1);
  setenv("UNICCL_COPY_ENGINE_ALLREDUCE_MIN_BYTES", "16384", 1);
  setenv("UNICCL_SELF_COPY_MIN_BYTES", "16384", 1);
  setenv("UNICCL_SELF_COPY_BLOCKS", "5", 1);
  knobs = readSideStreamKnobs();
  post();
  ASSERT_EQ(plan(group), ncclSuccess);
  EXPECT_EQ(ceComms.size(), 5u);   // every comm with a large task took part in the matching
  ASSERT_EQ(planOf(comms[0]).side.copies.size(), 3u);
  EXPECT_EQ(planOf(comms[0]).side.copies[0].what, SideWhat::SendRecv);
  EXPECT_EQ(planOf(comms[0]).side.copies[1].what, SideWhat::Broadcast);
  EXPECT_EQ(planOf(comms[0]).side.copies[2].what, SideWhat::BroadcastLocal);   // out of place
  EXPECT_EQ(planOf(comms[2]).side.copies.size(), 2u);
  EXPECT_EQ(planOf(comms[2]).side.collPath[0], TaskPath::ReduceScatterThenCopy);
  // The third communicator took part in the matching, found no peer in the
  // group, and so may fork its message to itself.
  ASSERT_EQ(planOf(comms[4]).side.copies.size(), 1u);
  EXPECT_EQ(planOf(comms[4]).side.copies[0].what, SideWhat::SelfCopy);
  EXPECT_EQ(planOf(comms[4]).side.copies[0].blocks, 5u);
  drop();

  setenv("UNICCL_COPY_ENGINE", "0", 1);
  setenv("UNICCL_SELF_COPY_BLOCKS", "0", 1);
  knobs = readSideStreamKnobs();
  for (ncclComm* c : comms) c->sideState->streams.copyEngineOff = false;
  post();
  ASSERT_EQ(plan(group), ncclSuccess);
  EXPECT_TRUE(ceComms.empty());
  const size_t works[] = {2, 2, 1, 1, 2};   // per comm: every task on the kernels
  for (size_t i = 0; i < group.size(); i++) {
    expectNoSideWork(group[i]);
    ASSERT_EQ(planWorks(planOf(group[i])), ncclSuccess);
    EXPECT_EQ(planOf(group[i]).launch.works.size(), works[i]) << "comm " << i;
  }
  drop();
}

}  // namespace
}  // namespace uniccl


namespace uniccl {
// Symmetric collectives run on kernels of their own (device/kernel.h,
// KernelKind): a launch holds one datatype and one kind, and p2p items
// never ride with a symmetric launch (its kernel does not run them).
TEST(PlanLaunches, SymmetricWorksGetTheirOwnKernels) {
  auto coll = [](ncclDataType_t dt, bool sym) {
    dev::Work w{};
    w.coll = dev::kCollAllReduce;
    w.c.dtype = (uint8_t)dt;
    w.c.algo = sym ? dev::kAlgoSymmetric : dev::kAlgoRing;
    w.channelHi = sym ? 3 : 1;
    return w;
  };
  dev::Work p2p{};
  p2p.coll = dev::kCollP2p;
  LaunchPlan plan;
  plan.works = {coll(ncclFloat32, false), coll(ncclFloat32, true), coll(ncclFloat32, true),
                coll(ncclBfloat16, true), coll(ncclFloat32, false), p2p};
  plan.nColl = 5;
  ASSERT_EQ(planLaunches(&plan), ncclSuccess);
  ASSERT_EQ(plan.launches.size(), 4u);
  const struct { uint32_t first, n; const void* kernel; unsigned grid; } want[] = {
      {0, 1, dev::collectiveKernel(ncclFloat32, dev::kProtoLL), 2}, {1, 2, dev::symmetricKernel(ncclFloat32), 4},
      {3, 1, dev::symmetricKernel(ncclBfloat16), 4}, {4, 2, dev::collectiveKernel(ncclFloat32, dev::kProtoLL), 2}};
  for (size_t i = 0; i < 4; i++) {
    EXPECT_EQ(plan.launches[i].firstWork, want[i].first) << i;
    EXPECT_EQ(plan.launches[i].nWorks, want[i].n) << i;
    EXPECT_EQ(plan.launches[i].kernel, want[i].kernel) << i;
    EXPECT_EQ(plan.launches[i].grid, want[i].grid) << i;
  }
  EXPECT_NE(dev::symmetricKernel(ncclFloat32), dev::collectiveKernel(ncclFloat32, dev::kProtoLL));

  // A symmetric collective last: the p2p items go to the p2p kernel.
  LaunchPlan tail;
  tail.works = {coll(ncclFloat32, true), p2p, p2p};
  tail.nColl = 1;
  ASSERT_EQ(planLaunches(&tail), ncclSuccess);
  ASSERT_EQ(tail.launches.size(), 2u);
  EXPECT_EQ(tail.launches[0].kernel, dev::symmetricKernel(ncclFloat32));
  EXPECT_EQ(tail.launches[0].nWorks, 1u);
  EXPECT_EQ(tail.launches[1].kernel, dev::p2pKernel());
  EXPECT_EQ(tail.launches[1].firstWork, 1u);
  EXPECT_EQ(tail.launches[1].nWorks, 2u);
}

// One collective kernel per datatype and protocol (device/kernel_coll.in):
// a protocol change starts a launch on the other protocol's kernel, and p2p
// items ride with the last one.
TEST(PlanLaunches, EachProtocolRunsOnItsOwnKernel) {
  auto coll = [](uint8_t proto) {
    dev::Work w{};
    w.coll = dev::kCollAllReduce;
    w.c.dtype = (uint8_t)ncclFloat32;
    w.c.algo = dev::kAlgoRing;
    w.proto = proto;
    return w;
  };
  dev::Work p2p{};
  p2p.coll = dev::kCollP2p;
  LaunchPlan plan;
  plan.works = {coll(dev::kProtoLL), coll(dev::kProtoLL), coll(dev::kProtoSimple), coll(dev::kProtoLL128), p2p};
  plan.nColl = 4;
  ASSERT_EQ(planLaunches(&plan), ncclSuccess);
  ASSERT_EQ(plan.launches.size(), 3u);
  const struct { uint32_t first, n; int proto; } want[] = {
      {0, 2, dev::kProtoLL}, {2, 1, dev::kProtoSimple}, {3, 2, dev::kProtoLL128}};
  for (size_t i = 0; i < 3; i++) {
    EXPECT_EQ(plan.launches[i].firstWork, want[i].first) << i;
    EXPECT_EQ(plan.launches[i].nWorks, want[i].n) << i;
    EXPECT_EQ(plan.launches[i].kernel, dev::collectiveKernel(ncclFloat32, want[i].proto)) << i;
  }
}

// The kernels carry code only for what the tuner chooses (dev_types.h,
// collKernelRuns): an item outside that set is refused, never launched.
TEST(PlanLaunches, RefusesItemsTheKernelsHaveNoCodeFor) {
  dev::Work w{};
  w.coll = dev::kCollAllReduce;
  w.c.dtype = (uint8_t)ncclFloat32;
  w.c.algo = dev::kAlgoRing;
  w.proto = dev::kProtoSimple;
  w.c.exchange = 1;   // the exchange AllReduce runs on LL and Simple only
  LaunchPlan plan;
  plan.works = {w};
  plan.nColl = 1;
  EXPECT_EQ(planLaunches(&plan), ncclSuccess);
  w.proto = dev::kProtoLL128;
  plan = LaunchPlan{};
  plan.works = {w};
  plan.nColl = 1;
  EXPECT_EQ(planLaunches(&plan), ncclInternalError);
  EXPECT_TRUE(plan.launches.empty());
  w.proto = dev::kProtoSimple;
  w.c.exchange = 0;
  w.c.redOp = dev::kOpSumPostDiv;   // ncclAvg over floats is a PreMulSum
  plan.works = {w};
  EXPECT_EQ(planLaunches(&plan), ncclInternalError);
  w.c.dtype = (uint8_t)ncclInt32;
  plan.works = {w};
  EXPECT_EQ(planLaunches(&plan), ncclSuccess);
}


// A build whose kernels left reduction ops out (-Dkernel_ops) refuses the
// collectives that need them, and the reducing receives of PAT too, with a
// message saying how to rebuild; what it has still plans.
TEST(PlanLaunches, RefusesOpsTheBuildLeftOut) {
  struct RestoreOps {
    ~RestoreOps() { dev::fakeKernelOps = (1u << dev::kNumRedOps) - 1; }
  } restore;
  dev::fakeKernelOps = 1u << dev::kOpSum;
  dev::Work w{};
  w.coll = dev::kCollAllReduce;
  w.c.dtype = (uint8_t)ncclFloat32;
  w.c.algo = dev::kAlgoRing;
  w.proto = dev::kProtoSimple;
  w.c.redOp = dev::kOpMax;
  LaunchPlan plan;
  plan.works = {w};
  plan.nColl = 1;
  EXPECT_EQ(planLaunches(&plan), ncclInvalidUsage);
  EXPECT_TRUE(plan.launches.empty());
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("-Dkernel_ops"), std::string::npos) << ncclGetLastError(nullptr);
  w.coll = dev::kCollAllGather;   // copies only: no op to run
  plan.works = {w};
  EXPECT_EQ(planLaunches(&plan), ncclSuccess);
  w.coll = dev::kCollReduceScatter;
  w.c.redOp = dev::kOpSum;
  plan.works = {w};
  plan.launches.clear();
  EXPECT_EQ(planLaunches(&plan), ncclSuccess);

  dev::Work r{};
  r.coll = dev::kCollP2p;
  r.channelHi = 0;
  r.p.sendPeer = -1;
  r.p.recvPeer = 1;
  r.p.recvBytes = 64;
  r.p.recvProto = dev::p2pReduceRecvProto(dev::kOpMin);
  LaunchPlan pat;
  pat.works = {r};
  pat.nColl = 0;
  EXPECT_EQ(planLaunches(&pat), ncclInvalidUsage);
}

// A launch of small p2p messages only is short whatever its grid
// (launch.h, shortP2pLaunch): it lets the next launch start early.
TEST(PlanLaunches, ShortP2pLaunches) {
  auto p2p = [](int sendPeer, uint64_t sendBytes, int recvPeer, uint64_t recvBytes) {
    dev::Work w{};
    w.coll = dev::kCollP2p;
    w.p.sendPeer = sendPeer;
    w.p.sendBytes = sendBytes;
    w.p.recvPeer = recvPeer;
    w.p.recvBytes = recvBytes;
    return w;
  };
  const dev::Work small[] = {p2p(0, 0, 0, 0), p2p(1, 1, 3, kShortP2pBytes), p2p(2, kShortP2pBytes, -1, 0)};
  EXPECT_TRUE(shortP2pLaunch(small, 3));
  EXPECT_FALSE(shortP2pLaunch(small, 0));
  // One message over the bound (either half) makes the launch long.
  const dev::Work bigSend[] = {p2p(1, 16, 3, 16), p2p(2, kShortP2pBytes + 1, 2, 16)};
  EXPECT_FALSE(shortP2pLaunch(bigSend, 2));
  const dev::Work bigRecv[] = {p2p(1, 16, 3, kShortP2pBytes + 1)};
  EXPECT_FALSE(shortP2pLaunch(bigRecv, 1));
  // An absent half's size does not count.
  const dev::Work recvOnly[] = {p2p(-1, 1ull << 40, 3, 16)};
  EXPECT_TRUE(shortP2pLaunch(recvOnly, 1));
  // Collectives are never short here (their own grid decides).
  dev::Work coll{};
  coll.coll = dev::kCollAllReduce;
  const dev::Work mixed[] = {small[1], coll};
  EXPECT_FALSE(shortP2pLaunch(mixed, 2));
}

}  // namespace uniccl
