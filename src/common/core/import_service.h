// Direct receives across processes (dev_types.h, p2pExchanges): a rank that
// receives a message in place into its ncclCommRegister'ed buffer offers the
// sender an address in the SENDER's process, so the buffer must be mapped
// there first. Each communicator with P2P peers in other processes of its
// host runs an ImportService: a thread listening on the abstract Unix
// socket "uniccl-imp-<commHash>-<rank>" that maps what a peer asks it to
// and answers with the address, and unmaps it when the peer asks (its
// ncclCommDeregister) or when this communicator goes (destroy, abort). The
// thread only waits on its socket and answers one request at a time, so a
// rank planning its group never waits on the peer's own thread (which may
// be inside a blocking call of its own).
//
// What travels: a VMM allocation (ncclMemAlloc; gpu::memRetainFromAddress
// finds it) as a file descriptor (gpu::memExportFd over SCM_RIGHTS), mapped
// whole at a reservation of its own; ordinary device memory as an IPC
// handle of its allocation (gpu::ipcOpenMemHandle). Repeated requests for
// one allocation from one rank share the mapping (counted).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "common/gpu.h"
#include "common/util/fd_passing.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

class ImportService {
 public:
  ImportService() = default;
  ~ImportService() { stop(); }
  ImportService(const ImportService&) = delete;
  ImportService& operator=(const ImportService&) = delete;

  // Listens and starts the thread (gpuDev: the device the mappings are for).
  ncclResult_t start(uint64_t commHash, int rank, int gpuDev);
  // Joins the thread and unmaps everything still imported. Idempotent.
  void stop();
  // Mappings alive (tests).
  size_t imports() const;

 private:
  struct Import {
    void* base = nullptr;      // where this process sees the peer's allocation
    size_t bytes = 0;
    bool vmm = false;          // a reservation + mapping (else an IPC open)
    int refs = 0;
  };
  using Key = std::pair<int, uint64_t>;   // (peer rank, the allocation's start in the peer's process)

  void serve();
  void release(Import& im);

  std::thread thread_;
  std::atomic<uint32_t> stop_{0};
  int gpuDev_ = -1;
  FdSocket listener_;
  mutable std::mutex mutex_;
  std::map<Key, Import> imports_;
};

// Client side, on the receiving rank. Asks `peer`'s service to map this
// rank's allocation [allocBase, allocBase + allocBytes) (vmm: a VMM
// allocation; else ordinary device memory) and sets *peerBase to where the
// peer's process sees allocBase. Waits at most the bootstrap timeout.
ncclResult_t importAtPeer(ncclComm* comm, int peer, uintptr_t allocBase, size_t allocBytes, bool vmm,
                          uintptr_t* peerBase);
// Tells `peer`'s service this rank no longer needs that mapping.
ncclResult_t releaseAtPeer(ncclComm* comm, int peer, uintptr_t allocBase);

// Starts comm->importService when some peer is on this host in another
// process and direct messages are on (UNICCL_P2P_DIRECT_MIN_BYTES > 0). A
// service that cannot start (its socket name taken) is a WARN, not a
// failed init: without it the peers' messages go through the slots.
ncclResult_t startImportService(ncclComm* comm);

}  // namespace uniccl
