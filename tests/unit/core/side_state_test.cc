// A communicator's side state (core/side_state.h) on the fake GPU: every
// part filled through its own module (side stream and events, the PAT
// scratch and an outgrown one kept for a shared GPU, the in-place scratch
// with its event and a retired buffer), then handed back by
// releaseSideState, by ncclCommDestroy and by ncclCommAbort. The fake's
// leak accounting shows whatever one of them misses.
#include <gtest/gtest.h>

#include "common/core/comm.h"
#include "common/core/side_state.h"
#include "fake_comm.h"
#include "fake_gpu.h"
#include "uniccl.h"

namespace uniccl {
namespace {

class SideStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::setAutoComplete(true);
    ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
    base = fake::live();
  }

  // Fills every part of *s; each part holds device memory, a stream or events.
  static void fill(SideState* s) {
    ASSERT_EQ(ensureSideStream(&s->streams), ncclSuccess);
    ensurePostedCounters(&s->streams, 4);
    const gpu::CaptureInfo eager{};
    void* scratch = nullptr;
    ASSERT_EQ(patScratch(&s->pat, 0, /*gpuShared=*/true, 1, eager, &scratch), ncclSuccess);
    // Outgrown on a shared GPU: the first buffer is retired, not freed.
    ASSERT_EQ(patScratch(&s->pat, 0, /*gpuShared=*/true, s->pat.bytes + 1, eager, &scratch), ncclSuccess);
    ASSERT_EQ(patScratchLaunched(&s->pat, s->streams.stream), ncclSuccess);
    ASSERT_EQ(s->pat.retired.size(), 1u);
    // The in-place scratch is grown by a group's staging; its fields are
    // what that leaves behind.
    ASSERT_EQ(gpu::deviceAlloc(&s->inPlace.buf, 1 << 20), ncclSuccess);
    s->inPlace.bytes = 1 << 20;
    void* old = nullptr;
    ASSERT_EQ(gpu::deviceAlloc(&old, 1 << 19), ncclSuccess);
    s->inPlace.retired.push_back(old);
    ASSERT_EQ(gpu::eventCreate(&s->inPlace.free), ncclSuccess);
    ASSERT_EQ(gpu::eventRecord(s->inPlace.free, s->streams.stream), ncclSuccess);
    s->inPlace.freeRecorded = true;
  }

  void expectNothingLive() const {
    const fake::Live now = fake::live();
    EXPECT_EQ(now.deviceAllocs, base.deviceAllocs);
    EXPECT_EQ(now.streams, base.streams);
    EXPECT_EQ(now.events, base.events);
  }

  fake::Live base{};
};

TEST_F(SideStateTest, ReleaseFreesEveryPartAndLeavesItEmpty) {
  for (bool abort : {false, true}) {
    SCOPED_TRACE(abort ? "abort" : "destroy");
    SideState s;
    fill(&s);
    const fake::Live filled = fake::live();
    EXPECT_EQ(filled.deviceAllocs, base.deviceAllocs + 4);   // PAT: current and retired; in-place: the same
    EXPECT_EQ(filled.streams, base.streams + 1);
    EXPECT_EQ(filled.events, base.events + 5);   // entry, exit, kernels done; PAT free; in-place free
    const uint64_t syncs = fake::callCount("eventSynchronize");
    releaseSideState(&s, abort);
    expectNothingLive();
    // Destroy waits until the last group's reads of the in-place scratch
    // ended; abort drained the kernels already and does not wait.
    EXPECT_EQ(fake::callCount("eventSynchronize"), syncs + (abort ? 0 : 1));
    EXPECT_EQ(s.streams.stream, nullptr);
    EXPECT_EQ(s.streams.entry, nullptr);
    EXPECT_EQ(s.pat.buf, nullptr);
    EXPECT_TRUE(s.pat.retired.empty());
    EXPECT_EQ(s.inPlace.buf, nullptr);
    EXPECT_TRUE(s.inPlace.retired.empty());
    // Released again (nothing left): no double free.
    releaseSideState(&s, abort);
    expectNothingLive();
  }
}

TEST_F(SideStateTest, EveryCommunicatorHasOne) {
  ncclComm* a = test::makeFakeComm(0, 2);
  ncclComm* b = test::makeFakeComm(1, 2);
  ASSERT_NE(a->sideState, nullptr);
  ASSERT_NE(b->sideState, nullptr);
  EXPECT_NE(a->sideState.get(), b->sideState.get());
  delete a;
  delete b;
}

TEST_F(SideStateTest, DestroyReleasesIt) {
  ncclComm* comm = test::makeFakeComm(0, 1);
  fill(comm->sideState.get());
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  expectNothingLive();
}

TEST_F(SideStateTest, AbortReleasesIt) {
  ncclComm* comm = test::makeFakeComm(0, 1);
  fill(comm->sideState.get());
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  expectNothingLive();
}

}  // namespace
}  // namespace uniccl
