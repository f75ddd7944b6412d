#include "common/core/pat_scratch.h"

#include <atomic>

#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/graph_buffers.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

std::atomic<uint64_t> gAllocations{0};

constexpr size_t kMinScratch = 1 << 20;

size_t scratchSize(size_t need) {
  size_t s = kMinScratch;
  while (s < need) s *= 2;
  return s;
}

}  // namespace

ncclResult_t patScratch(ncclComm* comm, size_t bytes, const gpu::CaptureInfo& cap, void** out) {
  if (cap.status == gpu::CaptureStatus::Active) {
    UCHECK(gpu::deviceAlloc(out, bytes));
    gAllocations.fetch_add(1, std::memory_order_relaxed);
    // On failure the buffer is queued for freeing already.
    return graphOwnBuffer(cap.graph, *out, GraphBufferKind::kDevice);
  }
  if (bytes > comm->patScratchBytes) {
    if (comm->patScratchBuf != nullptr) {
      if (comm->gpuShared) {
        comm->deviceAllocs.push_back(comm->patScratchBuf);
      } else {
        if (comm->patScratchFreeRecorded) UCHECK(gpu::eventSynchronize(comm->patScratchFree));
        UCHECK(gpu::deviceFree(comm->patScratchBuf));
      }
    }
    comm->patScratchBuf = nullptr;
    comm->patScratchBytes = 0;
    comm->patScratchFreeRecorded = false;
    const size_t size = scratchSize(bytes);
    UCHECK(gpu::deviceAlloc(&comm->patScratchBuf, size));
    comm->patScratchBytes = size;
    gAllocations.fetch_add(1, std::memory_order_relaxed);
    INFO(kSubsysColl, "Rank %d: %zu bytes of scratch for PAT ReduceScatter", comm->rank, size);
  }
  *out = comm->patScratchBuf;
  return ncclSuccess;
}

ncclResult_t patScratchLaunched(ncclComm* comm, gpu::Stream s) {
  if (comm->patScratchFree == nullptr) UCHECK(gpu::eventCreate(&comm->patScratchFree));
  UCHECK(gpu::eventRecord(comm->patScratchFree, s));
  comm->patScratchFreeRecorded = true;
  return ncclSuccess;
}

void releasePatScratch(ncclComm* comm) {
  if (comm->patScratchBuf != nullptr) gpu::deviceFree(comm->patScratchBuf);
  comm->patScratchBuf = nullptr;
  comm->patScratchBytes = 0;
  if (comm->patScratchFree != nullptr) gpu::eventDestroy(comm->patScratchFree);
  comm->patScratchFree = nullptr;
  comm->patScratchFreeRecorded = false;
}

uint64_t patScratchAllocations() { return gAllocations.load(std::memory_order_relaxed); }

}  // namespace uniccl
