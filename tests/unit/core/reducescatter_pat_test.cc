// PAT ReduceScatter rounds (core/reducescatter_pat.h) as planned, for every
// rank of 2..17-rank communicators, in and out of place: played round by
// round at the block level over a model of each rank's memory (send
// buffer, receive buffer, scratch; each block holds a partial sum of one
// result block over a set of ranks), every message must meet a receive of
// the same size from the same peer in the same order, carry partial sums
// of the blocks its receiver reduces them into, never bring a rank's input
// twice, write only the receive buffer and the scratch it was given, and
// never read in a round what that round writes elsewhere; at the end every
// rank's receive buffer holds its block over every rank. Each round is a
// launch of its own on the datatype's Simple collective kernel.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "common/core/comm.h"
#include "common/core/launch_plan.h"
#include "common/core/planner.h"
#include "common/core/reducescatter_pat.h"
#include "common/core/tuning.h"
#include "common/topo/cost.h"
#include "device/kernels.h"
#include "fake_comm.h"
#include "uniccl.h"

namespace uniccl {
namespace {

constexpr size_t kCount = 3;                       // elements per block (float: 12 bytes, odd lines)
constexpr size_t kBlock = kCount * sizeof(float);
constexpr uintptr_t kSendBase = 0x10000000, kRecvBase = 0x20000000, kScratchBase = 0x30000000;
constexpr uintptr_t kRankStride = 0x100000;

// A block of a rank's memory: a partial sum of result block `block` over
// the ranks in `ranks` (block -1: nothing defined there yet).
struct Partial {
  int block = -1;
  uint32_t ranks = 0;
};

struct Msg {
  int from, to;
  uintptr_t src;        // the sender's source
  uintptr_t dst, own;   // the receiver's target and the source it reduces with
  size_t bytes;
};

class PatReduceScatterRounds : public ::testing::TestWithParam<std::pair<int, bool>> {};

TEST_P(PatReduceScatterRounds, EveryInputOnceIntoItsBlock) {
  const int n = GetParam().first;
  const bool inPlace = GetParam().second;
  const size_t scratchBytes = patReduceScatterScratchBytes(n, kBlock);
  EXPECT_LE(scratchBytes, (size_t)((n + 1) / 2 - 1) * kBlock) << "at most ceil(n/2)-1 blocks";
  if (n <= 3) {
    EXPECT_EQ(scratchBytes, 0u);
  }
  const int rounds = topo::ceilLog2(n);
  std::vector<std::unique_ptr<ncclComm>> comms;
  std::vector<std::vector<dev::Work>> works(n);
  std::vector<std::vector<LaunchStart>> starts(n);
  std::vector<uintptr_t> send(n), recv(n), scratch(n);
  std::vector<std::map<uintptr_t, Partial>> mem(n);   // by block address
  for (int r = 0; r < n; r++) {
    comms.emplace_back(test::makeFakeComm(r, n));
    ncclComm* c = comms.back().get();
    c->p2pChannels = 2;
    c->peers.resize(n);
    c->transports.setReachForTesting(n, std::vector<uint8_t>((size_t)n * n, 1));
    send[r] = kSendBase + r * kRankStride;
    recv[r] = inPlace ? send[r] + r * kBlock : kRecvBase + r * kRankStride;
    scratch[r] = kScratchBase + r * kRankStride;
    for (int b = 0; b < n; b++) mem[r][send[r] + b * kBlock] = Partial{b, 1u << r};
    if (!inPlace) mem[r][recv[r]] = Partial{};
    for (size_t o = 0; o < scratchBytes; o += kBlock) mem[r][scratch[r] + o] = Partial{};
    Task t{};
    t.kind = TaskKind::ReduceScatter;
    t.dtype = ncclFloat32;
    t.redOp = dev::kOpMax;
    t.count = kCount;
    t.sendbuff = reinterpret_cast<const void*>(send[r]);
    t.recvbuff = reinterpret_cast<void*>(recv[r]);
    ASSERT_EQ(patReduceScatterWorks(c->rank, c->nRanks, emptyP2pWork(c, p2pSliceBytes(c)), t,
                                    reinterpret_cast<void*>(scratch[r]), &works[r], &starts[r]), ncclSuccess);
    ASSERT_EQ((int)starts[r].size(), rounds);
    // planLaunches cuts a launch at every round, each on float's Simple collective kernel.
    LaunchPlan plan;
    plan.works = works[r];
    plan.launchStarts = starts[r];
    ASSERT_EQ(planLaunches(&plan), ncclSuccess);
    ASSERT_EQ((int)plan.launches.size(), rounds);
    for (int k = 0; k < rounds; k++) {
      EXPECT_EQ(plan.launches[k].firstWork, starts[r][k].work);
      EXPECT_EQ(starts[r][k].reduceType, (int)ncclFloat32);
      EXPECT_EQ(plan.launches[k].kernel, dev::collectiveKernel(ncclFloat32, dev::kProtoSimple));
    }
  }
  // Where an address lies: a whole block of a region the rank may write
  // (the receive buffer, the scratch) or only read (the rest of the send buffer).
  auto writable = [&](int r, uintptr_t a) {
    return a == recv[r] || (a >= scratch[r] && a < scratch[r] + scratchBytes && (a - scratch[r]) % kBlock == 0);
  };
  std::vector<size_t> bytesSent(n, 0);
  for (int k = 0; k < rounds; k++) {
    std::map<std::pair<int, int>, std::vector<Msg>> sent, recvd;
    for (int r = 0; r < n; r++) {
      const size_t lo = starts[r][k].work, hi = k + 1 < rounds ? starts[r][k + 1].work : works[r].size();
      ASSERT_LT(lo, hi) << "rank " << r << " round " << k << " has no items";
      for (size_t i = lo; i < hi; i++) {
        const dev::Work& w = works[r][i];
        ASSERT_EQ(w.coll, dev::kCollP2p);
        ASSERT_NE(w.p.sendPeer, r) << "no copies to itself";
        if (w.p.sendPeer >= 0) {
          EXPECT_EQ(w.p.sendProto, dev::kProtoSimple);
          EXPECT_EQ(w.p.sendPeer, (r + (1 << (rounds - 1 - k))) % n) << "round " << k << " sends to rank + d";
          sent[{r, w.p.sendPeer}].push_back(Msg{r, w.p.sendPeer, (uintptr_t)w.p.sendBuff, 0, 0, w.p.sendBytes});
        }
        if (w.p.recvPeer >= 0) {
          EXPECT_TRUE(dev::p2pRecvReduces(w.p.recvProto));
          EXPECT_EQ(dev::p2pRecvRedOp(w.p.recvProto), dev::kOpMax);
          EXPECT_EQ(w.p.recvProto & dev::kP2pProtoBits, dev::kProtoSimple);
          recvd[{w.p.recvPeer, r}].push_back(
              Msg{w.p.recvPeer, r, 0, (uintptr_t)w.p.recvBuff, (uintptr_t)dev::p2pReduceSrc(w), w.p.recvBytes});
        }
      }
    }
    // Every read sees the memory as the round found it; each block is
    // written once per round, and nothing written is read elsewhere in it.
    std::vector<std::map<uintptr_t, Partial>> next = mem;
    std::vector<std::set<uintptr_t>> written(n), readAt(n);
    ASSERT_EQ(sent.size(), recvd.size()) << "round " << k;
    for (const auto& kv : sent) {
      const std::vector<Msg>& s = kv.second;
      const std::vector<Msg>& q = recvd[kv.first];
      ASSERT_EQ(s.size(), q.size()) << "round " << k << " " << kv.first.first << "->" << kv.first.second;
      for (size_t j = 0; j < s.size(); j++) {
        ASSERT_EQ(s[j].bytes, q[j].bytes);
        ASSERT_GT(s[j].bytes, 0u);
        ASSERT_EQ(s[j].bytes % kBlock, 0u);
        const int from = s[j].from, to = s[j].to;
        bytesSent[from] += s[j].bytes;
        for (size_t b = 0; b < s[j].bytes / kBlock; b++) {
          const uintptr_t src = s[j].src + b * kBlock, dst = q[j].dst + b * kBlock, own = q[j].own + b * kBlock;
          ASSERT_TRUE(mem[from].count(src)) << "rank " << from << " sends from outside its buffers";
          ASSERT_TRUE(mem[to].count(own)) << "rank " << to << " reduces with memory outside its buffers";
          ASSERT_TRUE(writable(to, dst)) << "rank " << to << " writes outside its receive buffer and scratch";
          const Partial in = mem[from][src], mine = mem[to][own];
          ASSERT_GE(in.block, 0) << "rank " << from << " sends an undefined block";
          ASSERT_GE(mine.block, 0) << "rank " << to << " reduces with an undefined block";
          ASSERT_EQ(in.block, mine.block) << "rank " << to << " reduces partial sums of different blocks";
          ASSERT_EQ(in.ranks & mine.ranks, 0u) << "an input enters block " << in.block << " twice";
          ASSERT_TRUE(written[to].insert(dst).second) << "rank " << to << " writes a block twice in a round";
          readAt[from].insert(src);
          if (own != dst) readAt[to].insert(own);
          next[to][dst] = Partial{in.block, in.ranks | mine.ranks};
        }
      }
    }
    for (int r = 0; r < n; r++)
      for (uintptr_t a : written[r]) EXPECT_FALSE(readAt[r].count(a)) << "rank " << r << " round " << k;
    mem = next;
  }
  const uint32_t all = (1u << n) - 1;
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(mem[r][recv[r]].block, r) << "rank " << r;
    EXPECT_EQ(mem[r][recv[r]].ranks, all) << "rank " << r;
    EXPECT_EQ(bytesSent[r], (size_t)(n - 1) * kBlock) << "n-1 blocks, as the ring";
    for (int b = 0; b < n; b++) {   // the input, apart from the result in place, stays as it was
      if (inPlace && b == r) continue;
      EXPECT_EQ(mem[r][send[r] + b * kBlock].ranks, 1u << r);
    }
  }
}

std::vector<std::pair<int, bool>> shapes() {
  std::vector<std::pair<int, bool>> v;
  for (int n = 2; n <= 17; n++)
    for (bool inPlace : {false, true}) v.emplace_back(n, inPlace);
  return v;
}
INSTANTIATE_TEST_SUITE_P(Ranks, PatReduceScatterRounds, ::testing::ValuesIn(shapes()));

// A p2p item whose receive reduces runs only on its datatype's Simple
// collective kernel: the planner refuses to put it on the p2p kernel.
TEST(PatReduceScatterLaunches, ReducingItemNeedsItsDatatypesKernel) {
  std::unique_ptr<ncclComm> c(test::makeFakeComm(0, 4));
  dev::Work w = emptyP2pWork(c.get(), 4096);
  w.p.recvPeer = 1;
  w.p.recvBytes = 64;
  w.p.recvProto = dev::p2pReduceRecvProto(dev::kOpSum);
  LaunchPlan plan;
  plan.works = {w};
  plan.launchStarts = {LaunchStart{0}};
  EXPECT_EQ(planLaunches(&plan), ncclInternalError);
  plan.launches.clear();
  plan.launchStarts = {LaunchStart{0, (int)ncclBfloat16}};
  ASSERT_EQ(planLaunches(&plan), ncclSuccess);
  ASSERT_EQ(plan.launches.size(), 1u);
  EXPECT_EQ(plan.launches[0].kernel, dev::collectiveKernel(ncclBfloat16, dev::kProtoSimple));
}

}  // namespace
}  // namespace uniccl
