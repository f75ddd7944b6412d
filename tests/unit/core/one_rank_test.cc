// Communicators of one rank on the fake GPU (core/one_rank.h): collectives
// and messages to itself are copies (gpu::memcpyAsync) or nothing, no kernel;
// PreMulSum ops still launch one; ordering, capture, groups of several
// communicators, ncclGroupSimulateEnd and the posted-task counters stay
// right. The fake's memcpyAsync copies at once, so the data are checked too.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/core/comm.h"
#include "common/core/one_rank.h"
#include "common/core/side_state.h"
#include "fake_comm.h"
#include "fake_gpu.h"
#include "uniccl.h"

namespace uniccl {
namespace {

constexpr size_t kCount = 4099;   // odd
constexpr size_t kBytes = kCount * sizeof(float);

class OneRank : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::setAutoComplete(true);   // launches finish at once: destroy never waits
    ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
    ASSERT_EQ(gpu::deviceAlloc(&send, kBytes), ncclSuccess);
    ASSERT_EQ(gpu::deviceAlloc(&recv, kBytes), ncclSuccess);
    gpu::Stream s = nullptr;
    ASSERT_EQ(gpu::streamCreate(&s), ncclSuccess);
    stream = static_cast<uniccl_stream_t>(s);
    ASSERT_EQ(gpu::streamCreate(&s), ncclSuccess);
    stream2 = static_cast<uniccl_stream_t>(s);
    comm = test::makeFakeComm(0, 1);
  }
  void TearDown() override {
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    fake::reset();
  }

  // Fresh random data in send and (different) in recv.
  void fill() {
    in = test::randomBytes(kBytes, rng);
    std::memcpy(send, in.data(), kBytes);
    std::vector<unsigned char> junk = test::randomBytes(kBytes, rng);
    std::memcpy(recv, junk.data(), kBytes);
  }
  bool recvHolds(const std::vector<unsigned char>& want, size_t bytes) const {
    return std::memcmp(recv, want.data(), bytes) == 0;
  }

  struct Counts {
    size_t launches;
    uint64_t copies, waits;
  };
  Counts counts() const {
    return {fake::launchCount(), fake::callCount("memcpyAsync"), fake::callCount("streamWaitEvent")};
  }

  std::mt19937 rng{20260421};
  ncclComm* comm = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  uniccl_stream_t stream = nullptr, stream2 = nullptr;
  std::vector<unsigned char> in;
};

TEST_F(OneRank, InPlaceAllReduceLaunchesNothingAndCopiesNothing) {
  fill();
  std::vector<unsigned char> before(static_cast<unsigned char*>(recv), static_cast<unsigned char*>(recv) + kBytes);
  const Counts c0 = counts();
  for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg})
    ASSERT_EQ(ncclAllReduce(recv, recv, kCount, ncclFloat32, op, comm, stream), ncclSuccess);
  const Counts c1 = counts();
  EXPECT_EQ(c1.launches, c0.launches);
  EXPECT_EQ(c1.copies, c0.copies);
  EXPECT_TRUE(recvHolds(before, kBytes));
  EXPECT_TRUE(comm->tasks.empty());
}

TEST_F(OneRank, OutOfPlaceAllReduceIsOneCopyAndNoKernel) {
  for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg}) {
    SCOPED_TRACE(op);
    fill();
    const Counts c0 = counts();
    const uint64_t copies0 = oneRankCopies();
    ASSERT_EQ(ncclAllReduce(send, recv, kCount, ncclFloat32, op, comm, stream), ncclSuccess);
    const Counts c1 = counts();
    EXPECT_EQ(c1.launches, c0.launches);
    EXPECT_EQ(c1.copies, c0.copies + 1);
    EXPECT_EQ(c1.waits, c0.waits) << "one stream: nothing to order";
    EXPECT_EQ(oneRankCopies(), copies0 + 1);
    EXPECT_TRUE(recvHolds(in, kBytes));
  }
  // Integer Avg (SumPostDiv by 1) is a copy too.
  fill();
  const Counts c0 = counts();
  ASSERT_EQ(ncclAllReduce(send, recv, kCount, ncclInt32, ncclAvg, comm, stream), ncclSuccess);
  EXPECT_EQ(counts().copies, c0.copies + 1);
  EXPECT_EQ(counts().launches, c0.launches);
  EXPECT_TRUE(recvHolds(in, kBytes));
}

TEST_F(OneRank, EveryCollectiveOutOfPlaceIsOneCopy) {
  struct Case {
    std::string name;
    std::function<ncclResult_t(size_t)> call;   // count -> result
  };
  const std::vector<Case> cases = {
      {"AllReduce", [&](size_t n) { return ncclAllReduce(send, recv, n, ncclBfloat16, ncclMax, comm, stream); }},
      {"Reduce", [&](size_t n) { return ncclReduce(send, recv, n, ncclBfloat16, ncclMin, 0, comm, stream); }},
      {"ReduceScatter", [&](size_t n) { return ncclReduceScatter(send, recv, n, ncclBfloat16, ncclSum, comm, stream); }},
      {"AllGather", [&](size_t n) { return ncclAllGather(send, recv, n, ncclBfloat16, comm, stream); }},
      {"Broadcast", [&](size_t n) { return ncclBroadcast(send, recv, n, ncclBfloat16, 0, comm, stream); }},
      {"AlltoAll", [&](size_t n) { return ncclAlltoAll(send, recv, n, ncclBfloat16, comm, stream); }},
      {"Gather", [&](size_t n) { return ncclGather(send, recv, n, ncclBfloat16, 0, comm, stream); }},
      {"Scatter", [&](size_t n) { return ncclScatter(send, recv, n, ncclBfloat16, 0, comm, stream); }},
      {"SendRecv", [&](size_t n) {
         ncclGroupStart();
         ncclSend(send, n, ncclBfloat16, 0, comm, stream);
         ncclRecv(recv, n, ncclBfloat16, 0, comm, stream);
         return ncclGroupEnd();
       }},
  };
  for (const Case& k : cases) {
    for (size_t n : {(size_t)1, (size_t)7, kCount, 2 * kCount}) {   // bf16: 2 * kCount fits
      SCOPED_TRACE(k.name + " count " + std::to_string(n));
      fill();
      const Counts c0 = counts();
      ASSERT_EQ(k.call(n), ncclSuccess) << ncclGetLastError(comm);
      EXPECT_EQ(counts().launches, c0.launches);
      EXPECT_EQ(counts().copies, c0.copies + 1);
      EXPECT_TRUE(recvHolds(in, n * 2));
      EXPECT_TRUE(comm->tasks.empty());
    }
    // Count 0: nothing at all.
    const Counts c0 = counts();
    ASSERT_EQ(k.call(0), ncclSuccess);
    EXPECT_EQ(counts().launches, c0.launches);
    EXPECT_EQ(counts().copies, c0.copies);
  }
}

TEST_F(OneRank, EveryCollectiveInPlaceDoesNothing) {
  fill();
  std::vector<unsigned char> before(static_cast<unsigned char*>(recv), static_cast<unsigned char*>(recv) + kBytes);
  const Counts c0 = counts();
  ASSERT_EQ(ncclReduce(recv, recv, kCount, ncclFloat32, ncclSum, 0, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclReduceScatter(recv, recv, kCount, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclAllGather(recv, recv, kCount, ncclFloat32, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclBcast(recv, kCount, ncclFloat32, 0, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclAlltoAll(recv, recv, kCount, ncclFloat32, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(recv, kCount, ncclFloat32, 0, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclRecv(recv, kCount, ncclFloat32, 0, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(counts().launches, c0.launches);
  EXPECT_EQ(counts().copies, c0.copies);
  EXPECT_TRUE(recvHolds(before, kBytes));
}

// A PreMulSum op scales by its scalar even on one rank: a kernel, no copy;
// a group holding one keeps all its tasks on the kernels (their order).
TEST_F(OneRank, PreMulSumRunsAKernel) {
  float scalar = 3.0f;
  ncclRedOp_t op;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess);
  for (bool inPlace : {false, true}) {
    const Counts c0 = counts();
    ASSERT_EQ(ncclAllReduce(inPlace ? recv : send, recv, kCount, ncclFloat32, op, comm, stream), ncclSuccess);
    EXPECT_EQ(counts().launches, c0.launches + 1);
    EXPECT_EQ(counts().copies, c0.copies);
  }
  const Counts c0 = counts();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclReduceScatter(recv, recv, kCount, ncclFloat32, op, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(counts().launches, c0.launches + 1);
  EXPECT_EQ(counts().copies, c0.copies);
  EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
}

// Graph capture: a copy is captured (the fake records it like any call), in
// place captures nothing; no kernel either way.
TEST_F(OneRank, CapturedCopiesAndInPlace) {
  fill();
  gpu::Graph g = fake::beginCapture(static_cast<gpu::Stream>(stream));
  const Counts c0 = counts();
  ASSERT_EQ(ncclAllReduce(recv, recv, kCount, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  EXPECT_EQ(counts().copies, c0.copies);
  ASSERT_EQ(ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  EXPECT_EQ(counts().copies, c0.copies + 1);
  EXPECT_EQ(counts().launches, c0.launches);
  fake::endCapture(static_cast<gpu::Stream>(stream));
  fake::destroyGraph(g);
  EXPECT_TRUE(recvHolds(in, kBytes));
}

// Several streams in one group: the copies go on the first one, after the
// others (it waits for them), and the others wait for the copies, as for a
// kernel launch. Later groups on another stream need no order (no kernel
// state to keep in issue order).
TEST_F(OneRank, SeveralStreamsInOneGroupAreJoined) {
  fill();
  const Counts c0 = counts();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(send, recv, kCount / 2, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclAllGather(static_cast<float*>(send) + kCount / 2, static_cast<float*>(recv) + kCount / 2,
                          kCount - kCount / 2, ncclFloat32, comm, stream2), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  const Counts c1 = counts();
  EXPECT_EQ(c1.copies, c0.copies + 2);
  EXPECT_EQ(c1.launches, c0.launches);
  EXPECT_GE(c1.waits, c0.waits + 2) << "stream waits for stream2 and stream2 for stream";
  EXPECT_TRUE(recvHolds(in, kBytes));
}

// Two one-rank communicators in one group (as a split into groups of one):
// each copies its own; ncclGroupSimulateEnd launches nothing; the counters
// of posted tasks keep counting every task.
TEST_F(OneRank, GroupsOfSeveralCommsAndSimulateEnd) {
  ncclComm* other = test::makeFakeComm(0, 1, 0xbeef);
  void* recv2 = nullptr;
  ASSERT_EQ(gpu::deviceAlloc(&recv2, kBytes), ncclSuccess);
  fill();
  const uint64_t posted0 = comm->sideState->streams.collsPosted;
  const Counts c0 = counts();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclBroadcast(send, recv2, kCount, ncclFloat32, 0, other, stream2), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(counts().copies, c0.copies + 2);
  EXPECT_EQ(counts().launches, c0.launches);
  EXPECT_TRUE(recvHolds(in, kBytes));
  EXPECT_EQ(std::memcmp(recv2, in.data(), kBytes), 0);
  EXPECT_EQ(comm->sideState->streams.collsPosted, posted0 + 1);

  const Counts c1 = counts();
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(send, recv2, kCount, ncclFloat32, ncclSum, other, stream), ncclSuccess);
  ASSERT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess);
  EXPECT_EQ(counts().copies, c1.copies);
  EXPECT_EQ(counts().launches, c1.launches);
  EXPECT_TRUE(comm->tasks.empty());
  EXPECT_TRUE(other->tasks.empty());
  EXPECT_EQ(ncclCommDestroy(other), ncclSuccess);
  (void)gpu::deviceFree(recv2);
}

// A failed call inside a group: nothing of the group is copied.
TEST_F(OneRank, FailedGroupCopiesNothing) {
  const Counts c0 = counts();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(send, recv, kCount, (ncclDataType_t)99, ncclSum, comm, stream), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_EQ(counts().copies, c0.copies);
  EXPECT_EQ(counts().launches, c0.launches);
}

// A send to itself without its recv is still refused (by the planner).
TEST_F(OneRank, UnpairedSelfSendIsRefused) {
  const Counts c0 = counts();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(send, kCount, ncclFloat32, 0, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclRecv(recv, kCount - 1, ncclFloat32, 0, comm, stream), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("pairs"), std::string::npos) << ncclGetLastError(comm);
  EXPECT_EQ(counts().copies, c0.copies);
  EXPECT_EQ(counts().launches, c0.launches);
  EXPECT_TRUE(comm->tasks.empty());
}

// A failing copy is the call's error, with the backend's message.
TEST_F(OneRank, FailedCopyIsReported) {
  fake::failNext("memcpyAsync");
  EXPECT_EQ(ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream), ncclUnhandledCudaError);
  EXPECT_TRUE(comm->tasks.empty());
  fill();
  ASSERT_EQ(ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  EXPECT_TRUE(recvHolds(in, kBytes));
}

}  // namespace
}  // namespace uniccl
