// Direct receives across processes (dev_types.h, p2pExchanges): a rank that
// receives a message in place into its ncclCommRegister'ed buffer offers the
// sender an address in the SENDER's process, so the buffer must be mapped
// there first. Each communicator with P2P peers in other processes of its
// host runs an ImportService: a thread listening on an abstract Unix socket
// whose name is derived from the communicator's secret (util/fd_auth.h: no
// other process can take it first), that maps what a peer asks it to and
// answers with the address, and unmaps it when the peer asks (its
// ncclCommDeregister) or when this communicator goes (destroy, abort). The
// thread only waits on its sockets, so a rank planning its group never
// waits on the peer's own thread (which may be inside a blocking call of
// its own). It serves its clients at once (one poll loop, at most
// kMaxImportClients connections), and honours a request only from a client
// that proved the communicator's secret (auth.h, context "import-service"):
// a client that stalls or cannot prove it delays nobody else.
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
#include <string>
#include <thread>
#include <utility>

#include "common/gpu.h"
#include "common/util/auth.h"
#include "common/util/fd_auth.h"
#include "common/util/fd_passing.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

struct ImportRequest;   // the wire messages (import_service.cc)
struct ImportReply;

// Connections one service holds at once (authenticated or not).
constexpr size_t kMaxImportClients = 64;

// What a rank's service and its clients agree on: the communicator's secret
// (the service's name and the proofs) and hash, and, for a client, its rank
// and the abort flag its waits watch.
struct ImportEndpoint {
  AuthSecret secret{};
  uint64_t commHash = 0;
  int rank = -1;
  const std::atomic<uint32_t>* abortFlag = nullptr;
};
ImportEndpoint importEndpoint(ncclComm* comm);
// The abstract socket name of `rank`'s service.
std::string importServiceName(const AuthSecret& secret, uint64_t commHash, int rank);

class ImportService {
 public:
  ImportService() = default;
  ~ImportService() { stop(); }
  ImportService(const ImportService&) = delete;
  ImportService& operator=(const ImportService&) = delete;

  // Listens and starts the thread (gpuDev: the device the mappings are for).
  // A name in use is ncclSystemError with a WARN, nothing started.
  [[nodiscard]] ncclResult_t start(const AuthSecret& secret, uint64_t commHash, int rank, int gpuDev);
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
  // One message of an authenticated client; false when its exchange is over.
  bool handle(FdAuthServer::Conn& c);
  void importOne(const ImportRequest& req, int fd, ImportReply* reply);
  void release(Import& im);

  std::thread thread_;
  std::atomic<uint32_t> stop_{0};
  int gpuDev_ = -1;
  AuthSecret secret_{};
  FdSocket listener_;
  mutable std::mutex mutex_;
  std::map<Key, Import> imports_;
};

// Client side, on the receiving rank. Asks `peer`'s service to map this
// rank's allocation [allocBase, allocBase + allocBytes) (vmm: a VMM
// allocation; else ordinary device memory) and sets *peerBase to where the
// peer's process sees allocBase. Waits at most the bootstrap timeout.
[[nodiscard]] ncclResult_t importAtPeer(const ImportEndpoint& self, int peer, uintptr_t allocBase, size_t allocBytes, bool vmm,
                          uintptr_t* peerBase);
// Tells `peer`'s service this rank no longer needs that mapping.
[[nodiscard]] ncclResult_t releaseAtPeer(const ImportEndpoint& self, int peer, uintptr_t allocBase);
[[nodiscard]] inline ncclResult_t importAtPeer(ncclComm* comm, int peer, uintptr_t allocBase, size_t allocBytes, bool vmm,
                                 uintptr_t* peerBase) {
  return importAtPeer(importEndpoint(comm), peer, allocBase, allocBytes, vmm, peerBase);
}
[[nodiscard]] inline ncclResult_t releaseAtPeer(ncclComm* comm, int peer, uintptr_t allocBase) {
  return releaseAtPeer(importEndpoint(comm), peer, allocBase);
}

// Starts comm->direct's service (and makes its importer,
// core/direct_importer.h) when some peer is on this host in another process
// and direct messages are on (UNICCL_P2P_DIRECT_MIN_BYTES > 0). A service
// that cannot start (its socket name taken, which a name derived from the
// secret makes unlikely) is a WARN, not a failed init: without it the
// peers' messages go through the slots.
[[nodiscard]] ncclResult_t startImportService(ncclComm* comm);

}  // namespace uniccl
