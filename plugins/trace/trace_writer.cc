// Chrome-trace JSON output of the trace plugin.
//
// Layout: pid = rank (ranks merge side by side); API-level and launch-level
// events (GroupApi > CollApi/P2pApi/KernelLaunch, Group > Coll/P2p) sit on
// the OS thread that issued them, where their time intervals nest (so do
// ProxyCtrl events, on the proxy thread's track); KernelCh on one track per
// GPU channel; ProxyOps and their ProxySteps as async slices on one track per
// channel and direction (pipelined operations overlap). args.id / args.parent (and args.group for Coll/P2p) carry the
// event hierarchy explicitly. ts are microseconds since 2023-11-14 22:13:20
// UTC (Unix time 1700000000), so traces of different ranks line up.
#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <set>
#include <unordered_map>
#include <vector>

#include "trace_event.h"

namespace trace {

namespace {

constexpr int64_t kOriginNs = 1700000000LL * 1000000000LL;
constexpr int64_t kHourNs = 3600LL * 1000000000LL;
constexpr long kGpuLaneBase = 1000000000L;    // + channel
constexpr long kProxyLaneBase = 1000001000L;  // + 2 * channel + isSend

int64_t clockNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

const char* typeName(uint64_t type) {
  switch (type) {
    case ncclProfileGroup: return "Group";
    case ncclProfileColl: return "Coll";
    case ncclProfileP2p: return "P2p";
    case ncclProfileProxyOp: return "ProxyOp";
    case ncclProfileProxyStep: return "ProxyStep";
    case ncclProfileProxyCtrl: return "ProxyCtrl";
    case ncclProfileKernelCh: return "KernelCh";
    case ncclProfileNetPlugin: return "NetPlugin";
    case ncclProfileGroupApi: return "GroupApi";
    case ncclProfileCollApi: return "CollApi";
    case ncclProfileP2pApi: return "P2pApi";
    case ncclProfileKernelLaunch: return "KernelLaunch";
  }
  return "Unknown";
}

const char* stateName(int s) {
  switch (s) {
    case ncclProfilerProxyStepSendGPUWait: return "SendGPUWait";
    case ncclProfilerProxyStepSendPeerWait_v4: return "SendPeerWait";
    case ncclProfilerProxyStepSendWait: return "SendWait";
    case ncclProfilerProxyStepRecvWait: return "RecvWait";
    case ncclProfilerProxyStepRecvFlushWait: return "RecvFlushWait";
    case ncclProfilerProxyStepRecvGPUWait: return "RecvGPUWait";
    case ncclProfilerProxyCtrlIdle: return "Idle";
    case ncclProfilerProxyCtrlActive: return "Active";
    case ncclProfilerProxyCtrlSleep: return "Sleep";
    case ncclProfilerProxyCtrlWakeup: return "Wakeup";
    case ncclProfilerProxyCtrlAppend: return "Append";
    case ncclProfilerProxyCtrlAppendEnd: return "AppendEnd";
    case ncclProfilerNetPluginUpdate: return "NetPluginUpdate";
    case ncclProfilerKernelChStop: return "KernelChStop";
    case ncclProfilerGroupStartApiStop: return "GroupStartApiStop";
    case ncclProfilerGroupEndApiStart: return "GroupEndApiStart";
    case ncclProfilerProxyOpInProgress_v4: return "InProgress";
  }
  return "State";
}

void putString(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      fputc('\\', f);
      fputc(c, f);
    } else if (c < 0x20) {
      fprintf(f, "\\u%04x", c);
    } else {
      fputc(c, f);
    }
  }
  fputc('"', f);
}

double us(int64_t traceNs) { return (double)(traceNs - kOriginNs) / 1000.0; }

struct Placed {
  const TraceEvent* e;
  int64_t start, stop;  // trace clock
  long tid;
  bool async;           // "b"/"e" pair instead of one "X"
  bool unfinished;
  bool gpuClock;        // KernelCh placed by GPU timers
};

void putArgs(FILE* f, const Placed& p) {
  const TraceEvent& e = *p.e;
  fprintf(f, "\"args\":{\"id\":%" PRIu64, e.id);
  if (e.parentId) fprintf(f, ",\"parent\":%" PRIu64, e.parentId);
  if (e.groupId) fprintf(f, ",\"group\":%" PRIu64, e.groupId);
  switch (e.type) {
    case ncclProfileGroupApi:
      fprintf(f, ",\"groupDepth\":%d,\"graphCaptured\":%d", e.groupDepth, e.graphCaptured ? 1 : 0);
      break;
    case ncclProfileCollApi:
    case ncclProfileP2pApi:
      fprintf(f, ",\"count\":%zu,\"datatype\":", e.count);
      putString(f, e.datatype);
      if (e.type == ncclProfileCollApi) fprintf(f, ",\"root\":%d", e.root);
      fprintf(f, ",\"stream\":\"%p\",\"graphCaptured\":%d", e.stream, e.graphCaptured ? 1 : 0);
      break;
    case ncclProfileKernelLaunch:
      fprintf(f, ",\"stream\":\"%p\"", e.stream);
      break;
    case ncclProfileColl:
      fprintf(f, ",\"seq\":%" PRIu64 ",\"count\":%zu,\"root\":%d,\"nChannels\":%d,\"datatype\":", e.seq, e.count,
              e.root, e.nChannels);
      putString(f, e.datatype);
      fputs(",\"algo\":", f);
      putString(f, e.algo);
      fputs(",\"proto\":", f);
      putString(f, e.proto);
      break;
    case ncclProfileP2p:
      fprintf(f, ",\"count\":%zu,\"peer\":%d,\"nChannels\":%d,\"datatype\":", e.count, e.root, e.nChannels);
      putString(f, e.datatype);
      break;
    case ncclProfileProxyOp:
      fprintf(f, ",\"channel\":%d,\"peer\":%d,\"nSteps\":%d,\"chunkSize\":%d,\"isSend\":%d", e.channel, e.root,
              e.nSteps, e.chunkSize, e.isSend);
      break;
    case ncclProfileProxyStep:
      fprintf(f, ",\"step\":%d", e.step);
      break;
    case ncclProfileKernelCh:
      fprintf(f, ",\"channel\":%d,\"gpuStartNs\":%" PRIu64 ",\"gpuStopNs\":%" PRIu64 ",\"clock\":\"%s\"", e.channel,
              e.gpuStart, e.gpuStop, p.gpuClock ? "gpu" : "host");
      break;
    case ncclProfileNetPlugin:
      fprintf(f, ",\"netId\":%" PRId64, e.netId);
      break;
  }
  if (p.unfinished) fputs(",\"unfinished\":1", f);
  if (e.nStates > 0) {
    fputs(",\"states\":[", f);
    for (int i = 0; i < e.nStates; i++) {
      fprintf(f, "%s{\"state\":\"%s\",\"ts\":%.3f,\"value\":%" PRIu64 "}", i ? "," : "", stateName(e.states[i].state),
              us(e.states[i].ns), e.states[i].value);
    }
    fputc(']', f);
  }
  fputc('}', f);
}

void putEvent(FILE* f, const TraceContext* ctx, const Placed& p, bool* first) {
  const TraceEvent& e = *p.e;
  fputs(*first ? "\n" : ",\n", f);
  *first = false;
  fputs("{\"name\":", f);
  putString(f, e.func);
  fprintf(f, ",\"cat\":\"%s\",\"pid\":%d,\"tid\":%ld,", typeName(e.type), ctx->rank, p.tid);
  if (p.async) {
    fprintf(f, "\"ph\":\"b\",\"id\":%" PRIu64 ",\"ts\":%.3f,", e.id, us(p.start));
    putArgs(f, p);
    fprintf(f, "},\n{\"name\":");
    putString(f, e.func);
    fprintf(f, ",\"cat\":\"%s\",\"pid\":%d,\"tid\":%ld,\"ph\":\"e\",\"id\":%" PRIu64 ",\"ts\":%.3f}", typeName(e.type),
            ctx->rank, p.tid, e.id, us(p.stop));
  } else {
    fprintf(f, "\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,", us(p.start), (double)(p.stop - p.start) / 1000.0);
    putArgs(f, p);
    fputc('}', f);
  }
}

void putThreadName(FILE* f, int pid, long tid, const char* name, bool* first) {
  fputs(*first ? "\n" : ",\n", f);
  *first = false;
  fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%ld,\"args\":{\"name\":", pid, tid);
  putString(f, name);
  fputs("}}", f);
}

}  // namespace

int64_t nowNs() {
  static const int64_t offset = clockNs(CLOCK_REALTIME) - clockNs(CLOCK_MONOTONIC);
  return clockNs(CLOCK_MONOTONIC) + offset;
}

int64_t gpuToTraceNs(uint64_t gpuNs) {
  // NVIDIA's global timer counts ns from the Unix epoch (synchronized with the
  // host clock by the driver); anything far from "now" is another domain.
  int64_t g = (int64_t)gpuNs;
  int64_t now = nowNs();
  return (gpuNs != 0 && g > now - 24 * kHourNs && g < now + kHourNs) ? g : -1;
}

size_t writeTrace(TraceContext* ctx) {
  std::lock_guard<std::mutex> lock(ctx->mutex);
  FILE* f = ctx->file;
  if (f == nullptr) return 0;
  const int64_t end = nowNs();
  std::unordered_map<uint64_t, const TraceEvent*> byId;
  ctx->events.forEach([&](const TraceEvent& e) { byId[e.id] = &e; });

  std::vector<Placed> placed;
  placed.reserve(ctx->events.size());
  std::set<long> gpuLanes, proxyLanes, hostThreads;
  ctx->events.forEach([&](const TraceEvent& e) {
    Placed p{&e, e.startNs, e.stopNs >= 0 ? e.stopNs : end, e.tid, false, e.stopNs < 0, false};
    switch (e.type) {
      case ncclProfileKernelCh: {
        p.tid = kGpuLaneBase + e.channel;
        gpuLanes.insert(p.tid);
        int64_t gs = gpuToTraceNs(e.gpuStart), ge = gpuToTraceNs(e.gpuStop);
        if (gs >= 0 && ge >= gs) {
          p.start = gs;
          p.stop = ge;
          p.gpuClock = true;
        }
        break;
      }
      case ncclProfileProxyOp:  // operations of one channel may overlap: async slices
        p.tid = kProxyLaneBase + 2L * e.channel + e.isSend;
        proxyLanes.insert(p.tid);
        p.async = true;
        break;
      case ncclProfileProxyStep:
      case ncclProfileNetPlugin: {
        // Pipelined steps overlap: async slices on their ProxyOp's track.
        auto parent = byId.find(e.parentId);
        const TraceEvent* op = parent != byId.end() ? parent->second : nullptr;
        p.tid = (op && op->type == ncclProfileProxyOp) ? kProxyLaneBase + 2L * op->channel + op->isSend : e.tid;
        if (p.tid == e.tid) hostThreads.insert(p.tid);
        p.async = true;
        break;
      }
      default:
        hostThreads.insert(p.tid);
        break;
    }
    if (p.stop < p.start) p.stop = p.start;
    placed.push_back(p);
  });
  // Increasing start time; at equal starts the longer (enclosing) event first.
  std::stable_sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    return a.start != b.start ? a.start < b.start : a.stop > b.stop;
  });

  fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"commId\":", f);
  char hex[32];
  snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)ctx->commId);
  putString(f, hex);
  fputs(",\"commName\":", f);
  putString(f, ctx->commName.c_str());
  fprintf(f,
          ",\"rank\":%d,\"nRanks\":%d,\"nNodes\":%d,\"clockOrigin\":\"unix time 1700000000 s\",\"dropped\":%" PRIu64
          "},\n\"traceEvents\":[",
          ctx->rank, ctx->nRanks, ctx->nNodes, ctx->dropped.load(std::memory_order_relaxed));
  bool first = true;
  char name[160];
  snprintf(name, sizeof(name), "rank %d%s%s (comm %s)", ctx->rank, ctx->commName.empty() ? "" : " ",
           ctx->commName.c_str(), hex);
  fputs("\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", f);
  fprintf(f, "%d,\"args\":{\"name\":", ctx->rank);
  putString(f, name);
  fprintf(f, "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
          ctx->rank, ctx->rank);
  first = false;
  for (long t : hostThreads) {
    snprintf(name, sizeof(name), "host thread %ld", t);
    putThreadName(f, ctx->rank, t, name, &first);
  }
  for (long t : gpuLanes) {
    snprintf(name, sizeof(name), "GPU channel %ld", t - kGpuLaneBase);
    putThreadName(f, ctx->rank, t, name, &first);
  }
  for (long t : proxyLanes) {
    long k = t - kProxyLaneBase;
    snprintf(name, sizeof(name), "proxy channel %ld %s", k / 2, (k & 1) ? "send" : "recv");
    putThreadName(f, ctx->rank, t, name, &first);
  }
  for (const Placed& p : placed) putEvent(f, ctx, p, &first);
  fputs("\n]}\n", f);
  fclose(f);
  ctx->file = nullptr;
  return placed.size();
}

}  // namespace trace
