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
