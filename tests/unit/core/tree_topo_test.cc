// The double binary tree topology: both trees of every size 1..64 are
// spanning trees with consistent parent/child links, bounded degree and
// logarithmic depth, and they complement each other (a rank's reduce work
// is in one tree only).
#include <gtest/gtest.h>

#include <vector>

#include "common/topo/tree_topo.h"

namespace uniccl {
namespace {

int nChildren(const TreeNode& t) { return (t.children[0] >= 0) + (t.children[1] >= 0); }

void checkTree(int n, int which) {
  SCOPED_TRACE("n=" + std::to_string(n) + " tree " + std::to_string(which));
  std::vector<TreeNode> t(n);
  for (int r = 0; r < n; r++) t[r] = doubleBinaryTree(n, r, which);
  int roots = 0;
  for (int r = 0; r < n; r++) {
    const TreeNode& v = t[r];
    if (v.parent < 0) roots++;
    ASSERT_GE(v.parent, -1);
    ASSERT_LT(v.parent, n);
    ASSERT_NE(v.parent, r);
    ASSERT_LE(nChildren(v) + (v.parent >= 0), 3);
    // children[0] first, distinct, in range, and they name us as parent.
    if (v.children[1] >= 0) {
      ASSERT_GE(v.children[0], 0);
      ASSERT_NE(v.children[0], v.children[1]);
    }
    for (int c : v.children) {
      if (c < 0) continue;
      ASSERT_LT(c, n);
      ASSERT_NE(c, r);
      EXPECT_EQ(t[c].parent, r) << "child " << c << " of " << r;
    }
    // Our parent lists us as a child.
    if (v.parent >= 0) {
      const TreeNode& p = t[v.parent];
      EXPECT_TRUE(p.children[0] == r || p.children[1] == r) << r << " not a child of " << v.parent;
    }
  }
  EXPECT_EQ(roots, 1);
  // Every rank reaches the root, in at most log2(n) + 2 hops (no cycles).
  int maxDepth = 2;
  for (int m = 1; m < n; m *= 2) maxDepth++;
  for (int r = 0; r < n; r++) {
    int hops = 0, x = r;
    while (t[x].parent >= 0 && hops <= n) {
      x = t[x].parent;
      hops++;
    }
    EXPECT_EQ(t[x].parent, -1);
    EXPECT_LE(hops, maxDepth) << "rank " << r;
  }
  // The root has exactly one child (the reduce flows into it over one link).
  for (int r = 0; r < n; r++) {
    if (t[r].parent < 0) {
      EXPECT_EQ(nChildren(t[r]), n > 1 ? 1 : 0);
    }
  }
}

TEST(TreeTopo, BothTreesAreSpanningTreesUpTo64Ranks) {
  for (int n = 1; n <= 64; n++) {
    checkTree(n, 0);
    checkTree(n, 1);
  }
}

TEST(TreeTopo, TreesAreComplementary) {
  for (int n = 2; n <= 64; n++) {
    SCOPED_TRACE("n=" + std::to_string(n));
    int both = 0, neither = 0;
    for (int r = 0; r < n; r++) {
      const bool in0 = nChildren(doubleBinaryTree(n, r, 0)) > 0;
      const bool in1 = nChildren(doubleBinaryTree(n, r, 1)) > 0;
      if (in0 && in1) {
        both++;
        EXPECT_EQ(r, 0) << "only rank 0 (odd n) may be interior in both trees";
      }
      if (!in0 && !in1) neither++;
    }
    EXPECT_EQ(both, n % 2 == 1 && n > 1 ? 1 : 0);
    // Even n: the interior sets partition the ranks.
    if (n % 2 == 0) {
      EXPECT_EQ(neither, 0);
    }
    // The roots differ, so the two trees' broadcast starts on different ranks.
    int root0 = -1, root1 = -1;
    for (int r = 0; r < n; r++) {
      if (doubleBinaryTree(n, r, 0).parent < 0) root0 = r;
      if (doubleBinaryTree(n, r, 1).parent < 0) root1 = r;
    }
    EXPECT_NE(root0, root1);
  }
}

TEST(TreeTopo, KnownShapes) {
  // One rank: alone in both trees.
  TreeNode a = doubleBinaryTree(1, 0, 1);
  EXPECT_EQ(a.parent, -1);
  EXPECT_EQ(nChildren(a), 0);
  // Two ranks: 0 -> 1 in tree 0, 1 -> 0 in tree 1.
  EXPECT_EQ(doubleBinaryTree(2, 1, 0).parent, 0);
  EXPECT_EQ(doubleBinaryTree(2, 0, 1).parent, 1);
  // Eight ranks, tree 0: 0 -> 4 -> {2, 6}, 2 -> {1, 3}, 6 -> {5, 7}.
  TreeNode r4 = binaryTree(8, 4);
  EXPECT_EQ(r4.parent, 0);
  EXPECT_EQ(r4.children[0], 2);
  EXPECT_EQ(r4.children[1], 6);
  TreeNode r6 = binaryTree(8, 6);
  EXPECT_EQ(r6.parent, 4);
  EXPECT_EQ(r6.children[0], 5);
  EXPECT_EQ(r6.children[1], 7);
  // Tree 1 of eight is the mirror: 7 -> 3 -> {5, 1}.
  TreeNode m3 = doubleBinaryTree(8, 3, 1);
  EXPECT_EQ(m3.parent, 7);
  EXPECT_EQ(m3.children[0], 5);
  EXPECT_EQ(m3.children[1], 1);
  // Three ranks, tree 1 is the shift: 1 -> 0 -> 2.
  EXPECT_EQ(doubleBinaryTree(3, 1, 1).parent, -1);
  EXPECT_EQ(doubleBinaryTree(3, 0, 1).parent, 1);
  EXPECT_EQ(doubleBinaryTree(3, 2, 1).parent, 0);
}

}  // namespace
}  // namespace uniccl
