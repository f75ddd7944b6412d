// The NIC of every channel on every host, from the topology and the rings
// (a pure function).
//
// A channel's traffic enters a host at one GPU and leaves it at the GPU
// before it in the ring (topo/rings.h); the channel uses one NIC per host for
// both, as NCCL does, so that the receiving NIC on the next host is the same
// rail on hosts built alike. The NIC is the one nearest (PCI distance) to the
// channel's entry GPU; among equally near ones, the one fewest channels use
// so far: channels spread over all NICs when distances are unknown, and over
// the NICs near each GPU when they are known.
#pragma once

#include <string>
#include <vector>

#include "common/topo/system.h"

namespace uniccl::topo {

// The rank through which channel `ring` enters host h: the host's first rank
// after a rank of another host; with one host, the rank at ring position
// (channel mod n) (no traffic leaves the host, but the NIC choice stays defined).
int entryRank(const System& sys, const std::vector<int>& ring, int h, int channel);

// nic[c][h]: index into sys.hosts[h].nics of the NIC channel c uses on host
// h; -1 where the host has no NIC.
std::vector<std::vector<int>> assignNics(const System& sys, const std::vector<std::vector<int>>& rings);

}  // namespace uniccl::topo

namespace uniccl::topo {

// The NIC one rank's channel uses: an index into its host's nics and the
// NIC's name; index -1 (name empty) where the host has no NIC.
struct ChannelNic {
  int index = -1;
  std::string name;
};

// assignNics' answer for the host of `rank`, one entry per channel.
std::vector<ChannelNic> channelNicsOfRank(const System& sys, const std::vector<std::vector<int>>& nics, int rank);

}  // namespace uniccl::topo
