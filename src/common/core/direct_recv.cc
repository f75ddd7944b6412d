#include "common/core/direct_recv.h"

#include <cinttypes>

#include "common/core/comm.h"
#include "common/core/comm_transport.h"
#include "common/core/import_service.h"
#include "common/gpu.h"
#include "common/memory/mem_alloc.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

// The VMM mapping that holds ptr (false: ordinary device memory, or a
// mapping the backend cannot be asked about safely: mem_alloc.h).
bool vmmMapping(const void* ptr, void** base, size_t* bytes) {
  gpu::MemHandle h{};
  if (memRetainMapping(ptr, &h, base, bytes) != ncclSuccess) return false;
  (void)gpu::memRelease(h);   // only the extent was wanted; a failure is the backend's to log
  return true;
}

// The allocation holding [p, p + n): a VMM mapping (vmm) or ordinary device
// memory. False: the range crosses the allocation's end (several mappings
// of one reservation, as PyTorch's expandable segments make) or is unknown.
bool allocationOf(uintptr_t p, size_t n, uintptr_t* base, size_t* bytes, bool* vmm) {
  void* b = nullptr;
  size_t sz = 0;
  if (vmmMapping(reinterpret_cast<void*>(p), &b, &sz)) {
    *vmm = true;
  } else if (gpu::memGetAddressRange(reinterpret_cast<void*>(p), &b, &sz) == ncclSuccess) {
    *vmm = false;
  } else {
    return false;
  }
  *base = reinterpret_cast<uintptr_t>(b);
  *bytes = sz;
  return p >= *base && n <= sz && p - *base <= sz - n;
}

// A peer of this process stores into the buffer at its own address when its
// GPU may: ordinary device memory (the P2P connection enabled peer access)
// or ncclMemAlloc's VMM memory (granted to every GPU that reaches it). A
// VMM mapping made elsewhere may not grant the peer's GPU access.
bool localPeerMayStore(void* buff) {
  MemAllocInfo mi;
  if (memAllocFind(buff, &mi)) return true;
  void* b = nullptr;
  size_t sz = 0;
  return !vmmMapping(buff, &b, &sz);
}

// Whether this GPU's virtual memory can be shared with another process
// (gpu::VmmInfo::fdExport). ROCm 6.0 and 6.1 cannot: there a VMM
// allocation is not offered to a peer of another process at all (the
// export would only fail), and its messages go through the slots.
bool vmmSharedAcrossProcesses(ncclComm* comm) {
  gpu::VmmInfo info{};
  return gpu::vmmQuery(comm->gpuDev, &info) == ncclSuccess && info.fdExport;
}

}  // namespace

uintptr_t directRecvTarget(ncclComm* comm, int peer, void* buff, size_t bytes) {
  if (bytes == 0 || transportBetween(comm, comm->rank, peer) != TransportKind::P2p) return 0;
  const uintptr_t p = reinterpret_cast<uintptr_t>(buff);
  const bool sameProcess = comm->peers[peer].processHash == comm->peers[comm->rank].processHash;
  uintptr_t out = 0;
  comm->registry.withBufferHolding(p, bytes, [&](RegisteredBuffer& reg) {
    if (sameProcess) {
      if (localPeerMayStore(buff)) out = p;
      return;
    }
    uintptr_t base = 0;
    size_t allocBytes = 0;
    bool vmm = false;
    if (!allocationOf(p, bytes, &base, &allocBytes, &vmm)) return;
    for (const PeerView& v : reg.views)
      if (v.peer == peer && v.allocBase == base) {
        out = v.peerBase != 0 ? v.peerBase + (p - base) : 0;
        return;
      }
    // First message from this peer into this allocation: the peer maps it
    // (once; a peer that could not is not asked again), in the background;
    // this message goes through the slots.
    PeerView view{peer, base, 0, false};
    if (vmm && !vmmSharedAcrossProcesses(comm)) {
      INFO(kSubsysReg, "rank %d: GPU %d cannot share virtual memory with another process: rank %d's messages into "
           "allocation %#" PRIxPTR " go through slots", comm->rank, comm->gpuDev, peer, base);
    } else if (DirectImporter* importer = comm->direct.importer.get()) {
      view.pending = importer->request(DirectImporter::Request{reg.id, peer, base, allocBytes, vmm});
    }
    reg.views.push_back(view);
  });
  return out;
}

void waitDirectImports(ncclComm* comm) {
  if (comm->direct.importer) comm->direct.importer->waitIdle();
}

void releaseDirectViews(ncclComm* comm, const std::vector<PeerView>& views) {
  // Views of peers in other processes exist only where the importer does.
  if (comm->direct.importer) comm->direct.importer->releaseViews(views);
}

}  // namespace uniccl
