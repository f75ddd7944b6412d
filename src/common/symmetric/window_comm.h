// What symmetric windows take of their communicator. Registration is a
// collective over the comm's ranks, but windows need only these few
// things of it; core makes one from ncclComm (core/comm_symmetric.h), tests
// make their own.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "common/topo/lsa_team.h"

namespace uniccl {

class Bootstrap;
struct SymmetricState;
namespace dev {
struct DevComm;
}

struct WindowComm {
  int rank = 0;
  int nRanks = 0;
  int gpuDev = -1;
  uint64_t commHash = 0;                  // with rank and registration, names the descriptor sockets
  Bootstrap* bootstrap = nullptr;         // the allgathers; its secret guards the descriptor sockets
  std::vector<uint64_t> processHash;      // [nRanks]: ranks of one process share handles as they are
  const std::atomic<uint32_t>* hostAbort = nullptr;   // when set, the descriptor exchange stops waiting (nullptr: none)
  LsaPlace lsa;                           // this rank's LSA team
  SymmetricState** state = nullptr;       // the comm's windows; the first registration creates them
  // The comm's DevCommHost and device DevComm, where the kernels find the
  // symmetric collectives' barrier.
  dev::DevComm* devCommHost = nullptr;
  dev::DevComm* devComm = nullptr;
};

}  // namespace uniccl
