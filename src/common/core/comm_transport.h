// What the transports (common/transport) take of a communicator: core fills
// a TransportComm from ncclComm for each call, with hooks that report a
// network link's failure as the communicator's loss.
#pragma once

#include "common/transport/transport_comm.h"

struct ncclComm;

namespace uniccl {

// The communicator as the transports see it now (channels, profiler).
TransportComm transportComm(ncclComm* comm);

}  // namespace uniccl
