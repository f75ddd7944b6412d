// This rank's LSA team in its communicator (topo/lsa_team.h says what a team
// is): decided from the comm's reach matrix and NCCL_LSA_TEAM_SIZE, then
// fixed for the comm's life.
#pragma once

#include "common/topo/lsa_team.h"

struct ncclComm;

namespace uniccl {

// This rank's LSA team in comm (an initialized communicator).
LsaPlace lsaPlace(const ncclComm* comm);

}  // namespace uniccl
