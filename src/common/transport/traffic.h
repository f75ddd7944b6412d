// Traffic accounting: the payload bytes one rank sent through its
// connections, by link class (P2P and SHM inside a host, the network across
// hosts), by NIC and by channel and peer.
//
// The kernels count: every send connection carries a byte counter
// (dev::SendConn::bytesSent) that the sending group adds its payload to once
// per primitive run, not per step, so the count costs nothing measurable.
// Payload means the user data a step carries (LL and LL128 line flags, slot
// padding and the network's framing are not counted); data a sender stores
// directly into the receiver's buffer counts as sent through that P2P
// connection. Copy-engine transfers, symmetric-memory kernels and the device
// API (GIN) do not go through connections and are not counted.
//
// The counters only grow; per collective traffic is the difference of two
// reads. Read when no kernel of the communicator runs (after the stream
// synchronized): the host copies the counters from device memory.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "uniccl.h"

namespace uniccl {

struct Traffic {
  uint64_t p2p = 0;   // through P2P connections (GPU to GPU inside a host)
  uint64_t shm = 0;   // through SHM connections (host memory inside a host)
  uint64_t net = 0;   // through the network transport
  // Network bytes per NIC: the topology's NIC name of the channel
  // (docs/topology.md, NIC per channel), else the network device's name.
  std::map<std::string, uint64_t> nic;
  // bytes[channel][peer]: bytes sent to peer on that channel (any class).
  std::vector<std::vector<uint64_t>> bytes;

  uint64_t intraHost() const { return p2p + shm; }
  // This minus an earlier read of the same communicator.
  Traffic since(const Traffic& before) const;
};

}  // namespace uniccl
