// What the transports (common/transport) take of a communicator: core fills
// a TransportComm from ncclComm for each call, with hooks that report a
// network link's failure as the communicator's loss, and answers the
// questions core asks of the transports in terms of ncclComm.
#pragma once

#include <vector>

#include "common/transport/traffic.h"
#include "common/transport/transport.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

// The communicator as the transports see it now (channels, profiler).
TransportComm transportComm(ncclComm* comm);
// Every rank's peer info as Transports::init takes it.
std::vector<TransportPeer> transportPeers(const ncclComm* comm);
// The transport ranks a and b of comm use with each other.
TransportKind transportBetween(const ncclComm* comm, int a, int b);
// The communicator's traffic counters now (Transports::readTraffic).
[[nodiscard]] ncclResult_t readTraffic(const ncclComm* comm, Traffic* out);

}  // namespace uniccl
