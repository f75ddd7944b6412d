#include "common/topo/trees.h"

namespace uniccl::topo {

namespace {

void addChild(TreeNode* t, int child) {
  for (int& c : t->children) {
    if (c < 0) {
      c = child;
      return;
    }
  }
}

}  // namespace

std::vector<TreeNode> buildTree(const System& sys, int channel) {
  const int n = sys.nRanks();
  std::vector<TreeNode> tree(n, TreeNode{-1, {-1, -1}});
  const int which = channel % 2;
  if (sys.nHosts() <= 1) {
    for (int r = 0; r < n; r++) tree[r] = doubleBinaryTree(n, r, which);
    return tree;
  }
  const std::vector<int> hosts = hostOrder(sys);
  const int nh = (int)hosts.size();
  std::vector<std::vector<int>> chains(nh);
  const std::vector<std::vector<int>> byHost = sys.ranksByHost();
  for (int i = 0; i < nh; i++) {
    const std::vector<int>& local = byHost[hosts[i]];
    const int g = (int)local.size();
    const int start = (channel / 2) % g;
    for (int k = 0; k < g; k++) chains[i].push_back(local[(start + k) % g]);
    for (int k = 1; k < g; k++) {
      tree[chains[i][k]].parent = chains[i][k - 1];
      addChild(&tree[chains[i][k - 1]], chains[i][k]);
    }
  }
  // The rank of host i that child host k (0 or 1 of the host-level tree) attaches to.
  auto attach = [&](int i, int k) { return k == 1 && chains[i].size() > 1 ? chains[i][1] : chains[i][0]; };
  for (int i = 0; i < nh; i++) {
    const TreeNode ht = doubleBinaryTree(nh, i, which);
    for (int k = 0; k < kTreeMaxChildren; k++) {
      const int child = ht.children[k];
      if (child < 0) continue;
      const int from = attach(i, k), head = chains[child][0];
      tree[head].parent = from;
      addChild(&tree[from], head);
    }
  }
  return tree;
}

}  // namespace uniccl::topo
