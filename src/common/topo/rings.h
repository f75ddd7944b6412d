// The ring of every channel, from the topology (pure functions).
//
// One host without a GPU mesh: every channel's ring is the rank order
// 0, 1, ..., n-1 (inside an NVSwitch or PCIe box any order moves the same
// bytes over the same kind of link).
//
// A direct-link mesh (every pair of a host's GPUs joined by its own link,
// e.g. 8 GPUs over xGMI): a single ring would use two links of each GPU.
// The channels take turns over Hamiltonian cycles that together use every
// link (meshCycles), first in one direction, then reversed, so that both
// directions of every link carry traffic once the channels cover them.
//
// Several hosts: each host's ranks are contiguous in every ring, so a ring
// crosses each host boundary once in each direction (hosts in the order of
// their lowest rank). Channel c enters every host at its c-th GPU (modulo the
// host's GPU count) and walks the host's cycle from there, leaving through
// the GPU before it: different channels enter and leave through different
// GPUs and so spread over the host's NICs (topo/nics.h).
#pragma once

#include <vector>

#include "common/topo/system.h"

namespace uniccl::topo {

// Hamiltonian cycles of the complete graph on g vertices (0..g-1) that
// together contain every edge: (g-1)/2 of them for odd g (Walecki's
// decomposition, each edge once) and g/2 for even g (the zig-zag
// Hamiltonian paths, each closed by one edge that another cycle also uses).
// g < 3: the one cycle 0..g-1.
std::vector<std::vector<int>> meshCycles(int g);

// ring[i] = the rank at position i of channel c's ring.
std::vector<int> buildRing(const System& sys, int channel);

// Every channel's ring: rings[c] for c < nChannels.
std::vector<std::vector<int>> buildRings(const System& sys, int nChannels);

}  // namespace uniccl::topo
