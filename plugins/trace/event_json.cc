#include "event_json.h"

#include "uniccl_profiler.h"

namespace trace {

namespace {

const char* categoryOf(uint32_t type) {
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

void appendName(JsonOut& out, const PendingEvent& e) {
  switch (e.type()) {
    case ncclProfileGroupApi: out.lit("\"Group API\""); return;
    case ncclProfileCollApi:
    case ncclProfileP2pApi: out.str(e.part<ApiTail>(1).func); return;
    case ncclProfileKernelLaunch: out.lit("\"KernelLaunch\""); return;
    case ncclProfileGroup: out.lit("\"Group\""); return;
    case ncclProfileColl: out.str(e.part<CollNames>(1).func); return;
    case ncclProfileP2p: out.str(e.part<P2pTail>(1).func); return;
    case ncclProfileProxyOp: out.raw(e.first.head.small ? "\"ProxySend\"" : "\"ProxyRecv\""); return;
    case ncclProfileProxyStep: out.lit("\"ProxyStep\""); return;
    case ncclProfileProxyCtrl: out.lit("\"ProxyCtrl\""); return;
    case ncclProfileKernelCh: out.lit("\"KernelCh\""); return;
    case ncclProfileNetPlugin: out.lit("\"NetPlugin\""); return;
  }
  out.lit("\"Unknown\"");
}

// {"name":...,"cat":...,"pid":...,"tid":...,
void appendPrefix(JsonOut& out, const PendingEvent& e, int pid) {
  out.lit("{\"name\":");
  appendName(out, e);
  out.lit(",\"cat\":\"");
  out.raw(categoryOf(e.type()));
  out.lit("\",\"pid\":");
  out.i64(pid);
  out.lit(",\"tid\":");
  out.i64(e.track);
  out.ch(',');
}

// "states":[...] from state `from` on.
void appendStateList(JsonOut& out, const PendingEvent& e, int from) {
  out.lit("\"states\":[");
  for (int i = from; i < e.nStates; i++) {
    out.raw(i > from ? ",{\"state\":\"" : "{\"state\":\"");
    out.raw(stateName(e.stateCodes[i]));
    out.lit("\",\"ts\":");
    out.usSinceOrigin(e.stateNs[i]);
    out.lit(",\"value\":");
    out.u64(e.stateValues[i]);
    out.ch('}');
  }
  out.ch(']');
}

void appendFlag(JsonOut& out, const char* key, bool v) {
  out.raw(key);
  out.ch(v ? '1' : '0');
}

void appendArgs(JsonOut& out, const PendingEvent& e, bool unfinished) {
  const StartRecord& s = e.first;
  out.lit("\"args\":{\"id\":");
  out.u64(e.id);
  if (s.parentId != 0) {
    out.lit(",\"parent\":");
    out.u64(s.parentId);
  }
  switch (e.type()) {
    case ncclProfileGroupApi:
      out.lit(",\"groupDepth\":");
      out.i64((int)s.word);
      appendFlag(out, ",\"graphCaptured\":", s.head.small != 0);
      break;
    case ncclProfileCollApi:
    case ncclProfileP2pApi: {
      const ApiTail a = e.part<ApiTail>(1);
      out.lit(",\"count\":");
      out.u64(a.count);
      out.lit(",\"datatype\":");
      out.str(a.datatype);
      if (e.type() == ncclProfileCollApi) {
        out.lit(",\"root\":");
        out.i64((int)s.word);
      }
      out.lit(",\"stream\":\"");
      out.ptr(a.stream);
      out.ch('"');
      appendFlag(out, ",\"graphCaptured\":", s.head.small != 0);
      break;
    }
    case ncclProfileKernelLaunch:
      out.lit(",\"stream\":\"");
      out.ptr(reinterpret_cast<const void*>((uintptr_t)s.word));
      out.ch('"');
      break;
    case ncclProfileColl: {
      const CollNames n = e.part<CollNames>(1);
      const CollTail t = e.part<CollTail>(2);
      if (s.word != 0) {
        out.lit(",\"group\":");
        out.u64(s.word);
      }
      out.lit(",\"seq\":");
      out.u64(t.seq);
      out.lit(",\"count\":");
      out.u64(t.count);
      out.lit(",\"root\":");
      out.i64(t.root);
      out.lit(",\"nChannels\":");
      out.i64(t.nChannels);
      out.lit(",\"datatype\":");
      out.str(n.datatype);
      out.lit(",\"algo\":");
      out.str(n.algo);
      out.lit(",\"proto\":");
      out.str(n.proto);
      break;
    }
    case ncclProfileP2p: {
      const P2pTail t = e.part<P2pTail>(1);
      if (s.word != 0) {
        out.lit(",\"group\":");
        out.u64(s.word);
      }
      out.lit(",\"count\":");
      out.u64(t.count);
      out.lit(",\"peer\":");
      out.i64(t.peer);
      out.lit(",\"nChannels\":");
      out.i64(t.nChannels);
      out.lit(",\"datatype\":");
      out.str(t.datatype);
      break;
    }
    case ncclProfileProxyOp: {
      const ProxyOpTail t = e.part<ProxyOpTail>(1);
      out.lit(",\"channel\":");
      out.i64(t.channel);
      out.lit(",\"peer\":");
      out.i64(t.peer);
      out.lit(",\"nSteps\":");
      out.i64(t.nSteps);
      out.lit(",\"chunkSize\":");
      out.i64(t.chunkSize);
      appendFlag(out, ",\"isSend\":", s.head.small != 0);
      break;
    }
    case ncclProfileProxyStep:
      out.lit(",\"step\":");
      out.i64((int)s.word);
      break;
    case ncclProfileKernelCh:
      out.lit(",\"channel\":");
      out.i64(s.head.small);
      out.lit(",\"gpuStartNs\":");
      out.u64(s.word);
      out.lit(",\"gpuStopNs\":");
      out.u64(e.gpuStop);
      out.raw(e.gpuClock ? ",\"clock\":\"gpu\"" : ",\"clock\":\"host\"");
      break;
    case ncclProfileNetPlugin:
      out.lit(",\"netId\":");
      out.i64((int64_t)s.word);
      break;
  }
  if (unfinished) out.lit(",\"unfinished\":1");
  if (e.nStates > 0) {
    out.ch(',');
    appendStateList(out, e, 0);
  }
  out.ch('}');
}

}  // namespace

bool isAsync(uint32_t type) {
  return type == ncclProfileProxyOp || type == ncclProfileProxyStep || type == ncclProfileNetPlugin;
}

long proxyOpTrack(const PendingEvent& e) {
  return kProxyTrackBase + 2L * e.part<ProxyOpTail>(1).channel + (e.first.head.small != 0 ? 1 : 0);
}

void appendComplete(JsonOut& out, const PendingEvent& e, int pid, bool unfinished) {
  appendPrefix(out, e, pid);
  out.lit("\"ph\":\"X\",\"ts\":");
  out.usSinceOrigin(e.placedStart);
  out.lit(",\"dur\":");
  out.usOf(e.placedStop - e.placedStart);
  out.ch(',');
  appendArgs(out, e, unfinished);
  out.ch('}');
}

void appendAsyncBegin(JsonOut& out, const PendingEvent& e, int pid, bool unfinished) {
  appendPrefix(out, e, pid);
  out.lit("\"ph\":\"b\",\"id\":");
  out.u64(e.id);
  out.lit(",\"ts\":");
  out.usSinceOrigin(e.placedStart);
  out.ch(',');
  appendArgs(out, e, unfinished);
  out.ch('}');
}

void appendAsyncEnd(JsonOut& out, const PendingEvent& e, int pid, bool unfinished) {
  appendPrefix(out, e, pid);
  out.lit("\"ph\":\"e\",\"id\":");
  out.u64(e.id);
  out.lit(",\"ts\":");
  out.usSinceOrigin(e.placedStop);
  // What the begin could not say yet (Chrome merges an end's args into its slice's).
  const bool laterStates = e.nStatesWritten < e.nStates;
  if (unfinished || laterStates) {
    out.lit(",\"args\":{");
    if (unfinished) out.lit("\"unfinished\":1");
    if (laterStates) {
      if (unfinished) out.ch(',');
      appendStateList(out, e, e.nStatesWritten);
    }
    out.ch('}');
  }
  out.ch('}');
}

void appendTrackName(JsonOut& out, int pid, long track) {
  out.lit("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":");
  out.i64(pid);
  out.lit(",\"tid\":");
  out.i64(track);
  out.lit(",\"args\":{\"name\":\"");
  if (track >= kProxyTrackBase) {
    const long k = track - kProxyTrackBase;
    out.lit("proxy channel ");
    out.i64(k / 2);
    out.raw((k & 1) ? " send" : " recv");
  } else if (track >= kGpuTrackBase) {
    out.lit("GPU channel ");
    out.i64(track - kGpuTrackBase);
  } else {
    out.lit("host thread ");
    out.i64(track);
  }
  out.lit("\"}}");
}

}  // namespace trace
