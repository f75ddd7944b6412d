// What a communicator hands its symmetric windows (symmetric/window_comm.h).
#pragma once

#include "common/symmetric/window_comm.h"

struct ncclComm;

namespace uniccl {

// comm's ranks, device, bootstrap, processes, abort flag, LSA team, window
// state and DevComm, for one registration or window call (an initialized
// communicator).
WindowComm windowComm(ncclComm* comm);

}  // namespace uniccl
