// In-place AlltoAll staging on the fake GPU (core/inplace_stage.h). Hand-built
// communicators have no transports, so multi-rank groups are recorded and
// staged here (stageInPlaceSends / finishInPlaceStaging on a group plan, as
// the group end calls them) and then dropped with ncclGroupSimulateEnd;
// one-rank groups run through ncclGroupEnd. The fake's memcpyAsync copies at once: the staged bytes are
// checked against fresh random data.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/core/comm.h"
#include "common/core/comm_plan.h"
#include "common/core/inplace_stage.h"
#include "common/core/graph_buffers.h"
#include "common/core/launch.h"
#include "common/core/side_state.h"
#include "fake_comm.h"
#include "fake_gpu.h"
#include "uniccl.h"

namespace uniccl {
namespace {

const UseDevice kUseDevice = [](int dev) { return gpu::setDevice(dev); };

class InPlaceAlltoAll : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::setAutoComplete(true);
    ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
    gpu::Stream s = nullptr;
    ASSERT_EQ(gpu::streamCreate(&s), ncclSuccess);
    stream = static_cast<uniccl_stream_t>(s);
    ASSERT_EQ(gpu::streamCreate(&s), ncclSuccess);
    stream2 = static_cast<uniccl_stream_t>(s);
    ASSERT_EQ(gpu::deviceAlloc(&buf, kCap), ncclSuccess);
    base = fake::live();
  }
  void TearDown() override { fake::reset(); }

  // Records an in-place AlltoAll of `count` floats on comm (in an open
  // group, so nothing launches) and stages it; returns the staged tasks.
  void recordAndStage(ncclComm* comm, size_t count, uniccl_stream_t st) {
    data = test::randomBytes(comm->nRanks * count * sizeof(float), rng);
    std::memcpy(buf, data.data(), data.size());
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAlltoAll(buf, buf, count, ncclFloat32, comm, st), ncclSuccess);
    group = std::make_unique<GroupPlan>();
    group->add(comm);   // (the group end's checkTaskStreams is not run here: capture not known)
    ASSERT_EQ(stageInPlaceSends(*group, kUseDevice), ncclSuccess);
    ASSERT_EQ(finishInPlaceStaging(*group, kUseDevice), ncclSuccess);
  }
  void drop() {
    group.reset();
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    ASSERT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess);
  }
  // Every send of the AlltoAll reads the block for its peer from a copy
  // outside the user's buffer holding the original bytes; every recv writes
  // its block of the user's buffer; no message to itself.
  void expectStagedSends(const ncclComm* comm, size_t count) {
    const size_t chunk = count * sizeof(float);
    const char* user = static_cast<const char*>(buf);
    int sends = 0, recvs = 0;
    ASSERT_NE(group, nullptr);
    for (const Task& t : group->front().tasks.p2p) {
      EXPECT_NE(t.root, comm->rank);
      EXPECT_EQ(t.stage, 0u) << "the group end points every staged send at its copy";
      if (t.kind == TaskKind::Recv) {
        recvs++;
        EXPECT_EQ(t.recvbuff, user + t.root * chunk);
        continue;
      }
      sends++;
      const char* src = static_cast<const char*>(t.sendbuff);
      EXPECT_TRUE(src + chunk <= user || src >= user + comm->nRanks * chunk) << "send reads the user buffer";
      EXPECT_EQ(std::memcmp(src, data.data() + t.root * chunk, chunk), 0) << "send to " << t.root;
    }
    EXPECT_EQ(sends, comm->nRanks - 1);
    EXPECT_EQ(recvs, comm->nRanks - 1);
  }

  static constexpr size_t kCap = 1 << 22;
  std::mt19937 rng{424242};
  void* buf = nullptr;
  std::vector<unsigned char> data;
  uniccl_stream_t stream = nullptr, stream2 = nullptr;
  fake::Live base{};
  std::unique_ptr<GroupPlan> group;   // the group being staged
};

TEST_F(InPlaceAlltoAll, EveryRankSendsFromItsCopy) {
  for (int n : {2, 3, 4}) {
    for (int rank = 0; rank < n; rank++) {
      for (size_t count : {(size_t)1, (size_t)7, (size_t)1001}) {
        SCOPED_TRACE("rank " + std::to_string(rank) + "/" + std::to_string(n) + " count " + std::to_string(count));
        ncclComm* comm = test::makeFakeComm(rank, n);
        const uint64_t copies0 = fake::callCount("memcpyAsync");
        const uint64_t bytes0 = stagedBytes();
        recordAndStage(comm, count, stream);
        // The blocks below and above the own one: one copy each where present.
        EXPECT_EQ(fake::callCount("memcpyAsync") - copies0, (uint64_t)((rank > 0) + (rank < n - 1)));
        EXPECT_EQ(stagedBytes() - bytes0, (uint64_t)(n - 1) * count * sizeof(float));
        EXPECT_TRUE(group->front().tasks.colls.empty());
        expectStagedSends(comm, count);
        EXPECT_EQ(fake::launchCount(), 0u);
        drop();
        EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
      }
    }
  }
  // Destroy released every scratch buffer and event.
  EXPECT_EQ(fake::live().deviceAllocs, base.deviceAllocs);
  EXPECT_EQ(fake::live().events, base.events);
}

// The scratch is reused while it is large enough; a later group on another
// stream waits for the last group that read it; growing waits for it on the
// host before freeing the old buffer.
TEST_F(InPlaceAlltoAll, ScratchReuseGrowthAndOrder) {
  ncclComm* comm = test::makeFakeComm(0, 2);
  const uint64_t allocs0 = stagingAllocations();
  recordAndStage(comm, 1000, stream);
  drop();
  EXPECT_EQ(stagingAllocations(), allocs0 + 1);
  EXPECT_TRUE(comm->sideState->inPlace.freeRecorded);
  EXPECT_EQ(comm->sideState->inPlace.freeStream, static_cast<gpu::Stream>(stream));
  void* first = comm->sideState->inPlace.buf;

  uint64_t waits = fake::callCount("streamWaitEvent");
  recordAndStage(comm, 1000, stream);   // same stream: stream order suffices
  expectStagedSends(comm, 1000);
  drop();
  EXPECT_EQ(fake::callCount("streamWaitEvent"), waits);
  EXPECT_EQ(comm->sideState->inPlace.buf, first);

  recordAndStage(comm, 1000, stream2);   // another stream waits for the last reader
  expectStagedSends(comm, 1000);
  drop();
  EXPECT_EQ(fake::callCount("streamWaitEvent"), waits + 1);
  EXPECT_EQ(comm->sideState->inPlace.freeStream, static_cast<gpu::Stream>(stream2));
  EXPECT_EQ(stagingAllocations(), allocs0 + 1);

  const uint64_t syncs = fake::callCount("eventSynchronize");
  recordAndStage(comm, (kCap / sizeof(float)) / 2, stream);   // 2 MiB to send: grows past 1 MiB
  expectStagedSends(comm, (kCap / sizeof(float)) / 2);
  drop();
  EXPECT_EQ(fake::callCount("eventSynchronize"), syncs + 1);
  EXPECT_EQ(stagingAllocations(), allocs0 + 2);
  EXPECT_GE(comm->sideState->inPlace.bytes, kCap / 2);
  EXPECT_EQ(fake::live().deviceAllocs, base.deviceAllocs + 1) << "the old scratch was freed";
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  EXPECT_EQ(fake::live().deviceAllocs, base.deviceAllocs);
  EXPECT_EQ(fake::live().events, base.events);
}

// With ranks sharing the GPU a growing scratch frees nothing on the launch
// path (a device free waits for every kernel of the GPU, also the other
// ranks' that wait for this one): the old buffer goes with the comm.
TEST_F(InPlaceAlltoAll, SharedGpuGrowthFreesNothingUntilDestroy) {
  ncclComm* comm = test::makeFakeComm(0, 2);
  comm->gpuShared = true;
  recordAndStage(comm, 1000, stream);
  drop();
  const uint64_t frees = fake::callCount("deviceFree");
  const uint64_t syncs = fake::callCount("eventSynchronize");
  recordAndStage(comm, (kCap / sizeof(float)) / 2, stream);   // grows past 1 MiB
  expectStagedSends(comm, (kCap / sizeof(float)) / 2);
  drop();
  EXPECT_EQ(fake::callCount("deviceFree"), frees);
  EXPECT_EQ(fake::callCount("eventSynchronize"), syncs);
  EXPECT_EQ(fake::live().deviceAllocs, base.deviceAllocs + 2) << "old and new scratch both live";
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  EXPECT_EQ(fake::live().deviceAllocs, base.deviceAllocs);
}

// In graph capture the graph owns the copy's buffer (the comm's scratch is
// neither used nor grown): freed once the graph is destroyed.
TEST_F(InPlaceAlltoAll, CapturedStagingBelongsToTheGraph) {
  ncclComm* comm = test::makeFakeComm(1, 3);
  gpu::Graph g = fake::beginCapture(static_cast<gpu::Stream>(stream));
  recordAndStage(comm, 333, stream);
  expectStagedSends(comm, 333);
  drop();
  fake::endCapture(static_cast<gpu::Stream>(stream));
  EXPECT_EQ(comm->sideState->inPlace.buf, nullptr);
  EXPECT_FALSE(comm->sideState->inPlace.freeRecorded);
  EXPECT_EQ(fake::live().deviceAllocs, base.deviceAllocs + 1);
  EXPECT_EQ(fake::live().userObjects, base.userObjects + 1);
  fake::replayGraph(g);
  fake::destroyGraph(g);
  reclaimGraphBuffers();   // (the next ncclGroupEnd or destroy does it)
  EXPECT_EQ(fake::live().deviceAllocs, base.deviceAllocs);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// A failed call in the group leaves no staged range behind.
TEST_F(InPlaceAlltoAll, FailedGroupLeavesNothingStaged) {
  ncclComm* comm = test::makeFakeComm(0, 2);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAlltoAll(buf, buf, 16, ncclFloat32, comm, stream), ncclSuccess);
  EXPECT_EQ(comm->tasks.staged.size(), 1u);
  EXPECT_EQ(ncclAlltoAll(buf, buf, 16, (ncclDataType_t)77, comm, stream), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_TRUE(comm->tasks.empty());
  EXPECT_TRUE(comm->tasks.staged.empty());
  EXPECT_EQ(fake::callCount("memcpyAsync"), 0u);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// One rank: the only block is its own, already in place: nothing to do.
TEST_F(InPlaceAlltoAll, OneRankDoesNothing) {
  ncclComm* comm = test::makeFakeComm(0, 1);
  data = test::randomBytes(4096, rng);
  std::memcpy(buf, data.data(), data.size());
  ASSERT_EQ(ncclAlltoAll(buf, buf, 1024, ncclFloat32, comm, stream), ncclSuccess);
  EXPECT_EQ(fake::launchCount(), 0u);
  EXPECT_EQ(fake::callCount("memcpyAsync"), 0u);
  EXPECT_EQ(std::memcmp(buf, data.data(), data.size()), 0);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
}  // namespace uniccl
