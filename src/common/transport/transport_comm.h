// What the transports take of their communicator. Connecting a pair of
// ranks needs only these few things of it, and a network link that fails
// must tell the communicator, which the transports do not know: core fills
// one from ncclComm (core/comm_transport.h) for every call, with hooks that
// act on the communicator; tests may make their own.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "device/dev_types.h"
#include "uniccl.h"

namespace uniccl {

class Bootstrap;
class ProfilerContext;

// What the transports need of one rank's peer info (the init's allgather).
struct TransportPeer {
  uint64_t hostHash = 0;      // equal: same machine
  uint64_t processHash = 0;   // equal: same process (raw pointers work)
  int gpuDev = -1;            // device index in that rank's own process
  int64_t busIdNum = 0;       // equal: the same GPU
  std::string busId;          // "0000:3b:00.0": finds that GPU in this process
  bool lineStoreAtomic128 = false;   // its GPU delivers a warp's aligned 128-byte store whole
};

struct TransportComm {
  int rank = 0;
  int nRanks = 0;
  int gpuDev = -1;
  Bootstrap* bootstrap = nullptr;        // the offers' and network handles' messages
  std::string netName;                   // the config's net (empty: NCCL_NET or the default)
  int nChannels = 0;                     // channels to wire
  const dev::Channel* channelsHost = nullptr;  // [nChannels]: each channel's peers array (device memory) is wired
  ProfilerContext* profiler = nullptr;   // network proxy ops report to it (nullptr: no profiler)
  // The communicator was aborted: a network handshake stops waiting.
  std::function<bool()> aborted;
  // A network link could not reach `peer` (the handshake failed): `text`
  // names it, for the communicator's last error.
  std::function<void(int peer, const std::string& text)> peerUnreachable;
  // A network link's send to `peer` failed on the proxy thread: the
  // communicator fails with `result` and aborts, `text` saying why.
  std::function<void(int peer, ncclResult_t result, const std::string& text)> failed;
};

}  // namespace uniccl
