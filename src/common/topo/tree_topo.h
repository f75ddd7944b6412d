// Double binary tree topology (NCCL's shape) for the tree algorithm.
//
// Tree 0 is a binary tree over the ranks 0..n-1 rooted at rank 0 whose
// interior nodes are exactly the even ranks (the leaves: the odd ones).
// Tree 1 is its mirror (rank r -> n-1-r) when n is even or its shift by one
// (r -> r+1 mod n) when n is odd, so the odd ranks carry the interior work
// there: with even n every rank is interior in exactly one tree; with odd n
// rank 0 is interior in both and every other rank in exactly one. Channel c of a communicator uses tree c % 2, which spreads
// the reduce/broadcast load over all ranks' links.
//
// Pure functions of (nRanks, rank): every rank computes the same trees with
// no communication, and both ends of every edge agree.
#pragma once

namespace uniccl {

constexpr int kTreeMaxChildren = 2;

struct TreeNode {
  int parent;                       // -1: the root
  int children[kTreeMaxChildren];   // -1: none; children[0] is filled before children[1]
};

// Tree 0 (rooted at 0). nRanks >= 1, 0 <= rank < nRanks.
TreeNode binaryTree(int nRanks, int rank);

// Tree `which` (0 or 1) of the double binary tree.
TreeNode doubleBinaryTree(int nRanks, int rank, int which);

}  // namespace uniccl
