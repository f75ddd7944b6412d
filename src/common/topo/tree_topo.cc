#include "common/topo/tree_topo.h"

namespace uniccl {

// The binary tree of NCCL's ncclGetBtree, reasoned through on the bits:
// a rank r > 0 whose lowest set bit is b sits b levels above the leaves
// (odd ranks, b = 1, are leaves). Its parent is r with bit b cleared and bit
// 2b set, or, when that rank does not exist, r with bit b cleared. Its
// children are r - b/2 and the first of r + b/2, r + b/4, ... that exists.
// The root 0 has one child: the largest power of two below n.
//
// n = 13 (parent <- children):
//   0 <- 8;  8 <- 4, 12;  4 <- 2, 6;  12 <- 10;  2 <- 1, 3;  6 <- 5, 7;  10 <- 9, 11
//
// Every even rank r > 0 has the child r - b/2, so the interior nodes are
// exactly the even ranks and the leaves exactly the odd ones.
TreeNode binaryTree(int nRanks, int rank) {
  TreeNode t{-1, {-1, -1}};
  if (rank == 0) {
    int top = 1;
    while (top * 2 < nRanks) top *= 2;
    if (nRanks > 1) t.children[0] = top;
    return t;
  }
  const int bit = rank & -rank;
  int up = (rank ^ bit) | (bit << 1);
  if (up >= nRanks) up = rank ^ bit;
  t.parent = up;
  int low = bit >> 1;
  if (low == 0) return t;
  t.children[0] = rank - low;
  while (low > 0 && rank + low >= nRanks) low >>= 1;
  if (low > 0) t.children[1] = rank + low;
  return t;
}

TreeNode doubleBinaryTree(int nRanks, int rank, int which) {
  if (which == 0 || nRanks == 1) return binaryTree(nRanks, rank);
  const bool mirror = nRanks % 2 == 0;
  auto to = [&](int r) { return mirror ? nRanks - 1 - r : (r - 1 + nRanks) % nRanks; };
  auto from = [&](int r) { return r < 0 ? -1 : mirror ? nRanks - 1 - r : (r + 1) % nRanks; };
  const TreeNode v = binaryTree(nRanks, to(rank));
  return TreeNode{from(v.parent), {from(v.children[0]), from(v.children[1])}};
}

}  // namespace uniccl
