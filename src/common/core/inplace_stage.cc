#include "common/core/inplace_stage.h"

#include <algorithm>
#include <atomic>

#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/graph_buffers.h"
#include "common/core/launch.h"
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
ncclResult_t eagerScratch(ncclComm* c, size_t bytes) {
  if (c->stageFree == nullptr) UCHECK(gpu::eventCreate(&c->stageFree));
  if (bytes > c->stageBytes) {
    if (c->gpuShared) {
      // Freeing device memory waits for every kernel of the GPU, also another
      // rank's that spins until this thread launches its part: the old
      // buffer stays until the comm goes (growth doubles: at most 2x).
      if (c->stageBuf != nullptr) c->deviceAllocs.push_back(c->stageBuf);
    } else {
      // The old buffer may still be read by earlier groups (any stream).
      if (c->stageFreeRecorded) UCHECK(gpu::eventSynchronize(c->stageFree));
      if (c->stageBuf != nullptr) UCHECK(gpu::deviceFree(c->stageBuf));
    }
    c->stageBuf = nullptr;
    c->stageBytes = 0;
    const size_t size = scratchSize(bytes);
    UCHECK(gpu::deviceAlloc(&c->stageBuf, size));
    c->stageBytes = size;
    gAllocations.fetch_add(1, std::memory_order_relaxed);
    INFO(kSubsysColl, "Rank %d: %zu bytes of scratch for in-place AlltoAll", c->rank, size);
    return ncclSuccess;
  }
  if (!c->stageFreeRecorded) return ncclSuccess;
  // Streams other than the one that last read the scratch wait for it
  // (on that stream, stream order already keeps the copy behind it).
  const std::vector<StagedRange>& ranges = c->tasks.staged;
  for (size_t i = 0; i < ranges.size(); i++) {
    gpu::Stream s = ranges[i].stream;
    bool seen = s == c->stageFreeStream;
    for (size_t j = 0; j < i && !seen; j++) seen = ranges[j].stream == s;
    if (!seen) UCHECK(gpu::streamWaitEvent(s, c->stageFree));
  }
  return ncclSuccess;
}

}  // namespace

InPlaceStaging& inPlaceStaging() {
  thread_local InPlaceStaging s;
  return s;
}

ncclResult_t InPlaceStaging::start(std::vector<ncclComm*>& comms, const UseDevice& useDevice) {
  eager_.clear();
  for (ncclComm* c : comms)
    if (!c->tasks.staged.empty()) UCHECK(stage(c, useDevice));
  return ncclSuccess;
}

ncclResult_t InPlaceStaging::stage(ncclComm* c, const UseDevice& useDevice) {
  std::vector<StagedRange>& ranges = c->tasks.staged;
  UCHECK(useDevice(c->gpuDev));
  gpu::CaptureInfo cap = c->plan.capture;   // checkTaskStreams asked (one graph or none for all tasks)
  if (!c->plan.captureKnown) UCHECK(gpu::streamGetCaptureInfo(ranges[0].stream, &cap));
  offsets_.clear();
  size_t total = 0;
  for (const StagedRange& r : ranges) {
    offsets_.push_back(total);
    total += alignUp(r.bytes);
  }
  char* base = nullptr;
  if (cap.status == gpu::CaptureStatus::Active) {
    // Replays run after later eager groups reused the scratch: the graph
    // owns its copy's buffer.
    void* p = nullptr;
    UCHECK(gpu::deviceAlloc(&p, total));
    gAllocations.fetch_add(1, std::memory_order_relaxed);
    // On failure the buffer is queued for freeing already.
    UCHECK(graphOwnBuffer(cap.graph, p, GraphBufferKind::kDevice));
    base = static_cast<char*>(p);
  } else {
    UCHECK(eagerScratch(c, total));
    base = static_cast<char*>(c->stageBuf);
    eager_.emplace_back(c, ranges[0].stream);
  }
  for (size_t i = 0; i < ranges.size(); i++) {
    UCHECK(gpu::memcpyAsync(base + offsets_[i], ranges[i].src, ranges[i].bytes, ranges[i].stream));
    gStagedBytes.fetch_add(ranges[i].bytes, std::memory_order_relaxed);
  }
  for (Task& t : c->tasks.p2p) {
    if (t.stage == 0) continue;
    const size_t k = t.stage - 1;
    const char* src = static_cast<const char*>(t.sendbuff);
    t.sendbuff = base + offsets_[k] + (src - ranges[k].src);
    t.stage = 0;
  }
  TRACE(kSubsysColl, "rank %d: %zu ranges of in-place AlltoAll staged (%zu bytes%s)", c->rank, ranges.size(), total,
        cap.status == gpu::CaptureStatus::Active ? ", graph-owned" : "");
  return ncclSuccess;
}

ncclResult_t InPlaceStaging::finish(const UseDevice& useDevice) {
  ncclResult_t res = ncclSuccess;
  for (auto& [c, stream] : eager_) {
    ncclResult_t r = useDevice(c->gpuDev);
    if (r == ncclSuccess) r = gpu::eventRecord(c->stageFree, stream);
    if (r == ncclSuccess) {
      c->stageFreeStream = stream;
      c->stageFreeRecorded = true;
    } else if (res == ncclSuccess) {
      res = r;
    }
  }
  eager_.clear();
  return res;
}

void releaseStaging(ncclComm* comm, bool abort) {
  if (comm->stageBuf != nullptr) {
    if (!abort && comm->stageFreeRecorded) (void)gpu::eventSynchronize(comm->stageFree);
    gpu::deviceFree(comm->stageBuf);
    comm->stageBuf = nullptr;
    comm->stageBytes = 0;
  }
  if (comm->stageFree != nullptr) gpu::eventDestroy(comm->stageFree);
  comm->stageFree = nullptr;
  comm->stageFreeRecorded = false;
}

uint64_t stagedBytes() { return gStagedBytes.load(std::memory_order_relaxed); }
uint64_t stagingAllocations() { return gAllocations.load(std::memory_order_relaxed); }

}  // namespace uniccl
