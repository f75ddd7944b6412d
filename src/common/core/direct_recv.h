// Direct receives (docs/architecture.md; dev_types.h, p2pExchanges): a message
// of at least UNICCL_P2P_DIRECT_MIN_BYTES received over a P2P connection
// into a buffer this rank registered with ncclCommRegister is stored there
// by the sender's kernel itself, with no staging slot. The receiver offers
// the address at which the SENDER's process sees the buffer: the same
// address for a peer of this process (its GPU reaches ours through peer
// access, or through ncclMemAlloc's access grants), else a mapping the
// peer's import service made (core/import_service.h), asked for once per
// (peer, allocation), in the background (core/direct_importer.h), and kept
// until ncclCommDeregister.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/core/direct_importer.h"
#include "common/core/import_service.h"
#include "common/core/registry.h"

struct ncclComm;

namespace uniccl {

// A communicator's direct receives (ncclComm::direct): the service that
// maps peers' buffers here, the importer that has peers map this rank's,
// and what the planner planned (tests, logs). Both exist only when some
// peer is on this host in another process and direct messages are on
// (startImportService).
struct DirectRecvs {
  std::unique_ptr<ImportService> service;
  std::unique_ptr<DirectImporter> importer;
  uint64_t p2pPlanned = 0;    // messages planned as direct receives
  uint64_t collPlanned = 0;   // AllGather / Broadcast outputs offered to the ring predecessor
};

// Where `peer` may store a message this rank receives into [buff, buff +
// bytes): an address in the peer's process, or 0 (not registered, not over
// P2P, memory the peer cannot map: the message goes through the slots).
// Never waits for the peer: the first message from a peer of another
// process into an allocation gets 0 and queues the peer's mapping; later
// calls get the address once the importer recorded it.
uintptr_t directRecvTarget(ncclComm* comm, int peer, void* buff, size_t bytes);

// Until the importer answered every request queued so far: plans made after
// it see the answers (tests; nothing when the communicator has no importer).
void waitDirectImports(ncclComm* comm);

// ncclCommDeregister: the peers that mapped the buffer's allocations unmap
// them (DirectImporter::releaseViews).
void releaseDirectViews(ncclComm* comm, const std::vector<PeerView>& views);

}  // namespace uniccl
