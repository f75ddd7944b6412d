#include "common/core/import_service.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
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

std::string serviceName(uint64_t commHash, int rank) {
  char name[64];
  snprintf(name, sizeof(name), "uniccl-imp-%016" PRIx64 "-%d", commHash, rank);
  return name;
}

// Requests are small and answered at once: a peer that takes longer than
// the bootstrap's timeout is gone.
Deadline requestDeadline() { return deadlineAfterMs(bootstrap::timeoutMs()); }

}  // namespace

ncclResult_t ImportService::start(uint64_t commHash, int rank, int gpuDev) {
  gpuDev_ = gpuDev;
  UCHECK(listener_.listen(serviceName(commHash, rank)));
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

void ImportService::release(Import& im) {
  if (im.vmm) {
    gpu::memUnmap(im.base, im.bytes);
    gpu::addressFree(im.base, im.bytes);
  } else {
    gpu::ipcCloseMemHandle(im.base);
  }
  im.base = nullptr;
}

void ImportService::serve() {
  gpu::setDevice(gpuDev_);   // mappings are made for (and IPC handles opened on) the comm's GPU
  const Deadline never = deadlineAfterMs(int64_t{1} << 40);
  while (stop_.load() == 0) {
    FdSocket conn;
    if (listener_.accept(&conn, never, &stop_) != ncclSuccess) continue;   // stop, or a dropped connection
    ImportRequest req{};
    if (recvFds(conn, nullptr, 0, &req, sizeof(req), requestDeadline(), &stop_) != ncclSuccess) continue;
    ImportReply reply{};
    reply.status = ncclSuccess;
    const Key key{req.rank, req.base};
    if (req.magic != kImportMagic || (req.op != kOpImport && req.op != kOpRelease)) {
      WARN("import service: a malformed request (magic %#x, op %u): ignored", req.magic, req.op);
      continue;
    }
    if (req.op == kOpRelease) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = imports_.find(key);
      if (it == imports_.end()) {
        reply.status = ncclInvalidArgument;
      } else if (--it->second.refs == 0) {
        release(it->second);
        imports_.erase(it);
      }
    } else {
      UniqueFd fd;
      uint32_t tag = 0;
      if (req.vmm && (recvFds(conn, &fd, 1, &tag, sizeof(tag), requestDeadline(), &stop_) != ncclSuccess ||
                      tag != kImportMagic))
        continue;
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = imports_.find(key);
      if (it != imports_.end()) {
        it->second.refs++;
        reply.base = reinterpret_cast<uint64_t>(it->second.base);
      } else {
        Import im;
        im.bytes = req.bytes;
        im.vmm = req.vmm != 0;
        ncclResult_t res = ncclSuccess;
        if (im.vmm) {
          gpu::MemHandle h{};
          res = gpu::memImportFd(fd.get(), &h);
          if (res == ncclSuccess) {
            res = gpu::addressReserve(&im.base, im.bytes, 0);
            if (res == ncclSuccess) {
              res = gpu::memMap(im.base, im.bytes, h, gpuDev_);
              if (res != ncclSuccess) gpu::addressFree(im.base, im.bytes);
            }
            gpu::memRelease(h);   // the mapping holds the memory now
          }
        } else {
          res = gpu::ipcOpenMemHandle(&im.base, req.ipc);
        }
        if (res == ncclSuccess) {
          im.refs = 1;
          imports_[key] = im;
          reply.base = reinterpret_cast<uint64_t>(im.base);
          INFO(kSubsysReg, "import service: mapped rank %d's %s allocation %#" PRIx64 " (%" PRIu64 " bytes) at %p",
               req.rank, im.vmm ? "VMM" : "device", req.base, req.bytes, im.base);
        } else {
          reply.status = res;
        }
      }
    }
    sendFds(conn, nullptr, 0, &reply, sizeof(reply), requestDeadline(), &stop_);
  }
}

namespace {

ncclResult_t request(ncclComm* comm, int peer, const ImportRequest& req, int fd, ImportReply* reply) {
  // Every service listens before its rank's init ends (startImportService
  // runs before init's last barrier): a listener that is not there within
  // a moment belongs to a peer that is gone, or that runs with direct
  // messages off.
  FdSocket s;
  UCHECK(s.connect(serviceName(comm->commHash, peer), deadlineAfterMs(kConnectMs), &comm->hostAbort));
  const Deadline deadline = requestDeadline();
  UCHECK(sendFds(s, nullptr, 0, &req, sizeof(req), deadline, &comm->hostAbort));
  const uint32_t tag = kImportMagic;   // a descriptor travels with a byte or more of payload
  if (fd >= 0) UCHECK(sendFds(s, &fd, 1, &tag, sizeof(tag), deadline, &comm->hostAbort));
  UCHECK(recvFds(s, nullptr, 0, reply, sizeof(*reply), deadline, &comm->hostAbort));
  return ncclSuccess;
}

}  // namespace

ncclResult_t importAtPeer(ncclComm* comm, int peer, uintptr_t allocBase, size_t allocBytes, bool vmm,
                          uintptr_t* peerBase) {
  ImportRequest req;
  memset(&req, 0, sizeof(req));
  req.magic = kImportMagic;
  req.op = kOpImport;
  req.rank = comm->rank;
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
    gpu::memRelease(h);
    UCHECK(res);
    fd.reset(raw);
  } else {
    UCHECK(gpu::ipcGetMemHandle(&req.ipc, reinterpret_cast<void*>(allocBase)));
  }
  ImportReply reply{};
  UCHECK(request(comm, peer, req, fd.get(), &reply));
  if (reply.status != ncclSuccess) {
    INFO(kSubsysReg, "rank %d: rank %d could not map allocation %#" PRIxPTR " (%s): its messages go through slots",
         comm->rank, peer, allocBase, ncclGetErrorString((ncclResult_t)reply.status));
    return (ncclResult_t)reply.status;
  }
  *peerBase = reply.base;
  return ncclSuccess;
}

ncclResult_t releaseAtPeer(ncclComm* comm, int peer, uintptr_t allocBase) {
  ImportRequest req;
  memset(&req, 0, sizeof(req));
  req.magic = kImportMagic;
  req.op = kOpRelease;
  req.rank = comm->rank;
  req.base = allocBase;
  ImportReply reply{};
  UCHECK(request(comm, peer, req, -1, &reply));
  return (ncclResult_t)reply.status;
}

ncclResult_t startImportService(ncclComm* comm) {
  if (knobInt(Knob::UNICCL_P2P_DIRECT_MIN_BYTES) <= 0) return ncclSuccess;
  const PeerInfo& me = comm->peers[comm->rank];
  bool needed = false;
  for (int r = 0; r < comm->nRanks; r++)
    needed |= comm->peers[r].hostHash == me.hostHash && comm->peers[r].processHash != me.processHash;
  if (!needed) return ncclSuccess;
  comm->importService = std::make_unique<ImportService>();
  if (comm->importService->start(comm->commHash, comm->rank, comm->gpuDev) != ncclSuccess) {
    // An optimization only: the communicator works without it (peers that
    // ask get no answer and receive through the slots).
    WARN("rank %d: the import service for direct receives could not start; peers' registered buffers are not "
         "mapped here (their messages go through the slots)", comm->rank);
    comm->importService.reset();
  }
  return ncclSuccess;
}

}  // namespace uniccl
