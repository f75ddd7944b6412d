// LSA ("load/store accessible") teams of the Device API: which ranks of a
// communicator can read and write each other's GPU memory directly.
//
// NCCL's definition (2.28): one team size for every rank, the teams being
// blocks of consecutive ranks (team of rank r: ranks r - r % size ...
// + size - 1). Every rank must compute the same size, so it is derived
// from data all ranks share: the greatest common divisor of the lengths of
// the runs of consecutive ranks that can load/store each other, and of
// NCCL_LSA_TEAM_SIZE when set. uniccl counts two ranks as able to load/store
// each other when they are on one host and their GPUs are P2P-reachable in
// both directions (the reach matrix of transport/transport.h, allgathered at
// init), since that is what mapping a peer's memory needs; NCCL uses the
// node only. With NCCL_P2P_DISABLE=1 every LSA team is a single rank.
//
// A communicator's own team is core/comm_lsa.h's lsaPlace(); windows and
// device communicators take the LsaPlace it answers.
#pragma once

#include <functional>

namespace uniccl {

// The LSA team size of nRanks ranks where canLoadStore(a, b) says whether
// ranks a and b reach each other's memory. A run grows while the next rank
// reaches every rank of the run. sizeHint (NCCL_LSA_TEAM_SIZE; 0 = none)
// joins the gcd. Always >= 1 and divides nRanks.
int lsaTeamSize(int nRanks, int sizeHint, const std::function<bool(int, int)>& canLoadStore);

struct LsaPlace {
  int size = 1;  // ranks per LSA team
  int self = 0;  // this rank's place in its team (rank % size)
};

}  // namespace uniccl
