// Graph-owned buffers (core/graph_buffers.h) on the fake GPU: a destroyed
// graph's buffers are freed by the next reclaim, never by the user-object
// destructor itself, also when graphs die on another thread while reclaims
// run (the TSan variant checks the lock-free hand-over).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "common/core/graph_buffers.h"
#include "fake_gpu.h"

namespace uniccl {
namespace {

class GraphBuffers : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
    ASSERT_EQ(gpu::streamCreate(&stream), ncclSuccess);
  }
  void TearDown() override {
    reclaimGraphBuffers();
    fake::reset();
  }
  // A captured graph owning one host-mapped and one device buffer.
  gpu::Graph graphWithBuffers() {
    gpu::Graph g = fake::beginCapture(stream);
    void *host = nullptr, *mapped = nullptr, *dev = nullptr;
    EXPECT_EQ(gpu::hostAllocMapped(&host, &mapped, 256), ncclSuccess);
    EXPECT_EQ(gpu::deviceAlloc(&dev, 256), ncclSuccess);
    EXPECT_EQ(graphOwnBuffer(g, host, GraphBufferKind::kHostMapped), ncclSuccess);
    EXPECT_EQ(graphOwnBuffer(g, dev, GraphBufferKind::kDevice), ncclSuccess);
    EXPECT_EQ(fake::endCapture(stream), g);
    return g;
  }
  gpu::Stream stream = nullptr;
};

TEST_F(GraphBuffers, FreedByTheReclaimAfterTheGraphDies) {
  gpu::Graph g = graphWithBuffers();
  reclaimGraphBuffers();
  EXPECT_EQ(fake::live().hostAllocs, 1u);
  EXPECT_EQ(fake::live().deviceAllocs, 1u);
  fake::destroyGraph(g);   // the destructors only queue the buffers
  EXPECT_EQ(fake::live().hostAllocs, 1u);
  EXPECT_EQ(fake::live().deviceAllocs, 1u);
  reclaimGraphBuffers();
  EXPECT_EQ(fake::live().hostAllocs, 0u);
  EXPECT_EQ(fake::live().deviceAllocs, 0u);
}

TEST_F(GraphBuffers, AFailedRetainStillFreesTheBuffer) {
  gpu::Graph g = fake::beginCapture(stream);
  void* dev = nullptr;
  ASSERT_EQ(gpu::deviceAlloc(&dev, 64), ncclSuccess);
  fake::failNext("graphRetainNewUserObject", ncclUnhandledCudaError);
  EXPECT_EQ(graphOwnBuffer(g, dev, GraphBufferKind::kDevice), ncclUnhandledCudaError);
  fake::endCapture(stream);
  fake::destroyGraph(g);
  reclaimGraphBuffers();
  EXPECT_EQ(fake::live().deviceAllocs, 0u);
}

TEST_F(GraphBuffers, GraphsDyingOnAnotherThreadWhileReclaimsRun) {
  constexpr int kGraphs = 200;
  std::vector<gpu::Graph> graphs;
  for (int i = 0; i < kGraphs; i++) graphs.push_back(graphWithBuffers());
  std::thread runtime([&] {
    for (gpu::Graph g : graphs) fake::destroyGraph(g);
  });
  for (int i = 0; i < 1000; i++) reclaimGraphBuffers();
  runtime.join();
  reclaimGraphBuffers();
  EXPECT_EQ(fake::live().hostAllocs, 0u);
  EXPECT_EQ(fake::live().deviceAllocs, 0u);
}

}  // namespace
}  // namespace uniccl
