// Traffic assertions for the emulator's multi-host runs (emu_coll_test
// --traffic=ring|tree): AllReduces whose bytes per link class, NIC, channel
// and peer (transport/traffic.h) must be exactly the algorithm's minimum on
// the communicator's topology.
#pragma once

#include <string>
#include <vector>

#include "nccl.h"

namespace uniccl::emu {

struct TrafficRank {
  int dev;
  ncclComm_t comm;
  uniccl_stream_t stream;
  void* send;
  void* recv;
  size_t capElems;   // floats in each buffer
};

// Runs float AllReduces (the caller forced the algorithm with NCCL_ALGO) and
// checks every rank's traffic. Adds to *checks and *failures; prints each
// collective's numbers.
void checkAllReduceTraffic(const std::vector<TrafficRank>& ranks, const std::string& algo, int* checks, int* failures);

}  // namespace uniccl::emu
