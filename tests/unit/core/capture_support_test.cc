// Graph capture where the runtime cannot record uniccl's launches (ROCm
// before 5.3: hipExtLaunchKernel is left out of the graph, so a captured
// collective would silently vanish): refused with ncclInvalidUsage and a
// message in ncclGetLastError, nothing enqueued; eager work still runs.
#include <gtest/gtest.h>

#include <string>

#include "fake_comm.h"
#include "fake_gpu.h"
#include "uniccl.h"

namespace uniccl {
namespace {

constexpr size_t kCount = 256;

class CaptureSupport : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::setAutoComplete(true);
    ASSERT_EQ(gpu::deviceAlloc(&buf, kCount * sizeof(float)), ncclSuccess);
    gpu::Stream s = nullptr;
    ASSERT_EQ(gpu::streamCreate(&s), ncclSuccess);
    stream = s;
    comm = test::makeFakeComm(0, 1);
  }
  void TearDown() override {
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    fake::reset();
  }
  void* buf = nullptr;
  gpu::Stream stream = nullptr;
  ncclComm* comm = nullptr;
};

TEST_F(CaptureSupport, CaptureRefusedWhereUnsupported) {
  fake::setCaptureSupported(false);
  fake::beginCapture(stream);
  const uint64_t copies = fake::callCount("memcpyAsync");
  float scale = 2.0f;
  ncclRedOp_t op;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scale, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess);
  // A kernel launch (PreMulSum) and a copy (one rank), each alone and in a group.
  EXPECT_EQ(ncclAllReduce(buf, buf, kCount, ncclFloat32, op, comm, static_cast<uniccl_stream_t>(stream)),
            ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("graph capture"), std::string::npos) << ncclGetLastError(comm);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllGather(buf, static_cast<float*>(buf) + 1, 1, ncclFloat32, comm, static_cast<uniccl_stream_t>(stream)),
            ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_EQ(fake::launchCount(), 0u);
  EXPECT_EQ(fake::callCount("memcpyAsync"), copies);
  fake::endCapture(stream);

  // Eager work is untouched.
  EXPECT_EQ(ncclAllReduce(buf, buf, kCount, ncclFloat32, op, comm, static_cast<uniccl_stream_t>(stream)), ncclSuccess);
  EXPECT_EQ(fake::launchCount(), 1u);
  EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
}

TEST_F(CaptureSupport, CaptureAllowedWhereSupported) {
  gpu::Graph g = fake::beginCapture(stream);
  float scale = 2.0f;
  ncclRedOp_t op;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scale, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(buf, buf, kCount, ncclFloat32, op, comm, static_cast<uniccl_stream_t>(stream)), ncclSuccess);
  fake::endCapture(stream);
  ASSERT_EQ(fake::launchCount(), 0u);   // a graph node, not run yet
  fake::replayGraph(g);
  EXPECT_EQ(fake::launchCount(), 1u);
  // Captured launches carry no done event (HIP then launches them the ordinary way).
  EXPECT_EQ(fake::launches()[0].done, nullptr);
  fake::destroyGraph(g);
  EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
}

}  // namespace
}  // namespace uniccl
