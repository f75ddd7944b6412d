#include "common/core/inplace_stage.h"

#include <algorithm>
#include <atomic>

#include "common/check.h"
#include "common/core/comm_plan.h"
#include "common/core/graph_buffers.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

std::atomic<uint64_t> gStagedBytes{0};
std::atomic<uint64_t> gAllocations{0};

constexpr size_t kAlign = 256;            // each range starts aligned (the kernels' vector loads)
constexpr size_t kMinScratch = 1 << 20;

size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

size_t scratchSize(size_t need) {
  size_t s = kMinScratch;
  while (s < need) s *= 2;
  return s;
}

// Eager scratch of at least `bytes`, free for this group's copies on the
// staged ranges' streams.
[[nodiscard]] ncclResult_t eagerScratch(const CommPlan& p, size_t bytes) {
  InPlaceScratch* s = p.stageScratch;
  if (s->free == nullptr) UCHECK(gpu::eventCreate(&s->free));
  if (bytes > s->bytes) {
    if (p.gpuShared) {
      // Freeing device memory waits for every kernel of the GPU, also another
      // rank's that spins until this thread launches its part.
      if (s->buf != nullptr) s->retired.push_back(s->buf);
    } else {
      // The old buffer may still be read by earlier groups (any stream).
      if (s->freeRecorded) UCHECK(gpu::eventSynchronize(s->free));
      if (s->buf != nullptr) UCHECK(gpu::deviceFree(s->buf));
    }
    s->buf = nullptr;
    s->bytes = 0;
    const size_t size = scratchSize(bytes);
    UCHECK(gpu::deviceAlloc(&s->buf, size));
    s->bytes = size;
    gAllocations.fetch_add(1, std::memory_order_relaxed);
    INFO(kSubsysColl, "Rank %d: %zu bytes of scratch for in-place AlltoAll", p.rank, size);
    return ncclSuccess;
  }
  if (!s->freeRecorded) return ncclSuccess;
  // Streams other than the one that last read the scratch wait for it
  // (on that stream, stream order already keeps the copy behind it).
  const std::vector<StagedRange>& ranges = p.tasks.staged;
  for (size_t i = 0; i < ranges.size(); i++) {
    gpu::Stream st = ranges[i].stream;
    bool seen = st == s->freeStream;
    for (size_t j = 0; j < i && !seen; j++) seen = ranges[j].stream == st;
    if (!seen) UCHECK(gpu::streamWaitEvent(st, s->free));
  }
  return ncclSuccess;
}

[[nodiscard]] ncclResult_t stage(CommPlan& p, const UseDevice& useDevice) {
  std::vector<StagedRange>& ranges = p.tasks.staged;
  std::vector<size_t>& offsets = p.stage.offsets;
  UCHECK(useDevice(p.gpuDev));
  gpu::CaptureInfo cap = p.launch.capture;   // checkTaskStreams asked (one graph or none for all tasks)
  if (!p.launch.captureKnown) UCHECK(gpu::streamGetCaptureInfo(ranges[0].stream, &cap));
  offsets.clear();
  size_t total = 0;
  for (const StagedRange& r : ranges) {
    offsets.push_back(total);
    total += alignUp(r.bytes);
  }
  char* base = nullptr;
  if (cap.status == gpu::CaptureStatus::Active) {
    // Replays run after later eager groups reused the scratch: the graph
    // owns its copy's buffer.
    void* buf = nullptr;
    UCHECK(gpu::deviceAlloc(&buf, total));
    gAllocations.fetch_add(1, std::memory_order_relaxed);
    // On failure the buffer is queued for freeing already.
    UCHECK(graphOwnBuffer(cap.graph, buf, GraphBufferKind::kDevice));
    base = static_cast<char*>(buf);
  } else {
    UCHECK(eagerScratch(p, total));
    base = static_cast<char*>(p.stageScratch->buf);
    p.stage.eagerStream = ranges[0].stream;
  }
  for (size_t i = 0; i < ranges.size(); i++) {
    UCHECK(gpu::memcpyAsync(base + offsets[i], ranges[i].src, ranges[i].bytes, ranges[i].stream));
    gStagedBytes.fetch_add(ranges[i].bytes, std::memory_order_relaxed);
  }
  for (Task& t : p.tasks.p2p) {
    if (t.stage == 0) continue;
    const size_t k = t.stage - 1;
    const char* src = static_cast<const char*>(t.sendbuff);
    t.sendbuff = base + offsets[k] + (src - ranges[k].src);
    t.stage = 0;
  }
  TRACE(kSubsysColl, "rank %d: %zu ranges of in-place AlltoAll staged (%zu bytes%s)", p.rank, ranges.size(), total,
        cap.status == gpu::CaptureStatus::Active ? ", graph-owned" : "");
  return ncclSuccess;
}

}  // namespace

ncclResult_t stageInPlaceSends(GroupPlan& group, const UseDevice& useDevice) {
  for (CommPlan& p : group)
    if (!p.tasks.staged.empty()) UCHECK(stage(p, useDevice));
  return ncclSuccess;
}

ncclResult_t finishInPlaceStaging(GroupPlan& group, const UseDevice& useDevice) {
  ncclResult_t res = ncclSuccess;
  for (CommPlan& p : group) {
    if (p.stage.eagerStream == nullptr) continue;
    InPlaceScratch* s = p.stageScratch;
    ncclResult_t r = useDevice(p.gpuDev);
    if (r == ncclSuccess) r = gpu::eventRecord(s->free, p.stage.eagerStream);
    if (r == ncclSuccess) {
      s->freeStream = p.stage.eagerStream;
      s->freeRecorded = true;
    } else if (res == ncclSuccess) {
      res = r;
    }
    p.stage.eagerStream = nullptr;
  }
  return res;
}

// Teardown: a wait or release that fails was logged by the backend; the
// others still run.
void releaseStaging(InPlaceScratch* s, bool abort) {
  if (s->buf != nullptr) {
    if (!abort && s->freeRecorded) (void)gpu::eventSynchronize(s->free);
    (void)gpu::deviceFree(s->buf);
    s->buf = nullptr;
    s->bytes = 0;
  }
  for (void* b : s->retired) (void)gpu::deviceFree(b);
  s->retired.clear();
  if (s->free != nullptr) (void)gpu::eventDestroy(s->free);
  s->free = nullptr;
  s->freeRecorded = false;
}

uint64_t stagedBytes() { return gStagedBytes.load(std::memory_order_relaxed); }
uint64_t stagingAllocations() { return gAllocations.load(std::memory_order_relaxed); }

}  // namespace uniccl
