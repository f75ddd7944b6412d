// A communicator's handle used after ncclCommDestroy or ncclCommAbort
// returned: every API function that takes a communicator refuses it with
// ncclInvalidArgument and a ncclGetLastError text saying it was destroyed,
// without reading it (core/comm_registry.h). Communicators made by
// ncclCommInitAll on the fake GPU (two devices, P2P), by ncclCommSplit and
// by ncclCommShrink. A read of a destroyed communicator would fault: its
// pages are inaccessible once it is gone (and ASan's CI tier runs this too).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "calls_taking_comm.h"
#include "common/core/comm.h"
#include "fake_gpu.h"

namespace uniccl {
namespace {

constexpr const char* kMarker = "ncclGetVersion: version is a null pointer";
void resetLastError() { ncclGetVersion(nullptr); }

// `res` is ncclInvalidArgument and the thread's new last error names `fn`
// and says the communicator was destroyed.
void expectStale(ncclResult_t res, const std::string& fn) {
  EXPECT_EQ(res, ncclInvalidArgument) << fn << ": got " << ncclGetErrorString(res);
  const std::string last = ncclGetLastError(nullptr);
  EXPECT_EQ(last.find(kMarker), std::string::npos) << fn << ": no new error text";
  EXPECT_NE(last.find(fn), std::string::npos) << fn << ": last error '" << last << "'";
  EXPECT_NE(last.find("was destroyed"), std::string::npos) << fn << ": last error '" << last << "'";
}

// Every call taking a communicator, on the destroyed handle `c`.
void expectAllRefused(ncclComm_t c) {
  for (const CommCall& call : callsTakingComm()) {
    resetLastError();
    expectStale(call.fn(c), call.name);
  }
  resetLastError();
  expectStale(ncclCommDestroy(c), "ncclCommDestroy");
  resetLastError();
  expectStale(ncclCommAbort(c), "ncclCommAbort");
  // The Device API's team functions answer the empty team or -1.
  using TeamFn = ncclTeam_t (*)(ncclComm_t);
  const std::pair<const char*, TeamFn> teams[] = {
      {"ncclTeamWorld", ncclTeamWorld}, {"ncclTeamLsa", ncclTeamLsa}, {"ncclTeamRail", ncclTeamRail}};
  for (auto [name, fn] : teams) {
    resetLastError();
    EXPECT_EQ(fn(c).nRanks, 0) << name;
    expectStale(ncclInvalidArgument, name);
  }
  resetLastError();
  EXPECT_EQ(ncclTeamRankToWorld(c, ncclTeam_t{1, 0, 1}, 0), -1);
  expectStale(ncclInvalidArgument, "ncclTeamRankToWorld");
  resetLastError();
  EXPECT_EQ(ncclTeamRankToLsa(c, ncclTeam_t{1, 0, 1}, 0), -1);
  expectStale(ncclInvalidArgument, "ncclTeamRankToLsa");
}

// The destroyed communicator's memory went back to the system.
void expectReleased(ncclComm_t c) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t pages = (sizeof(ncclComm) + page - 1) / page;
  std::vector<unsigned char> resident(pages, 1);
  ASSERT_EQ(mincore(reinterpret_cast<void*>(c), pages * page, resident.data()), 0);
  for (size_t i = 0; i < pages; i++) EXPECT_EQ(resident[i] & 1, 0) << "page " << i << " still resident";
}

class StaleHandle : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::setDeviceCount(2);
    fake::setAutoComplete(true);
    const int devs[2] = {0, 1};
    ASSERT_EQ(ncclCommInitAll(comms, 2, devs), ncclSuccess) << ncclGetLastError(nullptr);
  }
  void TearDown() override {
    for (ncclComm_t& c : comms)
      if (c != nullptr) {
        EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
      }
    fake::reset();
  }
  // One rank of comms is gone: the other still answers.
  void expectOtherLive(int gone) {
    int n = 0;
    EXPECT_EQ(ncclCommCount(comms[1 - gone], &n), ncclSuccess) << ncclGetLastError(nullptr);
    EXPECT_EQ(n, 2);
  }
  ncclComm_t comms[2] = {nullptr, nullptr};
};

TEST_F(StaleHandle, AfterDestroy) {
  ncclComm_t dead = comms[0];
  int n = 0;
  ASSERT_EQ(ncclCommCount(dead, &n), ncclSuccess);   // this thread has just seen it live
  ASSERT_EQ(ncclCommDestroy(dead), ncclSuccess);
  comms[0] = nullptr;
  expectAllRefused(dead);
  expectReleased(dead);
  expectOtherLive(0);
}

TEST_F(StaleHandle, AfterAbort) {
  ncclComm_t dead = comms[1];
  ASSERT_EQ(ncclCommAbort(dead), ncclSuccess);
  comms[1] = nullptr;
  expectAllRefused(dead);
  expectReleased(dead);
  expectOtherLive(1);
}

// Another thread that used the communicator before the destroy refuses it
// after (its cached answer is dropped by the destroy).
TEST_F(StaleHandle, AfterDestroyOnAnotherThread) {
  ncclComm_t dead = comms[0];
  int n = 0;
  ncclResult_t before = ncclInternalError, after = ncclInternalError;
  std::string afterText;
  bool used = false, destroyed = false;
  std::mutex m;
  std::condition_variable cv;
  std::thread user([&] {
    ncclResult_t first = ncclCommCount(dead, &n);
    std::unique_lock<std::mutex> lock(m);
    before = first;
    used = true;
    cv.notify_all();
    cv.wait(lock, [&] { return destroyed; });
    after = ncclCommCount(dead, &n);
    afterText = ncclGetLastError(nullptr);
  });
  // Destroy once the thread has used the comm.
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return used; });
  }
  ASSERT_EQ(ncclCommDestroy(dead), ncclSuccess);
  comms[0] = nullptr;
  {
    std::lock_guard<std::mutex> lock(m);
    destroyed = true;
  }
  cv.notify_all();
  user.join();
  EXPECT_EQ(before, ncclSuccess);
  EXPECT_EQ(after, ncclInvalidArgument);
  EXPECT_NE(afterText.find("was destroyed"), std::string::npos) << afterText;
}

TEST_F(StaleHandle, SplitAndShrinkChildren) {
  ncclComm_t kids[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++) ASSERT_EQ(ncclCommSplit(comms[r], 0, r, &kids[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_NE(kids[0], nullptr);
  ASSERT_NE(kids[1], nullptr);
  EXPECT_EQ(ncclCommDestroy(kids[0]), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(kids[1]), ncclSuccess);
  for (ncclComm_t k : kids) expectAllRefused(k);
  // Rank 0 alone, without rank 1: a communicator of one rank.
  ncclComm_t shrunk = nullptr;
  int one = 1;
  ASSERT_EQ(ncclCommShrink(comms[0], &one, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess)
      << ncclGetLastError(nullptr);
  int n = 0;
  EXPECT_EQ(ncclCommCount(shrunk, &n), ncclSuccess);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(ncclCommDestroy(shrunk), ncclSuccess);
  expectAllRefused(shrunk);
  expectOtherLive(0);
  expectOtherLive(1);
}

// Communicators made after a destroy never take the destroyed one's
// address, so its handle stays refused.
TEST_F(StaleHandle, AddressNeverReused) {
  ncclComm_t dead = comms[0];
  ASSERT_EQ(ncclCommDestroy(dead), ncclSuccess);
  comms[0] = nullptr;
  std::vector<ncclComm*> fresh;
  for (int i = 0; i < 64; i++) {
    fresh.push_back(new ncclComm());
    EXPECT_NE(fresh.back(), dead);
    delete fresh.back();   // and again: the allocator is offered the same sizes over and over
    fresh.back() = new ncclComm();
    EXPECT_NE(fresh.back(), dead);
  }
  resetLastError();
  int n = 0;
  expectStale(ncclCommCount(dead, &n), "ncclCommCount");
  for (ncclComm* c : fresh) delete c;
}

// Destroyed inside an open group that holds a task of it: the task is
// dropped and the group end does not touch the communicator.
TEST_F(StaleHandle, DestroyedInsideAGroup) {
  void* buf = nullptr;
  ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
  ASSERT_EQ(gpu::deviceAlloc(&buf, 4096), ncclSuccess);
  gpu::Stream s = nullptr;
  ASSERT_EQ(gpu::streamCreate(&s), ncclSuccess);
  const size_t before = fake::launchCount();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comms[0], static_cast<uniccl_stream_t>(s)),
            ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommDestroy(comms[0]), ncclSuccess);
  ncclComm_t dead = comms[0];
  comms[0] = nullptr;
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(fake::launchCount(), before);
  resetLastError();
  int n = 0;
  expectStale(ncclCommCount(dead, &n), "ncclCommCount");
}

// Checks on several threads while another creates and destroys
// communicators (each destroy empties every thread's cache): live handles
// always pass, destroyed ones never do. Hand-built communicators, no GPU
// work; this is the case the ThreadSanitizer build runs.
TEST(StaleHandleRegistry, ChecksRaceWithCreatesAndDestroys) {
  constexpr int kThreads = 3, kCycles = 2000;
  std::vector<ncclComm*> own(kThreads);
  for (ncclComm*& c : own) {
    c = new ncclComm();
    c->nRanks = 3;
  }
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> checkers;
  for (int t = 0; t < kThreads; t++) {
    checkers.emplace_back([&, t] {
      int n = 0;
      while (!stop.load(std::memory_order_acquire)) {
        if (ncclCommCount(own[t], &n) != ncclSuccess || n != 3) wrong.fetch_add(1);
      }
    });
  }
  std::vector<ncclComm*> dead;
  for (int i = 0; i < kCycles; i++) {
    ncclComm* c = new ncclComm();
    c->nRanks = 1;
    int n = 0;
    if (ncclCommCount(c, &n) != ncclSuccess || n != 1) wrong.fetch_add(1);
    delete c;
    if (i % 100 == 0) dead.push_back(c);
  }
  stop.store(true, std::memory_order_release);
  for (std::thread& t : checkers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  for (ncclComm* c : dead) {
    resetLastError();
    int n = 0;
    expectStale(ncclCommCount(c, &n), "ncclCommCount");
  }
  for (ncclComm* c : own) delete c;
}

}  // namespace
}  // namespace uniccl
