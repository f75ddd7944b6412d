// uniccl's trace profiler plugin (profiler API v5): records every event it
// is given and, when the communicator is destroyed, writes them as one
// Chrome-trace JSON file per rank (open in https://ui.perfetto.dev or
// chrome://tracing; docs/profiler.md shows how to merge ranks).
//
//   UNICCL_PROFILER_TRACE_FILE        path prefix (default "uniccl_trace"); the file is
//                                     <prefix>.<commId as 16 hex digits>.rank<rank>.json
//   UNICCL_PROFILER_TRACE_MASK        event types to record (default 0xf4f: API, launch,
//                                     Group/Coll/P2p, ProxyOp, KernelCh)
//   UNICCL_PROFILER_TRACE_MAX_EVENTS  events kept per rank (default 1000000); later ones
//                                     are counted as dropped
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "trace_event.h"

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

long threadId() {
  static thread_local long tid = syscall(SYS_gettid);
  return tid;
}

void copyStr(char* dst, size_t n, const char* src) {
  if (src == nullptr) src = "";
  strncpy(dst, src, n - 1);
  dst[n - 1] = '\0';
}

int64_t envInt(const Knob& k) {
  const char* v = getenv(k.name);
  const int64_t dflt = k.intDefault;
  if (v == nullptr || *v == '\0') return dflt;
  char* end = nullptr;
  long long x = strtoll(v, &end, 0);
  return (end && *end == '\0') ? (int64_t)x : dflt;
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
  ctx->initNs = nowNs();
  int64_t maxEvents = envInt(kUNICCL_PROFILER_TRACE_MAX_EVENTS);
  ctx->maxEvents = maxEvents > 0 ? (size_t)maxEvents : 0;
  const char* prefix = getenv(kUNICCL_PROFILER_TRACE_FILE.name);
  if (prefix == nullptr || *prefix == '\0') prefix = kUNICCL_PROFILER_TRACE_FILE.defaultDoc;
  char suffix[64];
  snprintf(suffix, sizeof(suffix), ".%016llx.rank%d.json", (unsigned long long)commId, rank);
  ctx->path = std::string(prefix) + suffix;
  ctx->file = fopen(ctx->path.c_str(), "w");
  if (ctx->file == nullptr) {
    TLOG(ctx, NCCL_LOG_WARN,
         "Trace profiler: cannot write %s (%s); set UNICCL_PROFILER_TRACE_FILE to a writable path prefix",
         ctx->path.c_str(), strerror(errno));
    delete ctx;
    return ncclSystemError;
  }
  *eActivationMask = (int)envInt(kUNICCL_PROFILER_TRACE_MASK);
  TLOG(ctx, NCCL_LOG_INFO, "Trace profiler: rank %d of comm %016llx traces event mask 0x%x into %s", rank,
       (unsigned long long)commId, *eActivationMask, ctx->path.c_str());
  *context = ctx;
  return ncclSuccess;
}

// A parent handle is one of this process's records (PXN may hand us a remote
// process's pointer for ProxyOp; its pid says so, and it is not followed).
uint64_t parentIdOf(void* parent) {
  const TraceEvent* p = static_cast<const TraceEvent*>(parent);
  return (p != nullptr && p->magic == kEventMagic) ? p->id : 0;
}

std::atomic<uint64_t> gNextId{1};

ncclResult_t traceStartEvent(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* d) {
  *eHandle = nullptr;
  TraceContext* ctx = static_cast<TraceContext*>(context);
  if (ctx == nullptr || d == nullptr) return ncclSuccess;
  const int64_t now = nowNs();
  std::lock_guard<std::mutex> lock(ctx->mutex);
  if (ctx->events.size() >= ctx->maxEvents) {
    ctx->dropped.fetch_add(1, std::memory_order_relaxed);
    return ncclSuccess;
  }
  TraceEvent& e = *ctx->events.add();
  memset(&e, 0, sizeof(e));
  e.magic = kEventMagic;
  e.type = d->type;
  e.id = gNextId.fetch_add(1, std::memory_order_relaxed);
  e.ctx = ctx;
  e.startNs = now;
  e.stopNs = -1;
  e.tid = threadId();
  e.channel = -1;
  bool remoteParent = d->type == ncclProfileProxyOp && d->proxyOp.pid != getpid();
  e.parentId = remoteParent ? 0 : parentIdOf(d->parentObj);
  switch (d->type) {
    case ncclProfileGroupApi:
      copyStr(e.func, sizeof(e.func), "Group API");
      e.graphCaptured = d->groupApi.graphCaptured;
      e.groupDepth = d->groupApi.groupDepth;
      break;
    case ncclProfileCollApi:
      copyStr(e.func, sizeof(e.func), d->collApi.func);
      e.count = d->collApi.count;
      copyStr(e.datatype, sizeof(e.datatype), d->collApi.datatype);
      e.root = d->collApi.root;
      e.stream = d->collApi.stream;
      e.graphCaptured = d->collApi.graphCaptured;
      break;
    case ncclProfileP2pApi:
      copyStr(e.func, sizeof(e.func), d->p2pApi.func);
      e.count = d->p2pApi.count;
      copyStr(e.datatype, sizeof(e.datatype), d->p2pApi.datatype);
      e.stream = d->p2pApi.stream;
      e.graphCaptured = d->p2pApi.graphCaptured;
      break;
    case ncclProfileKernelLaunch:
      copyStr(e.func, sizeof(e.func), "KernelLaunch");
      e.stream = d->kernelLaunch.stream;
      break;
    case ncclProfileGroup:
      copyStr(e.func, sizeof(e.func), "Group");
      break;
    case ncclProfileColl:
      copyStr(e.func, sizeof(e.func), d->coll.func);
      e.seq = d->coll.seqNumber;
      e.count = d->coll.count;
      e.root = d->coll.root;
      copyStr(e.datatype, sizeof(e.datatype), d->coll.datatype);
      e.nChannels = d->coll.nChannels;
      copyStr(e.algo, sizeof(e.algo), d->coll.algo);
      copyStr(e.proto, sizeof(e.proto), d->coll.proto);
      e.groupId = parentIdOf(d->coll.parentGroup);
      break;
    case ncclProfileP2p:
      copyStr(e.func, sizeof(e.func), d->p2p.func);
      e.count = d->p2p.count;
      copyStr(e.datatype, sizeof(e.datatype), d->p2p.datatype);
      e.root = d->p2p.peer;
      e.nChannels = d->p2p.nChannels;
      e.groupId = parentIdOf(d->p2p.parentGroup);
      break;
    case ncclProfileProxyOp:
      copyStr(e.func, sizeof(e.func), d->proxyOp.isSend ? "ProxySend" : "ProxyRecv");
      e.channel = d->proxyOp.channelId;
      e.root = d->proxyOp.peer;
      e.nSteps = d->proxyOp.nSteps;
      e.chunkSize = d->proxyOp.chunkSize;
      e.isSend = d->proxyOp.isSend;
      break;
    case ncclProfileProxyStep:
      copyStr(e.func, sizeof(e.func), "ProxyStep");
      e.step = d->proxyStep.step;
      break;
    case ncclProfileProxyCtrl:
      copyStr(e.func, sizeof(e.func), "ProxyCtrl");
      break;
    case ncclProfileKernelCh:
      copyStr(e.func, sizeof(e.func), "KernelCh");
      e.channel = d->kernelCh.channelId;
      e.gpuStart = d->kernelCh.pTimer;
      break;
    case ncclProfileNetPlugin:
      copyStr(e.func, sizeof(e.func), "NetPlugin");
      e.netId = d->netPlugin.id;
      break;
    default:
      copyStr(e.func, sizeof(e.func), "Unknown");
      break;
  }
  *eHandle = &e;
  return ncclSuccess;
}

ncclResult_t traceStopEvent(void* eHandle) {
  TraceEvent* e = static_cast<TraceEvent*>(eHandle);
  if (e == nullptr || e->magic != kEventMagic) return ncclSuccess;
  if (e->stopNs < 0) e->stopNs = nowNs();
  return ncclSuccess;
}

ncclResult_t traceRecordEventState(void* eHandle, ncclProfilerEventState_v5_t state,
                                   ncclProfilerEventStateArgs_v5_t* args) {
  TraceEvent* e = static_cast<TraceEvent*>(eHandle);
  if (e == nullptr || e->magic != kEventMagic) return ncclSuccess;
  uint64_t value = 0;
  if (args != nullptr) {
    switch (state) {
      case ncclProfilerKernelChStop:
        value = args->kernelCh.pTimer;
        e->gpuStop = value;
        break;
      case ncclProfilerProxyCtrlAppendEnd:
        value = (uint64_t)args->proxyCtrl.appendedProxyOps;
        break;
      case ncclProfilerNetPluginUpdate:
        break;
      default:
        if (state >= ncclProfilerProxyStepSendGPUWait && state <= ncclProfilerProxyStepRecvGPUWait)
          value = args->proxyStep.transSize;
        if (state == ncclProfilerProxyStepSendPeerWait_v4) value = args->proxyStep.transSize;
        break;
    }
  }
  if (e->nStates < kMaxStates) e->states[e->nStates++] = TraceState{(int)state, nowNs(), value};
  return ncclSuccess;
}

ncclResult_t traceFinalize(void* context) {
  TraceContext* ctx = static_cast<TraceContext*>(context);
  if (ctx == nullptr) return ncclSuccess;
  size_t n = writeTrace(ctx);
  uint64_t dropped = ctx->dropped.load(std::memory_order_relaxed);
  TLOG(ctx, NCCL_LOG_INFO, "Trace profiler: wrote %zu events to %s%s", n, ctx->path.c_str(),
       dropped ? " (some dropped: raise UNICCL_PROFILER_TRACE_MAX_EVENTS)" : "");
  delete ctx;
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
