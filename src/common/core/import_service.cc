#include "common/core/import_service.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "common/bootstrap/wire.h"
#include "common/check.h"
#include "common/core/comm.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl {

namespace {

constexpr uint32_t kImportMagic = 0x75696d70;   // "uimp"
enum : uint32_t { kOpImport = 1, kOpRelease = 2 };
constexpr int64_t kConnectMs = 2000;
constexpr int kPollSliceMs = 50;                // how often the thread looks at its stop flag
constexpr const char* kAuthContext = "import-service";
enum : int { kAwaitRequest = 0, kAwaitFd = 1 };  // FdAuthServer::Conn::stage

// Requests are small and answered at once: a peer that takes longer than
// the bootstrap's timeout is gone.
Deadline requestDeadline() { return deadlineAfterMs(bootstrap::timeoutMs()); }

}  // namespace

// One request: this header, then (import of a VMM allocation) a second
// message carrying the allocation's file descriptor.
struct ImportRequest {
  uint32_t magic;
  uint32_t op;
  int32_t rank;        // the asking rank
  uint32_t vmm;
  uint64_t base;       // the allocation's start in the asking process (the key)
  uint64_t bytes;
  gpu::IpcMemHandle ipc;   // ordinary device memory: the allocation's IPC handle
};

struct ImportReply {
  int32_t status;      // ncclResult_t
  uint32_t pad;
  uint64_t base;       // import: where the service's process sees the allocation
};

std::string importServiceName(const AuthSecret& secret, uint64_t commHash, int rank) {
  char label[64];
  snprintf(label, sizeof(label), "import-service %016" PRIx64 " %d", commHash, rank);
  return secretSocketName(secret, "imp", label);
}

ImportEndpoint importEndpoint(ncclComm* comm) {
  ImportEndpoint e;
  if (comm->bootstrap) e.secret = comm->bootstrap->secret();
  e.commHash = comm->commHash;
  e.rank = comm->rank;
  e.abortFlag = &comm->hostAbort;
  return e;
}

ncclResult_t ImportService::start(const AuthSecret& secret, uint64_t commHash, int rank, int gpuDev) {
  gpuDev_ = gpuDev;
  secret_ = secret;
  UCHECK(listener_.listen(importServiceName(secret, commHash, rank)));
  stop_.store(0);
  thread_ = std::thread([this] { serve(); });
  return ncclSuccess;
}

void ImportService::stop() {
  stop_.store(1);
  if (thread_.joinable()) thread_.join();
  listener_.close();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& kv : imports_) release(kv.second);
  imports_.clear();
}

size_t ImportService::imports() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return imports_.size();
}

// A release that fails was logged by the backend; the import is gone either way.
void ImportService::release(Import& im) {
  if (im.vmm) {
    (void)gpu::memUnmap(im.base, im.bytes);
    (void)gpu::addressFree(im.base, im.bytes);
  } else {
    (void)gpu::ipcCloseMemHandle(im.base);
  }
  im.base = nullptr;
}

void ImportService::serve() {
  // A library thread: whatever goes wrong ends here as a WARN (the
  // communicator goes on; its peers' messages then go through the slots).
  try {
    // Mappings are made for (and IPC handles opened on) the comm's GPU. On
    // another one each import fails and says so to its client, which then
    // plans through the slots: serve all the same.
    if (gpu::setDevice(gpuDev_) != ncclSuccess) WARN("import service: cannot use GPU %d; its imports will fail", gpuDev_);
    FdAuthServer server(&listener_, secret_, kAuthContext, kMaxImportClients, bootstrap::timeoutMs(),
                        "import service");
    const FdAuthServer::OnReadable onReadable = [this](FdAuthServer::Conn& c) { return handle(c); };
    while (stop_.load() == 0) {
      try {
        server.step(kPollSliceMs, onReadable);
      } catch (const std::exception& e) {
        WARN("import service: %s", e.what());
      }
    }
  } catch (const std::exception& e) {
    WARN("import service stopped: %s; peers' registered buffers are no longer mapped here", e.what());
  } catch (...) {
    WARN("import service stopped after an unknown error; peers' registered buffers are no longer mapped here");
  }
}

bool ImportService::handle(FdAuthServer::Conn& c) {
  // Inside the loop nothing waits: poll said a message is there.
  const Deadline now = Clock::now();
  ImportReply reply{};
  reply.status = ncclSuccess;
  if (c.stage == kAwaitFd) {
    ImportRequest req;
    memcpy(&req, c.saved.data(), sizeof(req));
    UniqueFd fd;
    uint32_t tag = 0;
    if (recvFds(c.sock, &fd, 1, &tag, sizeof(tag), now) != ncclSuccess || tag != kImportMagic) return false;
    importOne(req, fd.get(), &reply);
    // The connection closes after the answer either way; a client whose
    // answer was lost fails its request (and plans through the slots).
    (void)sendFds(c.sock, nullptr, 0, &reply, sizeof(reply), now);
    return false;
  }
  ImportRequest req{};
  if (recvFds(c.sock, nullptr, 0, &req, sizeof(req), now) != ncclSuccess) return false;
  if (req.magic != kImportMagic || (req.op != kOpImport && req.op != kOpRelease)) {
    WARN("import service: a malformed request (magic %#x, op %u): ignored", req.magic, req.op);
    return false;
  }
  if (req.op == kOpImport && req.vmm) {   // the descriptor comes in the next message
    c.saved.assign(reinterpret_cast<const char*>(&req), reinterpret_cast<const char*>(&req) + sizeof(req));
    c.stage = kAwaitFd;
    return true;
  }
  if (req.op == kOpRelease) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = imports_.find(Key{req.rank, req.base});
    if (it == imports_.end()) {
      reply.status = ncclInvalidArgument;
    } else if (--it->second.refs == 0) {
      release(it->second);
      imports_.erase(it);
    }
  } else {
    importOne(req, -1, &reply);
  }
  (void)sendFds(c.sock, nullptr, 0, &reply, sizeof(reply), now);   // as above: the connection closes either way
  return false;
}

void ImportService::importOne(const ImportRequest& req, int fd, ImportReply* reply) {
  const Key key{req.rank, req.base};
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = imports_.find(key);
  if (it != imports_.end()) {
    it->second.refs++;
    reply->base = reinterpret_cast<uint64_t>(it->second.base);
    return;
  }
  Import im;
  im.bytes = req.bytes;
  im.vmm = req.vmm != 0;
  ncclResult_t res = ncclSuccess;
  if (im.vmm) {
    gpu::MemHandle h{};
    res = gpu::memImportFd(fd, &h);
    if (res == ncclSuccess) {
      res = gpu::addressReserve(&im.base, im.bytes, 0);
      if (res == ncclSuccess) {
        res = gpu::memMap(im.base, im.bytes, h, gpuDev_);
        if (res != ncclSuccess) (void)gpu::addressFree(im.base, im.bytes);   // res is the failure to answer
      }
      (void)gpu::memRelease(h);   // the mapping holds the memory now (a failure is the backend's to log)
    }
  } else {
    res = gpu::ipcOpenMemHandle(&im.base, req.ipc);
  }
  if (res != ncclSuccess) {
    reply->status = res;
    return;
  }
  im.refs = 1;
  imports_[key] = im;
  reply->base = reinterpret_cast<uint64_t>(im.base);
  INFO(kSubsysReg, "import service: mapped rank %d's %s allocation %#" PRIx64 " (%" PRIu64 " bytes) at %p", req.rank,
       im.vmm ? "VMM" : "device", req.base, req.bytes, im.base);
}

namespace {

[[nodiscard]] ncclResult_t request(const ImportEndpoint& self, int peer, const ImportRequest& req, int fd, ImportReply* reply) {
  // Every service listens before its rank's init ends (startImportService
  // runs before init's last barrier): a listener that is not there within
  // a moment belongs to a peer that is gone, or that runs with direct
  // messages off.
  FdSocket s;
  UCHECK(s.connect(importServiceName(self.secret, self.commHash, peer), deadlineAfterMs(kConnectMs), self.abortFlag));
  const Deadline deadline = requestDeadline();
  UCHECK(authenticateFdConnector(s, self.secret, kAuthContext, deadline, self.abortFlag, "import request"));
  UCHECK(sendFds(s, nullptr, 0, &req, sizeof(req), deadline, self.abortFlag));
  const uint32_t tag = kImportMagic;   // a descriptor travels with a byte or more of payload
  if (fd >= 0) UCHECK(sendFds(s, &fd, 1, &tag, sizeof(tag), deadline, self.abortFlag));
  UCHECK(recvFds(s, nullptr, 0, reply, sizeof(*reply), deadline, self.abortFlag));
  return ncclSuccess;
}

}  // namespace

ncclResult_t importAtPeer(const ImportEndpoint& self, int peer, uintptr_t allocBase, size_t allocBytes, bool vmm,
                          uintptr_t* peerBase) {
  ImportRequest req;
  memset(&req, 0, sizeof(req));
  req.magic = kImportMagic;
  req.op = kOpImport;
  req.rank = self.rank;
  req.vmm = vmm ? 1 : 0;
  req.base = allocBase;
  req.bytes = allocBytes;
  UniqueFd fd;
  if (vmm) {
    gpu::MemHandle h{};
    void* mapBase = nullptr;
    size_t mapBytes = 0;
    UCHECK(gpu::memRetainFromAddress(reinterpret_cast<void*>(allocBase), &h, &mapBase, &mapBytes));
    int raw = -1;
    const ncclResult_t res = gpu::memExportFd(h, &raw);
    (void)gpu::memRelease(h);   // the descriptor holds the memory now (a failure is the backend's to log)
    UCHECK(res);
    fd.reset(raw);
  } else {
    UCHECK(gpu::ipcGetMemHandle(&req.ipc, reinterpret_cast<void*>(allocBase)));
  }
  ImportReply reply{};
  UCHECK(request(self, peer, req, fd.get(), &reply));
  if (reply.status != ncclSuccess) {
    INFO(kSubsysReg, "rank %d: rank %d could not map allocation %#" PRIxPTR " (%s): its messages go through slots",
         self.rank, peer, allocBase, ncclGetErrorString((ncclResult_t)reply.status));
    return (ncclResult_t)reply.status;
  }
  *peerBase = reply.base;
  return ncclSuccess;
}

ncclResult_t releaseAtPeer(const ImportEndpoint& self, int peer, uintptr_t allocBase) {
  ImportRequest req;
  memset(&req, 0, sizeof(req));
  req.magic = kImportMagic;
  req.op = kOpRelease;
  req.rank = self.rank;
  req.base = allocBase;
  ImportReply reply{};
  UCHECK(request(self, peer, req, -1, &reply));
  return (ncclResult_t)reply.status;
}

ncclResult_t startImportService(ncclComm* comm) {
  if (knobInt(Knob::UNICCL_P2P_DIRECT_MIN_BYTES) <= 0) return ncclSuccess;
  const PeerInfo& me = comm->peers[comm->rank];
  bool needed = false;
  for (int r = 0; r < comm->nRanks; r++)
    needed |= comm->peers[r].hostHash == me.hostHash && comm->peers[r].processHash != me.processHash;
  if (!needed) return ncclSuccess;
  DirectRecvs& d = comm->direct;
  d.service = std::make_unique<ImportService>();
  if (d.service->start(comm->bootstrap->secret(), comm->commHash, comm->rank, comm->gpuDev) != ncclSuccess) {
    // An optimization only: the communicator works without it (peers that
    // ask get no answer and receive through the slots).
    WARN("rank %d: the import service for direct receives could not start; peers' registered buffers are not "
         "mapped here (their messages go through the slots)", comm->rank);
    d.service.reset();
  }
  // The other direction: this rank's registered buffers mapped by its peers.
  d.importer = std::make_unique<DirectImporter>(importEndpoint(comm), &comm->registry);
  return ncclSuccess;
}

}  // namespace uniccl
