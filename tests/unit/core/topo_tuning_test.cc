// Tuning and ncclGroupSimulateEnd over synthetic topologies (core/tuning.h,
// core/cost_model.h, topo/cost.h): one NVSwitch or PCIe host chooses as the
// knobs' rule says; across hosts AllReduce takes the tree for small sizes
// and the ring for large ones, up to a size the cost model places; the
// simulated time of a group grows with the hosts.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "common/core/comm.h"
#include "common/core/cost_model.h"
#include "common/core/tuning.h"
#include "device/dev_types.h"
#include "fake_comm.h"
#include "fake_gpu.h"
#include "../topo/synthetic_hosts.h"
#include "uniccl.h"

namespace uniccl {
namespace {

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024, kGiB = 1024 * kMiB;

// Rank 0 of H hosts x G GPUs (link class `cls`, `nics` NICs each), on
// `channels` channels, every pair P2P inside a host and the network across.
struct TopoComm {
  TopoComm(int hosts, int gpus, topo::LinkClass cls, int nics, int channels) {
    const int n = hosts * gpus;
    c = test::makeFakeComm(0, n);
    c->topology = test::alikeHosts(hosts, gpus, cls, nics);
    c->nChannels = channels;
    c->p2pChannels = channels;
    c->allP2p = hosts == 1;
    ChannelLayout l{};
    l.llBytes = 512 * kKiB;
    l.simpleBytes = 2 * kMiB;
    c->transports.setLayoutForTesting(l);
    c->peers.resize(n);
    std::vector<uint8_t> reach((size_t)n * n, 0);
    for (int a = 0; a < n; a++) {
      c->peers[a].hostHash = 0x100 + a / gpus;
      for (int b = 0; b < n; b++) reach[(size_t)a * n + b] = a / gpus == b / gpus;
    }
    c->transports.setReachForTesting(n, reach);
  }
  ~TopoComm() { delete c; }
  uint8_t algo(size_t bytes) const { return tuneCollective(c, TaskKind::AllReduce, bytes).algo; }
  ncclComm* c;
};

TEST(TopoTuning, OneHostChoosesByTheKnobsRule) {
  // UNICCL_TREE_MIN_RANKS 4 and UNICCL_TREE_MAX_BYTES 64 KiB (docs/environment.md), on a switch and on PCIe.
  for (topo::LinkClass cls : {topo::LinkClass::Switch, topo::LinkClass::Pcie}) {
    TopoComm box(1, 8, cls, 0, 64);
    EXPECT_EQ(box.algo(8), dev::kAlgoTree);
    EXPECT_EQ(box.algo(64 * kKiB), dev::kAlgoTree);
    EXPECT_EQ(box.algo(64 * kKiB + 1), dev::kAlgoRing);
    EXPECT_EQ(box.algo(kGiB), dev::kAlgoRing);
    EXPECT_EQ(box.c->tuningCache.treeMaxBytes.load(), -1);   // the cost model was not asked
  }
}

// The largest AllReduce the tree runs across these hosts (the first ring size minus one).
size_t treeLimit(const TopoComm& t) {
  size_t lo = 0, hi = (size_t)1 << 40;
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    (t.algo(mid) == dev::kAlgoTree ? lo : hi) = mid;
  }
  return lo;
}

TEST(TopoTuning, AcrossHostsTreeForSmallRingForLarge) {
  TopoComm twoBoxes(2, 8, topo::LinkClass::Switch, 8, 16);
  TopoComm sixteenBoxes(16, 8, topo::LinkClass::Switch, 8, 16);
  TopoComm single(64, 1, topo::LinkClass::Switch, 1, 2);
  for (TopoComm* t : {&twoBoxes, &sixteenBoxes, &single}) {
    SCOPED_TRACE(t->c->topology.nHosts());
    EXPECT_EQ(t->algo(8), dev::kAlgoTree);
    EXPECT_EQ(t->algo(64 * kKiB), dev::kAlgoTree);
    EXPECT_EQ(t->algo(kGiB), dev::kAlgoRing);
    // One switch point: the tree up to it, the ring above.
    const size_t limit = treeLimit(*t);
    EXPECT_EQ((size_t)t->c->tuningCache.treeMaxBytes.load(), limit);
    for (size_t b = 1; b <= kGiB; b *= 4) EXPECT_EQ(t->algo(b), b <= limit ? dev::kAlgoTree : dev::kAlgoRing) << b;
  }
  // More hosts: the ring's latency grows linearly, the tree's by a level per doubling: the tree runs longer.
  EXPECT_GT(treeLimit(sixteenBoxes), treeLimit(twoBoxes));
  EXPECT_GE(treeLimit(twoBoxes), 64 * kKiB);
  // Other collectives keep the ring.
  EXPECT_EQ(tuneCollective(sixteenBoxes.c, TaskKind::AllGather, 8).algo, dev::kAlgoRing);
}

Task allGather(size_t count, TaskKind kind = TaskKind::AllGather) {
  Task t{};
  t.kind = kind;
  t.dtype = ncclFloat32;
  t.count = count;
  return t;
}

// AllGather by PAT rounds (core/allgather_pat.h) by default only with one
// rank per host on more than 2 hosts, where the cost model has it ahead
// of the ring; never for other collectives or hosts of several GPUs.
TEST(TopoTuning, PatForAllGatherAcrossHostsOfOneGpu) {
  TopoComm single(64, 1, topo::LinkClass::Switch, 1, 2);
  TopoComm eight(8, 1, topo::LinkClass::Switch, 1, 2);
  TopoComm two(2, 1, topo::LinkClass::Switch, 1, 2);
  TopoComm sixteenBoxes(16, 8, topo::LinkClass::Switch, 8, 16);
  for (TopoComm* t : {&single, &eight}) {
    SCOPED_TRACE(t->c->topology.nHosts());
    EXPECT_TRUE(collUsesPat(t->c, allGather(1)));
    EXPECT_TRUE(collUsesPat(t->c, allGather(1000)));
    EXPECT_GT(t->c->tuningCache.patMaxBytes.load(), 0);
    EXPECT_FALSE(collUsesPat(t->c, allGather(0)));
    EXPECT_FALSE(collUsesPat(t->c, allGather(1000, TaskKind::AllReduce)));
  }
  EXPECT_FALSE(collUsesPat(two.c, allGather(1)));
  EXPECT_FALSE(collUsesPat(sixteenBoxes.c, allGather(1)));
  EXPECT_EQ(sixteenBoxes.c->tuningCache.patMaxBytes.load(), 0);
  // ncclGroupSimulateEnd's estimate follows: 64 hosts, 6 rounds (5 extra
  // launches) instead of the ring's 63 network hops.
  single.c->tasks.colls.push_back(allGather(2));
  const double pat = estimateGroupUs({single.c});
  const double ring = estimateCollectiveUs(single.c, TaskKind::AllGather, 2 * 4 * 64);
  EXPECT_GT(pat, 0);
  EXPECT_LT(pat, ring);
  single.c->tasks.clear();
}

// ReduceScatter by PAT rounds (core/reducescatter_pat.h) where AllGather
// runs so, with the ops without a scalar only, and only while its partial
// sums fit UNICCL_PAT_SCRATCH_MAX_BYTES (64 MiB: 3 blocks on 8 ranks).
TEST(TopoTuning, PatForReduceScatterWithoutScalarWithinScratch) {
  TopoComm eight(8, 1, topo::LinkClass::Switch, 1, 2);
  TopoComm sixteenBoxes(16, 8, topo::LinkClass::Switch, 8, 16);
  auto rs = [](size_t count, uint8_t op) {
    Task t = allGather(count, TaskKind::ReduceScatter);
    t.redOp = op;
    return t;
  };
  for (uint8_t op : {dev::kOpSum, dev::kOpProd, dev::kOpMax, dev::kOpMin})
    EXPECT_TRUE(collUsesPat(eight.c, rs(1000, op))) << (int)op;
  // ncclAvg lowers to these (floats, integers), as does a PreMulSum op.
  EXPECT_FALSE(collUsesPat(eight.c, rs(1000, dev::kOpPreMulSum)));
  EXPECT_FALSE(collUsesPat(eight.c, rs(1000, dev::kOpSumPostDiv)));
  EXPECT_FALSE(collUsesPat(eight.c, rs(0, dev::kOpSum)));
  EXPECT_FALSE(collUsesPat(sixteenBoxes.c, rs(1000, dev::kOpSum)));
  // 16 MiB blocks: 48 MiB of scratch; 32 MiB blocks: 96 MiB, the ring's
  // (the AllGather of that size still runs as PAT rounds).
  const size_t m16 = (16u << 20) / 4, m32 = (32u << 20) / 4;
  EXPECT_TRUE(collUsesPat(eight.c, allGather(m32)));
  EXPECT_TRUE(collUsesPat(eight.c, rs(m16, dev::kOpSum)));
  EXPECT_FALSE(collUsesPat(eight.c, rs(m32, dev::kOpSum)));
  // ncclGroupSimulateEnd's estimate follows: 3 rounds instead of 7 network hops.
  eight.c->tasks.colls.push_back(rs(2, dev::kOpSum));
  const double pat = estimateGroupUs({eight.c});
  const double ring = estimateCollectiveUs(eight.c, TaskKind::ReduceScatter, 2 * 4 * 8);
  EXPECT_GT(pat, 0);
  EXPECT_LT(pat, ring);
  eight.c->tasks.clear();
}

TEST(TopoTuning, EstimatesGrowWithHosts) {
  for (size_t bytes : {(size_t)8, 64 * kKiB, 16 * kMiB, kGiB}) {
    double last = 0;
    for (int hosts : {1, 2, 4, 16}) {
      TopoComm t(hosts, 8, topo::LinkClass::Switch, 8, 16);
      const double us = estimateCollectiveUs(t.c, TaskKind::AllReduce, bytes);
      EXPECT_GT(us, last) << hosts << " hosts, " << bytes << " bytes";
      last = us;
    }
  }
  // A PCIe host moves large messages slower than an NVSwitch host.
  TopoComm sw(1, 8, topo::LinkClass::Switch, 0, 64), pcie(1, 8, topo::LinkClass::Pcie, 0, 64);
  EXPECT_GT(estimateCollectiveUs(pcie.c, TaskKind::AllReduce, kGiB),
            2 * estimateCollectiveUs(sw.c, TaskKind::AllReduce, kGiB));
}

class TopoSimulate : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    fake::setAutoComplete(true);
    ASSERT_EQ(gpu::setDevice(0), ncclSuccess);
    gpu::Stream s = nullptr;
    ASSERT_EQ(gpu::streamCreate(&s), ncclSuccess);
    stream = static_cast<uniccl_stream_t>(s);
    ASSERT_EQ(gpu::deviceAlloc(&buf, kBytes), ncclSuccess);
  }
  void TearDown() override {
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    while (ncclGroupSimulateEnd(&sim) == ncclSuccess) {}
    fake::reset();
  }
  // ncclGroupSimulateEnd's estimate of one AllReduce of `bytes` on rank 0.
  float simulate(TopoComm& t, size_t bytes) {
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(buf, buf, bytes / 4, ncclFloat, ncclSum, t.c, stream), ncclSuccess);
    EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess);
    return sim.estimatedTime;
  }
  static constexpr size_t kBytes = 16 << 20;
  void* buf = nullptr;
  uniccl_stream_t stream = nullptr;
};

TEST_F(TopoSimulate, GroupTimeGrowsWithHosts) {
  for (size_t bytes : {(size_t)8, 64 * kKiB, kBytes}) {
    float last = 0;
    for (int hosts : {1, 2, 16, 64}) {
      TopoComm t(hosts, 8, topo::LinkClass::Switch, 8, 16);
      const float us = simulate(t, bytes);
      EXPECT_GT(us, last) << hosts << " hosts, " << bytes << " bytes";
      last = us;
    }
  }
}

}  // namespace
}  // namespace uniccl
