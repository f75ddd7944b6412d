// PAT AllGather rounds (core/allgather_pat.h) as planned, for every rank of
// 2..17-rank communicators, in and out of place: played round by round at
// the block level, every message must meet a receive of the same size from
// the same peer in the same order, send only blocks its rank already holds,
// land them at their own places, and leave every rank with every block
// exactly once after ceil(log2 n) rounds; each round is its own launch.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "common/core/allgather_pat.h"
#include "common/core/comm.h"
#include "common/core/launch_plan.h"
#include "common/core/planner.h"
#include "common/topo/cost.h"
#include "fake_comm.h"
#include "uniccl.h"

namespace uniccl {
namespace {

constexpr size_t kCount = 3;                       // elements per block (float: 12 bytes, odd lines)
constexpr size_t kBlock = kCount * sizeof(float);
constexpr uintptr_t kRecvBase = 0x10000000, kSendBase = 0x20000000, kRankStride = 0x100000;

struct Msg {
  int from, to;
  uintptr_t src, dst;   // dst: the receiver's side
  size_t bytes;
};

class PatRounds : public ::testing::TestWithParam<std::pair<int, bool>> {};

TEST_P(PatRounds, EveryBlockOnceInLogRounds) {
  const int n = GetParam().first;
  const bool inPlace = GetParam().second;
  std::vector<std::unique_ptr<ncclComm>> comms;
  std::vector<std::vector<dev::Work>> works(n);
  std::vector<std::vector<LaunchStart>> starts(n);
  for (int r = 0; r < n; r++) {
    comms.emplace_back(test::makeFakeComm(r, n));
    ncclComm* c = comms.back().get();
    c->p2pChannels = 2;
    c->peers.resize(n);
    c->transports.setReachForTesting(n, std::vector<uint8_t>((size_t)n * n, 1));
    Task t{};
    t.kind = TaskKind::AllGather;
    t.dtype = ncclFloat32;
    t.count = kCount;
    t.recvbuff = reinterpret_cast<void*>(kRecvBase + r * kRankStride);
    t.sendbuff = inPlace ? reinterpret_cast<void*>(kRecvBase + r * kRankStride + r * kBlock)
                         : reinterpret_cast<void*>(kSendBase + r * kRankStride);
    patAllGatherWorks(c, t, &works[r], &starts[r]);
    const int rounds = topo::ceilLog2(n);
    ASSERT_EQ((int)starts[r].size(), rounds);
    // planLaunches cuts a launch at every round.
    LaunchPlan plan;
    plan.works = works[r];
    plan.launchStarts = starts[r];
    ASSERT_EQ(planLaunches(&plan), ncclSuccess);
    ASSERT_EQ((int)plan.launches.size(), rounds);
    for (int k = 0; k < rounds; k++) EXPECT_EQ(plan.launches[k].firstWork, starts[r][k].work);
  }
  // held[r][b]: rank r holds block b (its own from the start: the send
  // buffer, or the receive buffer in place).
  std::vector<std::vector<int>> held(n, std::vector<int>(n, 0));
  for (int r = 0; r < n; r++) held[r][r] = 1;
  auto blockOf = [&](int r, uintptr_t a) -> int {
    const uintptr_t base = kRecvBase + r * kRankStride;
    if (a == kSendBase + r * kRankStride) return r;   // the own block in the send buffer
    EXPECT_GE(a, base);
    EXPECT_EQ((a - base) % kBlock, 0u);
    return (int)((a - base) / kBlock);
  };
  const int rounds = topo::ceilLog2(n);
  for (int k = 0; k < rounds; k++) {
    // Per (from, to): the messages in order on each side.
    std::map<std::pair<int, int>, std::vector<Msg>> sent, recvd;
    std::vector<std::vector<int>> next = held;
    for (int r = 0; r < n; r++) {
      const size_t lo = starts[r][k].work, hi = k + 1 < rounds ? starts[r][k + 1].work : works[r].size();
      for (size_t i = lo; i < hi; i++) {
        const dev::Work& w = works[r][i];
        ASSERT_EQ(w.coll, dev::kCollP2p);
        if (w.p.sendPeer == r) {   // the own block's copy, out of place, in round 0
          EXPECT_FALSE(inPlace);
          EXPECT_EQ(k, 0);
          EXPECT_EQ(blockOf(r, (uintptr_t)w.p.recvBuff), r);
          EXPECT_EQ(w.p.sendBytes, kBlock);
          continue;
        }
        if (w.p.sendPeer >= 0)
          sent[{r, w.p.sendPeer}].push_back(Msg{r, w.p.sendPeer, (uintptr_t)w.p.sendBuff, 0, w.p.sendBytes});
        if (w.p.recvPeer >= 0)
          recvd[{w.p.recvPeer, r}].push_back(Msg{w.p.recvPeer, r, 0, (uintptr_t)w.p.recvBuff, w.p.recvBytes});
      }
    }
    ASSERT_EQ(sent.size(), recvd.size()) << "round " << k;
    for (const auto& kv : sent) {
      const std::vector<Msg>& s = kv.second;
      const std::vector<Msg>& q = recvd[kv.first];
      ASSERT_EQ(s.size(), q.size()) << "round " << k << " " << kv.first.first << "->" << kv.first.second;
      for (size_t j = 0; j < s.size(); j++) {
        ASSERT_EQ(s[j].bytes, q[j].bytes);
        ASSERT_EQ(s[j].bytes % kBlock, 0u);
        const int from = s[j].from, to = s[j].to;
        const int b0 = blockOf(from, s[j].src), d0 = blockOf(to, q[j].dst);
        EXPECT_EQ(b0, d0) << "a block lands at its own place";
        for (size_t b = 0; b < s[j].bytes / kBlock; b++) {
          EXPECT_TRUE(held[from][b0 + b]) << "rank " << from << " sends block " << b0 + b << " before holding it";
          EXPECT_FALSE(next[to][d0 + b]) << "rank " << to << " receives block " << d0 + b << " twice";
          next[to][d0 + b] = 1;
        }
      }
    }
    held = next;
  }
  for (int r = 0; r < n; r++)
    for (int b = 0; b < n; b++) EXPECT_TRUE(held[r][b]) << "rank " << r << " lacks block " << b;
}

std::vector<std::pair<int, bool>> shapes() {
  std::vector<std::pair<int, bool>> v;
  for (int n = 2; n <= 17; n++)
    for (bool inPlace : {false, true}) v.emplace_back(n, inPlace);
  return v;
}
INSTANTIATE_TEST_SUITE_P(Ranks, PatRounds, ::testing::ValuesIn(shapes()));

}  // namespace
}  // namespace uniccl
