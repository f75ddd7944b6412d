// The tree of every channel, from the topology (pure functions).
//
// One host: the double binary tree over all ranks (topo/tree_topo.h),
// channel c on tree c % 2.
//
// Several hosts: a chain inside each host and a double binary tree across
// the hosts (NCCL's shape). Channel c uses the host-level tree c % 2 and
// starts each host's chain at its (c / 2 mod G)-th rank (the chain's head),
// so channel pairs take turns at which GPU talks to the network. The head
// receives from (and sends to) the parent host; a host's first child host
// hangs off its head, its second off the chain's second rank (a node has at
// most kTreeMaxChildren children: the head already has the chain), or off
// the head too when the host has one rank. The path from the root to any
// rank is at most two hops per host level plus the chain: depth
// O(log H + G).
#pragma once

#include <vector>

#include "common/topo/tree_topo.h"
#include "common/topo/system.h"

namespace uniccl::topo {

// tree[r] = rank r's parent and children in channel c's tree.
std::vector<TreeNode> buildTree(const System& sys, int channel);

}  // namespace uniccl::topo
