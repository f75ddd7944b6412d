// How p2p items split their messages over channels (device/p2p.h) and the
// 32-bit division helper (device/prims.h, divUpFast), on the CPU port of the
// device code: every block of a launch works these out for every item it
// might run, and a block skips an item by them (device/kernel.h), so the
// parts must cover each message exactly once, and the skip test must agree
// with the parts the blocks then carry.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "device/kernel.h"   // device/p2p.h, in the order the kernels include it

namespace uniccl::dev {
namespace {

TEST(DivUpFast, MatchesTheSixtyFourBitDivision) {
  const int64_t as[] = {0, 1, 15, 16, 17, 1023, 1024, 1025, 65535, 0x7fffffffll, 0x80000000ll,
                        0xfffffffell, 0xffffffffll, 0x100000000ll, 0x100000001ll, (5ll << 30) + 7, 1ll << 40};
  const int64_t bs[] = {1, 2, 3, 7, 16, 42, 64, 127, 128, 1000};
  for (int64_t a : as)
    for (int64_t b : bs) EXPECT_EQ(divUpFast(a, b), divUp(a, b)) << a << " / " << b;
}

// Parts of every block of nch, in block order: [off, off + n).
struct Part {
  int64_t off, n;
};

void expectExactCover(const std::vector<Part>& parts, uint64_t bytes, const char* what) {
  std::vector<Part> nonEmpty;
  for (const Part& p : parts)
    if (p.n > 0) nonEmpty.push_back(p);
  std::sort(nonEmpty.begin(), nonEmpty.end(), [](const Part& a, const Part& b) { return a.off < b.off; });
  int64_t end = 0;
  for (const Part& p : nonEmpty) {
    EXPECT_EQ(p.off, end) << what << ": a gap or an overlap";
    EXPECT_EQ(p.off % 16, 0) << what << ": parts start 16-byte aligned";
    end = p.off + p.n;
  }
  EXPECT_EQ((uint64_t)end, bytes) << what << ": the parts cover the message";
}

TEST(P2pSplit, PartsCoverEveryMessageOnceAndTheSkipTestAgrees) {
  const uint64_t sizes[] = {0, 1, 15, 16, 17, 1023, 1024, 1025, 3 * 4096 + 7, 512 << 10, (512 << 10) + 16,
                            (1 << 20) + 5, (1ull << 32) + 48, (5ull << 30) + 4096};
  for (int nRanks : {2, 3, 4, 8}) {
    for (int nch : {1, 2, 3, 42, 64, 128}) {
      for (uint64_t bytes : sizes) {
        for (int round = 1; round < nRanks; round++) {
          const int rank = 0, sendPeer = round, recvPeer = nRanks - round;
          std::vector<Part> sends, recvs;
          for (int ch = 0; ch < nch; ch++) {
            Part s, r;
            p2pHalfShare(sendPeer, bytes, true, ch, nch, rank, nRanks, &s.off, &s.n);
            p2pHalfShare(recvPeer, bytes, false, ch, nch, rank, nRanks, &r.off, &r.n);
            // Both ends of a message agree: the receiver (rank sendPeer)
            // computes the same part on this channel.
            Part peer;
            p2pHalfShare(rank, bytes, false, ch, nch, sendPeer, nRanks, &peer.off, &peer.n);
            EXPECT_EQ(peer.n, s.n);
            if (s.n > 0) {
              EXPECT_EQ(peer.off, s.off);
            }
            sends.push_back(s);
            recvs.push_back(r);
            const bool has = p2pBlockHasPart(sendPeer, bytes, recvPeer, bytes, ch, nch, rank, nRanks);
            EXPECT_EQ(has, s.n > 0 || r.n > 0) << "ranks " << nRanks << " nch " << nch << " bytes " << bytes;
            EXPECT_EQ(p2pBlockHasPart(-1, 0, recvPeer, bytes, ch, nch, rank, nRanks), r.n > 0);
            EXPECT_EQ(p2pBlockHasPart(sendPeer, bytes, -1, 0, ch, nch, rank, nRanks), s.n > 0);
          }
          expectExactCover(sends, bytes, "send");
          expectExactCover(recvs, bytes, "recv");
        }
        // A copy to itself, laid from the last channel down.
        std::vector<Part> self;
        for (int ch = 0; ch < nch; ch++) {
          Part p;
          p2pSelfShare(bytes, ch, nch, &p.off, &p.n);
          EXPECT_EQ(p2pBlockHasPart(0, bytes, 0, bytes, ch, nch, 0, nRanks), p.n > 0);
          self.push_back(p);
        }
        expectExactCover(self, bytes, "self");
        if (bytes > 0 && nch > 1) {
          EXPECT_GT(self[nch - 1].n, 0) << "the last channel carries the first part";
        }
      }
    }
  }
}

// A small AlltoAll's rounds lie on different blocks, each within its
// round's nch / (nRanks - 1) channels (what lets the blocks skip the
// other rounds' items).
TEST(P2pSplit, SmallRoundsLieOnTheirOwnBlocks) {
  const int nRanks = 4, nch = 128;
  for (uint64_t bytes : {16ull, 1024ull, 40000ull}) {
    std::vector<int> owner(nch, 0);
    for (int round = 1; round < nRanks; round++) {
      for (int ch = 0; ch < nch; ch++) {
        int64_t off, n;
        p2pHalfShare(round, bytes, true, ch, nch, 0, nRanks, &off, &n);
        if (n == 0) continue;
        EXPECT_EQ(owner[ch], 0) << "channel " << ch << " carries rounds " << owner[ch] << " and " << round;
        owner[ch] = round;
        EXPECT_GE(ch, (round - 1) * nch / (nRanks - 1));
        EXPECT_LT(ch, (round - 1) * nch / (nRanks - 1) + nch / (nRanks - 1));
      }
    }
  }
}

}  // namespace
}  // namespace uniccl::dev
