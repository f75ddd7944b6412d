// uniccl's trace profiler plugin (profiler API v5): writes one Chrome-trace
// JSON file per communicator rank while the program runs (open it in
// https://ui.perfetto.dev or chrome://tracing; docs/profiler.md shows how to
// merge ranks and describes the design).
//
// The entry points run on the threads that report events (the launching
// thread, the proxy thread, the KernelCh poller) and only write a small
// record into the calling thread's ring (event_ring.h): no lock, no
// allocation, no formatting, no system call. A writer thread (tracer.h)
// moves the records into a spill file and formats the files from it.
//
//   UNICCL_PROFILER_TRACE_FILE        path prefix (default "uniccl_trace"); the file is
//                                     <prefix>.<commId as 16 hex digits>.rank<rank>.json
//   UNICCL_PROFILER_TRACE_MASK        event types to record (default 0xf4f: API, launch,
//                                     Group/Coll/P2p, ProxyOp, KernelCh)
//   UNICCL_PROFILER_TRACE_MAX_EVENTS  events written per rank (default 1000000); later ones
//                                     are counted as dropped
//   UNICCL_PROFILER_TRACE_RING_KB     each thread's ring (default 4096)
//   UNICCL_PROFILER_TRACE_REORDER_MS  how long events wait to be written in start order (default 100)
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>

#include "trace_clock.h"
#include "trace_context.h"
#include "trace_record.h"
#include "tracer.h"

namespace trace {

namespace {

// knobs.def: {name, default} of each knob (its Str defaults are the values themselves).
struct Knob {
  const char* name;
  int64_t intDefault;
  const char* defaultDoc;
};
#define UNICCL_KNOB(NAME, TYPE, SOURCE, DEFAULT, DEFAULT_DOC, DOC) constexpr Knob k##NAME{#NAME, DEFAULT, DEFAULT_DOC};
#include "knobs.def"
#undef UNICCL_KNOB

constexpr int kDefaultMask = ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi | ncclProfileKernelLaunch |
                             ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp |
                             ncclProfileKernelCh;
static_assert(kUNICCL_PROFILER_TRACE_MASK.intDefault == kDefaultMask, "knobs.def shows the default mask");

// What a rank's waiting events may take at most (about 300 bytes of text
// each): a host-bound loop reporting half a million events a second on a
// rank fills it in about 50 ms, and then events go before the reorder
// window has passed.
constexpr size_t kMaxWaitingBytesPerRank = 8u << 20;
// A thread whose ring is full waits this long for the writer to make room
// for a stop or state (a start is dropped at once: it leaves room for them).
constexpr auto kMaxUpdateWait = std::chrono::milliseconds(2);

int64_t envInt(const Knob& k) {
  const char* v = getenv(k.name);
  const int64_t dflt = k.intDefault;
  if (v == nullptr || *v == '\0') return dflt;
  char* end = nullptr;
  long long x = strtoll(v, &end, 0);
  return (end && *end == '\0') ? (int64_t)x : dflt;
}

// Cells per ring from UNICCL_PROFILER_TRACE_RING_KB: a power of two, at least 4 KiB.
uint32_t ringCells() {
  int64_t kb = envInt(kUNICCL_PROFILER_TRACE_RING_KB);
  if (kb < 4) kb = 4;
  if (kb > (1 << 20)) kb = 1 << 20;
  uint64_t cells = (uint64_t)kb * 1024 / kCellBytes;
  uint32_t pow2 = 1;
  while ((uint64_t)pow2 * 2 <= cells) pow2 *= 2;
  return pow2;
}

// The directory of a file's path ("." for a bare name): the trace's, where
// the tracer's spill goes.
std::string directoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

#define TLOG(ctx, level, ...) \
  do {                                                                                       \
    if ((ctx)->log) (ctx)->log(level, UNICCL_PROFILER_LOG_SUBSYS, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

ncclResult_t traceInit(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nRanks, int rank, ncclDebugLogger_t logfn) {
  *context = nullptr;
  TraceContext* ctx = new (std::nothrow) TraceContext();
  if (ctx == nullptr) return ncclSystemError;
  ctx->commId = commId;
  ctx->rank = rank;
  ctx->nRanks = nRanks;
  ctx->nNodes = nNodes;
  ctx->commName = commName ? commName : "";
  ctx->log = logfn;
  ctx->pid = getpid();
  const char* prefix = getenv(kUNICCL_PROFILER_TRACE_FILE.name);
  if (prefix == nullptr || *prefix == '\0') prefix = kUNICCL_PROFILER_TRACE_FILE.defaultDoc;
  char suffix[64];
  snprintf(suffix, sizeof(suffix), ".%016llx.rank%d.json", (unsigned long long)commId, rank);
  ctx->path = std::string(prefix) + suffix;
  FILE* file = fopen(ctx->path.c_str(), "w");
  if (file == nullptr) {
    TLOG(ctx, NCCL_LOG_WARN,
         "Trace profiler: cannot write %s (%s); set UNICCL_PROFILER_TRACE_FILE to a writable path prefix",
         ctx->path.c_str(), strerror(errno));
    delete ctx;
    return ncclSystemError;
  }
  RankTraceOptions options;
  const int64_t maxEvents = envInt(kUNICCL_PROFILER_TRACE_MAX_EVENTS);
  options.maxEvents = maxEvents > 0 ? (uint64_t)maxEvents : 0;
  const int64_t reorderMs = std::min<int64_t>(std::max<int64_t>(envInt(kUNICCL_PROFILER_TRACE_REORDER_MS), 0), 3600000);
  options.reorderNs = reorderMs * 1000000LL;
  options.maxWaitingBytes = kMaxWaitingBytesPerRank;
  std::string whyNot;
  Tracer* tracer = Tracer::join(ringCells(), directoryOf(ctx->path), &whyNot);
  if (tracer != nullptr && !tracer->addRank(ctx, file, options)) {
    whyNot = "out of memory, or " + std::to_string(kMaxTracedContexts) + " traced communicators already";
    Tracer::leave();
    tracer = nullptr;
  }
  if (tracer == nullptr) {
    TLOG(ctx, NCCL_LOG_WARN, "Trace profiler: cannot trace rank %d of comm %016llx: %s", rank,
         (unsigned long long)commId, whyNot.c_str());
    fclose(file);
    delete ctx;
    return ncclSystemError;
  }
  *eActivationMask = (int)envInt(kUNICCL_PROFILER_TRACE_MASK);
  TLOG(ctx, NCCL_LOG_INFO, "Trace profiler: rank %d of comm %016llx traces event mask 0x%x into %s", rank,
       (unsigned long long)commId, *eActivationMask, ctx->path.c_str());
  *context = ctx;
  return ncclSuccess;
}

unsigned startCells(uint64_t type) {
  switch (type) {
    case ncclProfileColl: return 3;
    case ncclProfileCollApi:
    case ncclProfileP2pApi:
    case ncclProfileP2p:
    case ncclProfileProxyOp: return 2;
  }
  return 1;
}

// Fills the start record at `c` (startCells(d->type) cells).
void fillStart(Cell* c, unsigned cells, const TraceContext* ctx, const ncclProfilerEventDescr_v5_t* d, uint64_t now,
               uint64_t gen) {
  StartRecord* s = new (c) StartRecord;
  s->head.kind = RecordKind::kStart;
  s->head.cells = (uint8_t)cells;
  s->head.ctxSlot = ctx->slot;
  s->head.code = d->type < (1u << 16) ? (uint16_t)d->type : 0;
  s->head.small = 0;
  s->ticks = now;
  s->parentId = idOfHandle(d->parentObj, gen);
  s->word = 0;
  switch (d->type) {
    case ncclProfileGroupApi:
      s->head.small = d->groupApi.graphCaptured;
      s->word = (uint64_t)(int64_t)d->groupApi.groupDepth;
      break;
    case ncclProfileCollApi:
      s->head.small = d->collApi.graphCaptured;
      s->word = (uint64_t)(int64_t)d->collApi.root;
      new (c + 1) ApiTail{d->collApi.func, d->collApi.datatype, d->collApi.stream, d->collApi.count};
      break;
    case ncclProfileP2pApi:
      s->head.small = d->p2pApi.graphCaptured;
      new (c + 1) ApiTail{d->p2pApi.func, d->p2pApi.datatype, d->p2pApi.stream, d->p2pApi.count};
      break;
    case ncclProfileKernelLaunch:
      s->word = (uint64_t)(uintptr_t)d->kernelLaunch.stream;
      break;
    case ncclProfileColl:
      s->word = idOfHandle(d->coll.parentGroup, gen);
      new (c + 1) CollNames{d->coll.func, d->coll.datatype, d->coll.algo, d->coll.proto};
      new (c + 2) CollTail{d->coll.seqNumber, d->coll.count, d->coll.root, d->coll.nChannels, 0};
      break;
    case ncclProfileP2p:
      s->word = idOfHandle(d->p2p.parentGroup, gen);
      new (c + 1) P2pTail{d->p2p.func, d->p2p.datatype, d->p2p.count, d->p2p.peer, d->p2p.nChannels};
      break;
    case ncclProfileProxyOp:
      // A PXN operation of another process carries that process's handle as parent.
      if (d->proxyOp.pid != ctx->pid) s->parentId = 0;
      s->head.small = d->proxyOp.isSend != 0;
      new (c + 1) ProxyOpTail{d->proxyOp.channelId, d->proxyOp.peer, d->proxyOp.nSteps, d->proxyOp.chunkSize, {0, 0}};
      break;
    case ncclProfileProxyStep:
      s->word = (uint64_t)(int64_t)d->proxyStep.step;
      break;
    case ncclProfileKernelCh:
      s->head.small = d->kernelCh.channelId;
      s->word = d->kernelCh.pTimer;
      break;
    case ncclProfileNetPlugin:
      s->word = (uint64_t)d->netPlugin.id;
      break;
  }
}

ncclResult_t traceStartEvent(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* d) {
  *eHandle = nullptr;
  TraceContext* ctx = static_cast<TraceContext*>(context);
  if (ctx == nullptr || d == nullptr) return ncclSuccess;
  const uint64_t now = nowTicks();
  Tracer* tracer = Tracer::current();
  EventRing* ring = tracer != nullptr ? tracer->rings().mine() : nullptr;
  // Past the rank's maxEvents the start is only counted: one cell, no id
  // (so the library passes a null handle and no stop or state follows).
  const bool skipped = ctx->atMaxEvents.load(std::memory_order_relaxed);
  const unsigned cells = skipped ? 1 : startCells(d->type);
  // A start leaves an eighth of the ring to stops and states, so that the
  // events it did record can end even while the writer is behind.
  Cell* c = ring != nullptr ? ring->reserve(cells, ring->capacity() / 8) : nullptr;
  if (c == nullptr) {
    ctx->droppedRingFull.fetch_add(1, std::memory_order_relaxed);
    return ncclSuccess;
  }
  if (skipped) {
    RecordHead* h = new (c) RecordHead;
    h->kind = RecordKind::kSkippedStart;
    h->cells = 1;
    h->ctxSlot = ctx->slot;
    h->code = 0;
    h->small = 0;
    ring->publish();
    return ncclSuccess;
  }
  const uint64_t gen = tracer->rings().generation();
  fillStart(c, cells, ctx, d, now, gen);
  const uint64_t id = ring->takeId();
  ring->publish();
  *eHandle = handleOf(id, gen);
  return ncclSuccess;
}

// Room for a stop or state in a full ring: asks the writer for a pass and
// waits for it, kMaxUpdateWait at most.
Cell* waitForRoom(Tracer* tracer, EventRing* ring) {
  const auto deadline = std::chrono::steady_clock::now() + kMaxUpdateWait;
  tracer->wake();
  do {
    std::this_thread::yield();
    if (Cell* c = ring->reserve(1, 0)) return c;
  } while (std::chrono::steady_clock::now() < deadline);
  return nullptr;
}

void writeUpdate(RecordKind kind, uint16_t code, const void* handle, uint64_t value) {
  const uint64_t now = nowTicks();
  Tracer* tracer = Tracer::current();
  if (tracer == nullptr) return;
  const uint64_t id = idOfHandle(handle, tracer->rings().generation());
  if (id == 0) return;
  EventRing* ring = tracer->rings().mine();
  if (ring == nullptr) {
    tracer->countLostUpdate();
    return;
  }
  Cell* c = ring->reserve(1, 0);
  if (c == nullptr) c = waitForRoom(tracer, ring);
  if (c == nullptr) {
    tracer->countLostUpdate();
    return;
  }
  UpdateRecord* u = new (c) UpdateRecord;
  u->head.kind = kind;
  u->head.cells = 1;
  u->head.ctxSlot = 0;
  u->head.code = code;
  u->head.small = 0;
  u->id = id;
  u->ticks = now;
  u->value = value;
  ring->publish();
}

ncclResult_t traceStopEvent(void* eHandle) {
  if (eHandle != nullptr) writeUpdate(RecordKind::kStop, 0, eHandle, 0);
  return ncclSuccess;
}

ncclResult_t traceRecordEventState(void* eHandle, ncclProfilerEventState_v5_t state,
                                   ncclProfilerEventStateArgs_v5_t* args) {
  if (eHandle == nullptr) return ncclSuccess;
  uint64_t value = 0;
  if (args != nullptr) {
    switch (state) {
      case ncclProfilerKernelChStop:
        value = args->kernelCh.pTimer;
        break;
      case ncclProfilerProxyCtrlAppendEnd:
        value = (uint64_t)args->proxyCtrl.appendedProxyOps;
        break;
      case ncclProfilerNetPluginUpdate:
        break;
      default:
        if ((state >= ncclProfilerProxyStepSendGPUWait && state <= ncclProfilerProxyStepRecvGPUWait) ||
            state == ncclProfilerProxyStepSendPeerWait_v4)
          value = args->proxyStep.transSize;
        break;
    }
  }
  writeUpdate(RecordKind::kState, (uint16_t)state, eHandle, value);
  return ncclSuccess;
}

ncclResult_t traceFinalize(void* context) {
  TraceContext* ctx = static_cast<TraceContext*>(context);
  if (ctx == nullptr) return ncclSuccess;
  Tracer* tracer = Tracer::current();
  const RankTraceSummary s = tracer->finishRank(ctx);
  TLOG(ctx, NCCL_LOG_INFO, "Trace profiler: wrote %llu events to %s", (unsigned long long)s.written,
       ctx->path.c_str());
  if (s.droppedMaxEvents != 0)
    TLOG(ctx, NCCL_LOG_WARN,
         "Trace profiler: %llu events of rank %d not written (UNICCL_PROFILER_TRACE_MAX_EVENTS=%llu reached)",
         (unsigned long long)s.droppedMaxEvents, ctx->rank, (unsigned long long)s.maxEvents);
  if (s.droppedRingFull != 0 || s.lostUpdates != 0)
    TLOG(ctx, NCCL_LOG_WARN,
         "Trace profiler: the writer fell behind: %llu events of rank %d dropped, %llu stops or states lost "
         "(raise UNICCL_PROFILER_TRACE_RING_KB, or trace fewer event types)",
         (unsigned long long)s.droppedRingFull, ctx->rank, (unsigned long long)s.lostUpdates);
  if (s.late != 0)
    TLOG(ctx, NCCL_LOG_WARN,
         "Trace profiler: %llu events of rank %d arrived after the reorder window and are out of time order "
         "in %s (raise UNICCL_PROFILER_TRACE_REORDER_MS)",
         (unsigned long long)s.late, ctx->rank, ctx->path.c_str());
  if (s.writeFailed)
    TLOG(ctx, NCCL_LOG_WARN,
         "Trace profiler: writing %s or the spill file next to it failed: the file is incomplete (%llu events of "
         "rank %d lost with the spill)",
         ctx->path.c_str(), (unsigned long long)s.droppedSpill, ctx->rank);
  delete ctx;
  Tracer::leave();
  return ncclSuccess;
}

}  // namespace

}  // namespace trace

extern "C" {
__attribute__((visibility("default"))) ncclProfiler_v5_t ncclProfiler_v5 = {
    "uniccl-trace",
    trace::traceInit,
    trace::traceStartEvent,
    trace::traceStopEvent,
    trace::traceRecordEventState,
    trace::traceFinalize,
};
}
