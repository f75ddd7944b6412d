// The topology of a communicator as one value: hosts, their GPUs and the
// links between them, their NICs with their PCI distance to each GPU, and
// where every rank runs. Built once at init (topo/build.h, or read from a
// file: topo/topo_file.h) and handed to the pure functions that lay out the
// channels (topo/rings.h, topo/trees.h, topo/nics.h).
#pragma once

#include <string>
#include <vector>

namespace uniccl::topo {

// How two GPUs of one host reach each other, weakest first. Vendor-neutral:
// the backend says which of its links is which (gpu.h, peerLink).
enum class LinkClass : int {
  None = 0,    // no peer access: traffic goes through host memory
  Pcie = 1,    // peer access over PCIe
  Direct = 2,  // a point-to-point GPU link (an xGMI-like mesh: each pair its own link)
  Switch = 3,  // a GPU fabric switch (NVSwitch-like: every pair at full link bandwidth)
  Self = 4,    // the same GPU
};

const char* linkClassName(LinkClass c);
// false: `name` is not one of linkClassName's answers.
bool parseLinkClass(const std::string& name, LinkClass* out);

struct Link {
  LinkClass cls = LinkClass::None;
  int count = 0;   // links (lanes) of that class between the pair; 0: unknown
};

struct Nic {
  std::string name;            // "mlx5_0", "eth0"
  std::vector<int> distance;   // per GPU of the host: PCI hops between them; -1: unknown
};

struct Gpu {
  std::string busId;   // "0000:3b:00.0"
};

struct Host {
  std::string name;
  std::vector<Gpu> gpus;
  std::vector<Link> links;   // gpus.size()^2, row-major: links[a * G + b]
  std::vector<Nic> nics;

  int gpuCount() const { return (int)gpus.size(); }
  const Link& link(int a, int b) const { return links[(size_t)a * gpus.size() + b]; }
  void setLink(int a, int b, Link l) { links[(size_t)a * gpus.size() + b] = l; }
  // More than two GPUs, every pair joined by a Direct link: a mesh, on which
  // one ring uses only two of each GPU's links.
  bool directMesh() const;
};

struct RankPlace {
  int host = -1;   // index into System::hosts
  int gpu = -1;    // index into that host's gpus
};

struct System {
  std::vector<Host> hosts;
  std::vector<RankPlace> ranks;   // [nRanks]

  int nRanks() const { return (int)ranks.size(); }
  int nHosts() const { return (int)hosts.size(); }
  // The ranks of host h in the order the channels start from: by GPU index,
  // then by rank (several ranks on one GPU).
  std::vector<int> hostRanks(int h) const;
  // hostRanks of every host at once (one pass over the ranks).
  std::vector<std::vector<int>> ranksByHost() const;
  // Empty when the value is consistent; otherwise what is wrong (every rank
  // placed on an existing host and GPU, link and distance tables sized).
  std::string check() const;
};

// Hosts in ring order: by their lowest rank, so that the host of rank 0 comes first.
std::vector<int> hostOrder(const System& sys);

}  // namespace uniccl::topo
