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

TEST(AlgoList, BadValuesWarnAndUseTheDefault) {
  expectMask("Rnig", true, true, true);               // unknown name
  expectMask("Ring,Bogus", true, true, true);
  expectMask("^Ring,Tree", true, true, true);         // nothing left
  expectMask("NVLS", true, true, true);               // nothing uniccl implements
  expectMask("", true, true, true);
  expectMask("allreduce:tree;broadcast:ring", true, true, true);  // per-collective form
}

}  // namespace
}  // namespace uniccl
