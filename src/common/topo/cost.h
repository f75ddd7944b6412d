// What links cost, and what the channels' algorithms cost over a topology
// (pure functions): the latency of one hop and the bandwidth of each link
// class, and the time a ring, a tree or a log-depth exchange (PAT) takes
// for a collective on a System's shape. The tuning (core/tuning.cc) picks
// the algorithm from these across hosts, and ncclGroupSimulateEnd's
// estimate (core/cost_model.h) uses them (docs/topology.md, "Cost model").
//
// The model, for n ranks on H hosts of G ranks each, C channels, S bytes:
//   - a ring's chunk passes every rank: per pass, H network hops and n-H
//     hops inside the hosts; its bandwidth is the slowest hop class's
//     (the network's: min(C, NICs) NICs per host, the channels sharing them);
//   - a tree's latency is its depth: G-1 hops of each host's chain plus
//     ceil(log2 H) network levels (each with up to one more hop inside the
//     host), up and down;
//   - PAT (one rank per host only): ceil(log2 n) network rounds, each rank
//     moving (n-1)/n of S as the ring does.
#pragma once

#include <cstddef>
#include <string>

#include "common/topo/system.h"

namespace uniccl::topo {

// One link class's figures.
struct ClassCost {
  double hopUs = 0;        // a step's latency over one hop with the Simple protocol
  double gbs = 0;          // GB/s a GPU sends over the class (all its links of it; the network: per NIC)
  double channelGBs = 0;   // GB/s one channel reaches over it
};

struct LinkCosts {
  ClassCost none;      // through host memory (no peer access)
  ClassCost pcie;
  ClassCost direct;    // per link: a mesh GPU's ring channels spread over its links (meshLinks)
  ClassCost fabric;    // a switch: every pair at full speed
  ClassCost net;       // one NIC
  const ClassCost& of(LinkClass c) const;
};

// The documented defaults (docs/topology.md, "Cost model").
LinkCosts defaultLinkCosts();

// Applies UNICCL_LINK_COSTS' text: a comma list of CLASS=HOP_US:GBS[:CHANNEL_GBS]
// (CLASS: none, pcie, direct, switch, net). false and *err on bad text;
// then *costs is unchanged.
bool applyLinkCosts(const std::string& text, LinkCosts* costs, std::string* err);

// What the estimates read from a System (computed once per communicator).
struct Shape {
  int nRanks = 1;
  int nHosts = 1;
  int ranksPerHost = 1;                 // the most ranks any host holds
  LinkClass intra = LinkClass::Switch;  // the weakest link between GPUs of one host that hold ranks
  int meshLinks = 1;                    // a direct-link mesh: links of each GPU the channels spread over
  int nics = 1;                         // fewest NICs of a host (a host without any counts as one)
};
Shape shapeOf(const System& sys);

enum class Algo { Ring, Tree, Pat };
enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce };

// A time estimate's parts: time = latencyUs + busBytes / (busGBs * 1e3).
struct Estimate {
  double latencyUs = 0;
  double busBytes = 0;
  double busGBs = 1;
  bool applies = false;   // false: the algorithm does not run this collective on this shape
  double us() const { return latencyUs + busBytes / (busGBs * 1e3); }
};

// Collective of `bytes` (the whole buffer a rank ends up with) with `algo`
// on `nChannels` channels, Simple protocol, launch excluded. The tree runs
// AllReduce only; PAT runs AllGather, ReduceScatter and AllReduce (as a
// ReduceScatter then an AllGather) with one rank per host only.
Estimate estimate(const Shape& shape, const LinkCosts& costs, Algo algo, Coll coll, double bytes, int nChannels);

// ceil(log2(n)), 0 for n <= 1.
int ceilLog2(int n);

}  // namespace uniccl::topo
