// NCCL_ALGO parsing: NCCL's list syntax, what is honoured, what falls back.
#include <gtest/gtest.h>

#include "common/core/tuning.h"
#include "common/util/debug.h"

namespace uniccl {
namespace {

void expectMask(const char* value, bool ring, bool tree, bool warns) {
  SCOPED_TRACE(std::string("NCCL_ALGO=") + value);
  clearLastError();
  const AlgoMask m = parseAlgoList(value);
  EXPECT_EQ(m.ring, ring);
  EXPECT_EQ(m.tree, tree);
  EXPECT_EQ(lastErrorMessage()[0] != '\0', warns) << lastErrorMessage();
}

TEST(AlgoList, NamesListsAndExclusions) {
  expectMask("Ring", true, false, false);
  expectMask("Tree", false, true, false);
  expectMask("tree", false, true, false);
  expectMask("RING,TREE", true, true, false);
  expectMask(" Tree , Ring ", true, true, false);
  expectMask("^Tree", true, false, false);
  expectMask("^ring", false, true, false);
}

TEST(AlgoList, OtherNcclAlgorithmsAreIgnored) {
  expectMask("Tree,NVLS", false, true, false);
  expectMask("^NVLS,CollNetDirect", true, true, false);
  expectMask("PAT,Ring", true, false, false);
}

// PAT (AllGather in log-depth rounds, core/allgather_pat.h) is allowed by
// default, named alone (forced, the ring's collectives keep the ring), or
// excluded.
TEST(AlgoList, Pat) {
  clearLastError();
  EXPECT_TRUE(parseAlgoList("Ring,Tree").pat == false);
  EXPECT_TRUE(parseAlgoList("Ring,PAT").pat);
  const AlgoMask alone = parseAlgoList("pat");
  EXPECT_TRUE(alone.pat);
  EXPECT_FALSE(alone.ring);
  EXPECT_FALSE(alone.tree);
  const AlgoMask excluded = parseAlgoList("^PAT");
  EXPECT_FALSE(excluded.pat);
  EXPECT_TRUE(excluded.ring);
  EXPECT_TRUE(excluded.tree);
  EXPECT_TRUE(AlgoMask{}.pat);
  EXPECT_EQ(lastErrorMessage()[0], '\0') << lastErrorMessage();
  // Nothing left: the default selection, PAT included.
  const AlgoMask none = parseAlgoList("^Ring,Tree,PAT");
  EXPECT_TRUE(none.ring && none.tree && none.pat);
  EXPECT_NE(lastErrorMessage()[0], '\0');
}

TEST(AlgoList, BadValuesWarnAndUseTheDefault) {
  expectMask("Rnig", true, true, true);               // unknown name
  expectMask("Ring,Bogus", true, true, true);
  expectMask("^Ring,Tree,PAT", true, true, true);     // nothing left
  expectMask("NVLS", true, true, true);               // nothing uniccl implements
  expectMask("", true, true, true);
  expectMask("allreduce:tree;broadcast:ring", true, true, true);  // per-collective form
}

}  // namespace
}  // namespace uniccl
