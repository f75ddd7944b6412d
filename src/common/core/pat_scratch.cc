#include "common/core/pat_scratch.h"

#include <atomic>

#include "common/check.h"
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

ncclResult_t patScratch(PatScratch* s, int rank, bool gpuShared, size_t bytes, const gpu::CaptureInfo& cap,
                        void** out) {
  if (cap.status == gpu::CaptureStatus::Active) {
    UCHECK(gpu::deviceAlloc(out, bytes));
    gAllocations.fetch_add(1, std::memory_order_relaxed);
    // On failure the buffer is queued for freeing already.
    return graphOwnBuffer(cap.graph, *out, GraphBufferKind::kDevice);
  }
  if (bytes > s->bytes) {
    if (s->buf != nullptr) {
      if (gpuShared) {
        s->retired.push_back(s->buf);
      } else {
        if (s->freeRecorded) UCHECK(gpu::eventSynchronize(s->free));
        UCHECK(gpu::deviceFree(s->buf));
      }
    }
    s->buf = nullptr;
    s->bytes = 0;
    s->freeRecorded = false;
    const size_t size = scratchSize(bytes);
    UCHECK(gpu::deviceAlloc(&s->buf, size));
    s->bytes = size;
    gAllocations.fetch_add(1, std::memory_order_relaxed);
    INFO(kSubsysColl, "Rank %d: %zu bytes of scratch for PAT ReduceScatter", rank, size);
  }
  *out = s->buf;
  return ncclSuccess;
}

ncclResult_t patScratchLaunched(PatScratch* s, gpu::Stream stream) {
  if (s->free == nullptr) UCHECK(gpu::eventCreate(&s->free));
  UCHECK(gpu::eventRecord(s->free, stream));
  s->freeRecorded = true;
  return ncclSuccess;
}

// A release that fails was logged by the backend; the others still run.
void releasePatScratch(PatScratch* s) {
  if (s->buf != nullptr) (void)gpu::deviceFree(s->buf);
  s->buf = nullptr;
  s->bytes = 0;
  for (void* b : s->retired) (void)gpu::deviceFree(b);
  s->retired.clear();
  if (s->free != nullptr) (void)gpu::eventDestroy(s->free);
  s->free = nullptr;
  s->freeRecorded = false;
}

uint64_t patScratchAllocations() { return gAllocations.load(std::memory_order_relaxed); }

}  // namespace uniccl
