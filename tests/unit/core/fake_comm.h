// A hand-built Ready communicator on the scripted fake GPU (tests/unit/fake),
// as tests/unit/api/validate_test.cc makes one: no bootstrap, no transports,
// so only work that needs no connection can launch (one rank, messages to
// itself). fake_kernels.cc gives the kernel addresses the launches log.
#pragma once

#include <random>
#include <vector>

#include "common/core/comm.h"
#include "uniccl.h"

namespace uniccl::test {

inline ncclComm* makeFakeComm(int rank, int nRanks, uint64_t hash = 0x5eed) {
  ncclComm* c = new ncclComm();
  c->rank = rank;
  c->nRanks = nRanks;
  c->gpuDev = 0;
  c->commHash = hash;
  c->nChannels = 1;   // what init wires; the tuning clamps to it
  c->p2pChannels = 1;
  c->asyncError.store(ncclSuccess);
  c->state.store(CommState::Ready);
  // One host, a GPU per rank, all behind one switch: what init finds on one machine.
  topo::Host host;
  host.name = "fake";
  host.gpus.resize(nRanks);
  host.links.assign((size_t)nRanks * nRanks, topo::Link{topo::LinkClass::Switch, 0});
  for (int g = 0; g < nRanks; g++) host.setLink(g, g, topo::Link{topo::LinkClass::Self, 0});
  c->topology.hosts.push_back(host);
  for (int r = 0; r < nRanks; r++) c->topology.ranks.push_back(topo::RankPlace{0, r});
  return c;
}

// Fresh random bytes (never all zeros or ones), so a copy that did not
// happen, or went to the wrong place, shows.
inline std::vector<unsigned char> randomBytes(size_t n, std::mt19937& rng) {
  std::vector<unsigned char> v(n);
  for (unsigned char& b : v) b = (unsigned char)(rng() & 0xff);
  return v;
}

}  // namespace uniccl::test
