// Protocol choice (core/tuning.h): NCCL_PROTO parsing with LL128, and which
// protocol a collective gets by size, rank count and whether the
// communicator has LL128 slots (Transports::ll128()).
#include <gtest/gtest.h>

#include <memory>

#include "common/core/comm.h"
#include "common/core/tuning.h"
#include "common/util/debug.h"
#include "device/dev_types.h"
#include "fake_comm.h"

namespace uniccl {
namespace {

void expectProtos(const char* value, bool ll, bool simple, bool ll128, bool warns) {
  SCOPED_TRACE(std::string("NCCL_PROTO=") + value);
  clearLastError();
  const ProtoMask m = parseProtoList(value);
  EXPECT_EQ(m.ll, ll);
  EXPECT_EQ(m.simple, simple);
  EXPECT_EQ(m.ll128, ll128);
  EXPECT_EQ(lastErrorMessage()[0] != '\0', warns) << lastErrorMessage();
}

TEST(ProtoList, IncludeExcludeLL128) {
  expectProtos("LL128", false, false, true, false);
  expectProtos("ll128", false, false, true, false);
  expectProtos("^LL128", true, true, false, false);
  expectProtos("LL,Simple", true, true, false, false);
  expectProtos("LL,LL128", true, false, true, false);
  expectProtos("^LL,Simple", false, false, true, false);
  expectProtos("Simple", false, true, false, false);
  expectProtos("^LL", false, true, true, false);
  expectProtos("LL,LL128,Simple", true, true, true, false);
  // "LL" is not "LL128" and the other way round (whole names).
  expectProtos("LL", true, false, false, false);
}

TEST(ProtoList, NothingLeftWarnsAndAllowsAll) {
  expectProtos("^LL,LL128,Simple", true, true, true, true);
  expectProtos("LL256", true, true, true, true);
  expectProtos("", true, true, true, true);
}

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;

struct Comm {
  explicit Comm(int nRanks, bool ll128Slots) : c(test::makeFakeComm(0, nRanks)) {
    ChannelLayout l{};
    l.llBytes = 512 * kKiB;
    l.simpleBytes = 2 * kMiB;
    l.ll128Bytes = ll128Slots ? 512 * kKiB : 0;
    c->transports.setLayoutForTesting(l);
    c->allP2p = true;
    c->nChannels = 64;
  }
  ~Comm() { delete c; }
  ncclComm* c;
};

// The knobs' defaults (docs/environment.md).
ProtoChoice defaults(ProtoMask m = ProtoMask{}) {
  ProtoChoice pc;
  pc.mask = m;
  pc.llThreshold = 1 * kMiB;   // the P2P default
  pc.llThresholdUnderLL128 = 512 * kKiB;
  pc.ll128PerRankBytes = 2 * kMiB;
  pc.ll128MinRanks = 2;
  return pc;
}

TEST(ProtoChoice, BySizeAndRanks) {
  Comm four(4, true), two(2, true), eight(8, true);
  const ProtoChoice pc = defaults();
  EXPECT_EQ(chooseCollProto(four.c, pc, 8), dev::kProtoLL);
  EXPECT_EQ(chooseCollProto(four.c, pc, 512 * kKiB), dev::kProtoLL);
  // Where LL128 runs it takes over from LL above 512 KiB ...
  EXPECT_EQ(chooseCollProto(four.c, pc, 512 * kKiB + 16), dev::kProtoLL128);
  EXPECT_EQ(chooseCollProto(four.c, pc, 1 * kMiB), dev::kProtoLL128);
  EXPECT_EQ(chooseCollProto(four.c, pc, 8 * kMiB), dev::kProtoLL128);
  // ... up to 2 MiB per rank.
  EXPECT_EQ(chooseCollProto(four.c, pc, 8 * kMiB + 16), dev::kProtoSimple);
  EXPECT_EQ(chooseCollProto(eight.c, pc, 16 * kMiB), dev::kProtoLL128);
  EXPECT_EQ(chooseCollProto(eight.c, pc, 64 * kMiB), dev::kProtoSimple);
  EXPECT_EQ(chooseCollProto(two.c, pc, 8), dev::kProtoLL);
  EXPECT_EQ(chooseCollProto(two.c, pc, 1 * kMiB), dev::kProtoLL128);
  EXPECT_EQ(chooseCollProto(two.c, pc, 4 * kMiB), dev::kProtoLL128);
  EXPECT_EQ(chooseCollProto(two.c, pc, 4 * kMiB + 16), dev::kProtoSimple);
  // Below UNICCL_LL128_MIN_RANKS: LL up to the plain LL threshold, then Simple.
  ProtoChoice from3 = pc;
  from3.ll128MinRanks = 3;
  EXPECT_EQ(chooseCollProto(two.c, from3, 1 * kMiB), dev::kProtoLL);
  EXPECT_EQ(chooseCollProto(two.c, from3, 1 * kMiB + 16), dev::kProtoSimple);
  EXPECT_EQ(chooseCollProto(four.c, from3, 1 * kMiB), dev::kProtoLL128);
}

TEST(ProtoChoice, WithoutLL128LLKeepsItsWholeRange) {
  Comm four(4, true);
  // NCCL_PROTO=^LL128: LL up to the plain threshold again.
  const ProtoChoice pc = defaults(ProtoMask{true, true, false});
  EXPECT_EQ(chooseCollProto(four.c, pc, 1 * kMiB), dev::kProtoLL);
  EXPECT_EQ(chooseCollProto(four.c, pc, 1 * kMiB + 16), dev::kProtoSimple);
  // An explicit UNICCL_LL_THRESHOLD is both thresholds (tuneCollective).
  ProtoChoice explicitLL = defaults();
  explicitLL.llThreshold = explicitLL.llThresholdUnderLL128 = 64 * kKiB;
  EXPECT_EQ(chooseCollProto(four.c, explicitLL, 64 * kKiB), dev::kProtoLL);
  EXPECT_EQ(chooseCollProto(four.c, explicitLL, 64 * kKiB + 16), dev::kProtoLL128);
}

TEST(ProtoChoice, NoLL128SlotsKeepsLLAndSimple) {
  Comm four(4, false);
  const ProtoChoice pc = defaults();
  EXPECT_EQ(chooseCollProto(four.c, pc, 8), dev::kProtoLL);
  EXPECT_EQ(chooseCollProto(four.c, pc, 2 * kMiB), dev::kProtoSimple);
  EXPECT_EQ(chooseCollProto(four.c, pc, 64 * kMiB), dev::kProtoSimple);
}

TEST(ProtoChoice, NcclProtoLL128AloneForcesIt) {
  Comm four(4, true), two(2, true), none(4, false);
  const ProtoChoice pc = defaults(ProtoMask{false, false, true});
  for (size_t bytes : {(size_t)0, (size_t)8, 100 * kKiB, 2 * kMiB, 256 * kMiB}) {
    EXPECT_EQ(chooseCollProto(four.c, pc, bytes), dev::kProtoLL128) << bytes;
    EXPECT_EQ(chooseCollProto(two.c, pc, bytes), dev::kProtoLL128) << bytes;   // whatever the rank count
  }
  // Where the communicator has no LL128 slots: LL and Simple as by default.
  EXPECT_EQ(chooseCollProto(none.c, pc, 8), dev::kProtoLL);
  EXPECT_EQ(chooseCollProto(none.c, pc, 2 * kMiB), dev::kProtoSimple);
}

TEST(ProtoChoice, ExclusionsGiveWayInOrder) {
  Comm four(4, true), none(4, false);
  // ^LL128: LL128's range goes to Simple, as before LL128.
  const ProtoChoice noLL128 = defaults(ProtoMask{true, true, false});
  EXPECT_EQ(chooseCollProto(four.c, noLL128, 8), dev::kProtoLL);
  EXPECT_EQ(chooseCollProto(four.c, noLL128, 2 * kMiB), dev::kProtoSimple);
  // ^LL: small messages on LL128 where there are slots, else Simple.
  const ProtoChoice noLL = defaults(ProtoMask{false, true, true});
  EXPECT_EQ(chooseCollProto(four.c, noLL, 8), dev::kProtoLL128);
  EXPECT_EQ(chooseCollProto(none.c, noLL, 8), dev::kProtoSimple);
  EXPECT_EQ(chooseCollProto(four.c, noLL, 64 * kMiB), dev::kProtoSimple);
  // ^Simple: large messages on LL128 where there are slots, else LL.
  const ProtoChoice noSimple = defaults(ProtoMask{true, false, true});
  EXPECT_EQ(chooseCollProto(four.c, noSimple, 64 * kMiB), dev::kProtoLL128);
  EXPECT_EQ(chooseCollProto(none.c, noSimple, 64 * kMiB), dev::kProtoLL);
  EXPECT_EQ(chooseCollProto(four.c, noSimple, 8), dev::kProtoLL);
  // LL alone and Simple alone, as before LL128.
  EXPECT_EQ(chooseCollProto(four.c, defaults(ProtoMask{true, false, false}), 64 * kMiB), dev::kProtoLL);
  EXPECT_EQ(chooseCollProto(four.c, defaults(ProtoMask{false, true, false}), 8), dev::kProtoSimple);
}

TEST(ProtoChoice, TuneCollectiveSlicesLL128Lines) {
  // The process's knobs (this test sets none): 4 ranks, 2 MiB is LL128.
  Comm four(4, true);
  const CollTuning t = tuneCollective(four.c, TaskKind::AllReduce, 2 * kMiB);
  EXPECT_EQ(t.proto, dev::kProtoLL128);
  EXPECT_FALSE(t.exchange);
  EXPECT_GE(t.nChannels, 1);
  EXPECT_LE(t.nChannels, 64);
  // At most one slot's data: 120 bytes of every 128-byte line.
  EXPECT_LE(t.sliceBytes, 512 * kKiB / dev::kSteps / 128 * 120);
  EXPECT_EQ(t.sliceBytes % 16, 0u);
  // 2 ranks (the defaults): LL (one exchange) to 512 KiB, LL128 above.
  Comm two(2, true);
  const CollTuning small = tuneCollective(two.c, TaskKind::AllReduce, 512 * kKiB);
  EXPECT_EQ(small.proto, dev::kProtoLL);
  EXPECT_TRUE(small.exchange);
  EXPECT_EQ(tuneCollective(two.c, TaskKind::AllReduce, 1 * kMiB).proto, dev::kProtoLL128);
  EXPECT_EQ(tuneCollective(two.c, TaskKind::AllReduce, 8 * kMiB).proto, dev::kProtoSimple);
  EXPECT_FALSE(tuneCollective(two.c, TaskKind::AllReduce, 8 * kMiB).exchange);   // Simple over P2P: the ring
  // Across the network: LL on one channel up to UNICCL_NET_LL_MAX_BYTES
  // (8 KiB), Simple above, never LL128; 2 ranks exchange up to
  // UNICCL_NET_EXCHANGE_MAX_BYTES (512 KiB); more ranks, larger messages
  // and the other collectives run the ring.
  two.c->transports.setRingUsesNetForTesting(true);
  for (size_t bytes : {(size_t)0, (size_t)8, 8 * kKiB, 8 * kKiB + 1, 512 * kKiB, 512 * kKiB + 1, 64 * kMiB}) {
    const CollTuning net = tuneCollective(two.c, TaskKind::AllReduce, bytes);
    EXPECT_EQ(net.proto, bytes <= 8 * kKiB ? dev::kProtoLL : dev::kProtoSimple) << bytes;
    EXPECT_EQ(net.exchange, bytes <= 512 * kKiB) << bytes;
    if (net.proto == dev::kProtoLL) EXPECT_EQ(net.nChannels, 1) << bytes;
  }
  EXPECT_EQ(tuneCollective(two.c, TaskKind::AllGather, 8).proto, dev::kProtoLL);
  EXPECT_EQ(tuneCollective(two.c, TaskKind::AllGather, 1 * kMiB).proto, dev::kProtoSimple);
  EXPECT_FALSE(tuneCollective(two.c, TaskKind::ReduceScatter, 8).exchange);
  four.c->transports.setRingUsesNetForTesting(true);
  EXPECT_FALSE(tuneCollective(four.c, TaskKind::AllReduce, 8).exchange);
  EXPECT_STREQ(protoName(t.proto), "LL128");
  EXPECT_STREQ(protoName(dev::kProtoLL), "LL");
  EXPECT_STREQ(protoName(dev::kProtoSimple), "Simple");
}

}  // namespace
}  // namespace uniccl
