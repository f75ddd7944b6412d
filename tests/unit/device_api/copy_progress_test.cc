// CopyProgress (GIN's copies whose completion the proxy polls): the polled
// word where the runtime writes values from streams, events where it cannot,
// and failures reported, on the fake GPU.
#include "common/device_api/copy_progress.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "fake_gpu.h"

namespace uniccl {
namespace {

class CopyProgressTest : public ::testing::Test {
 protected:
  void SetUp() override { fake::reset(); }
  void TearDown() override { fake::reset(); }
};

TEST_F(CopyProgressTest, PolledWordTracksEveryCopy) {
  CopyProgress cp;
  ASSERT_EQ(cp.init(), ncclSuccess);
  EXPECT_TRUE(cp.pollsWord());
  std::vector<char> src(4096), dst(4096, 0);
  for (size_t i = 0; i < src.size(); i++) src[i] = (char)(i * 7 + 1);
  CopyTicket t;
  ASSERT_EQ(cp.copy(dst.data(), src.data(), src.size(), &t), ncclSuccess);
  EXPECT_TRUE(t.pending());
  EXPECT_EQ(t.ev, nullptr);
  EXPECT_EQ(cp.done(t), ncclSuccess);   // the fake's copies end at once, and so does the store after them
  EXPECT_EQ(memcmp(dst.data(), src.data(), src.size()), 0);
  cp.release(&t);
  EXPECT_FALSE(t.pending());
  EXPECT_EQ(fake::callCount("eventQuery"), 0u);   // polling asks the runtime nothing
  CopyTicket none;
  EXPECT_EQ(cp.done(none), ncclSuccess);
  cp.destroy();
}

TEST_F(CopyProgressTest, EventsWhereTheRuntimeCannotWriteValues) {
  fake::setAutoComplete(false);
  fake::failNext("streamWriteValue32", ncclInvalidUsage);
  CopyProgress cp;
  ASSERT_EQ(cp.init(), ncclSuccess);
  EXPECT_FALSE(cp.pollsWord());
  char src[64] = "payload", dst[64] = {};
  CopyTicket a, b;
  ASSERT_EQ(cp.copy(dst, src, sizeof(src), &a), ncclSuccess);
  ASSERT_EQ(cp.copy(dst, src, sizeof(src), &b), ncclSuccess);
  ASSERT_NE(a.ev, nullptr);
  EXPECT_NE(a.ev, b.ev);
  EXPECT_EQ(cp.done(a), ncclInProgress);
  fake::setAutoComplete(true);
  fake::completeEventsUpTo(UINT64_MAX);
  EXPECT_EQ(cp.done(a), ncclSuccess);
  EXPECT_EQ(cp.done(b), ncclSuccess);
  gpu::Event reused = a.ev;
  cp.release(&a);
  CopyTicket c;
  ASSERT_EQ(cp.copy(dst, src, sizeof(src), &c), ncclSuccess);
  EXPECT_EQ(c.ev, reused);   // events go back to a pool
  cp.release(&b);
  cp.release(&c);
  cp.destroy();
}

TEST_F(CopyProgressTest, FailuresAreReported) {
  fake::failNext("streamWriteValue32", ncclUnhandledCudaError);
  CopyProgress broken;
  EXPECT_EQ(broken.init(), ncclUnhandledCudaError);   // not taken for "unsupported"
  broken.destroy();

  CopyProgress cp;
  ASSERT_EQ(cp.init(), ncclSuccess);
  char src[8] = {}, dst[8] = {};
  CopyTicket t;
  fake::failNext("memcpyAsync");
  EXPECT_EQ(cp.copy(dst, src, sizeof(src), &t), ncclUnhandledCudaError);
  EXPECT_FALSE(t.pending());
  fake::failNext("streamWriteValue32");
  EXPECT_EQ(cp.copy(dst, src, sizeof(src), &t), ncclUnhandledCudaError);
  EXPECT_FALSE(t.pending());
  cp.destroy();
}

}  // namespace
}  // namespace uniccl
