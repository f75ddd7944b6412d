// Runs a profiler plugin that speaks API v4 (NCCL 2.26) behind the v5 table
// the rest of uniccl uses: v4 knows no API-level events (GroupApi, CollApi,
// P2pApi, KernelLaunch), so those get no handle, and a v4 Coll / P2p's parent
// is the Group event (v5 moved it to coll.parentGroup).
#include <cstring>

#include "common/profiler/loader.h"

namespace uniccl {

namespace {

// One plugin library is loaded per process at a time (loader.cc).
const ncclProfiler_v4_t* gV4 = nullptr;

constexpr int kV4EventTypes = ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp |
                              ncclProfileProxyStep | ncclProfileProxyCtrl | ncclProfileKernelCh |
                              ncclProfileNetPlugin;

[[nodiscard]] ncclResult_t v4Init(void** context, uint64_t commId, int* mask, const char* commName, int nNodes, int nRanks,
                    int rank, ncclDebugLogger_t logfn) {
  ncclResult_t res = gV4->init(context, mask, commName, commId, nNodes, nRanks, rank, logfn);
  *mask &= kV4EventTypes;  // bits above 7 mean nothing to a v4 plugin
  return res;
}

[[nodiscard]] ncclResult_t v4StartEvent(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* d) {
  *eHandle = nullptr;
  if ((d->type & kV4EventTypes) == 0) return ncclSuccess;
  ncclProfilerEventDescr_v4_t v4;
  memset(&v4, 0, sizeof(v4));
  v4.type = (uint8_t)d->type;
  v4.parentObj = d->parentObj;
  v4.rank = d->rank;
  switch (d->type) {
    case ncclProfileColl:
      v4.parentObj = d->coll.parentGroup;
      v4.coll.seqNumber = d->coll.seqNumber;
      v4.coll.func = d->coll.func;
      v4.coll.sendBuff = d->coll.sendBuff;
      v4.coll.recvBuff = d->coll.recvBuff;
      v4.coll.count = d->coll.count;
      v4.coll.root = d->coll.root;
      v4.coll.datatype = d->coll.datatype;
      v4.coll.nChannels = d->coll.nChannels;
      v4.coll.nWarps = d->coll.nWarps;
      v4.coll.algo = d->coll.algo;
      v4.coll.proto = d->coll.proto;
      break;
    case ncclProfileP2p:
      v4.parentObj = d->p2p.parentGroup;
      v4.p2p.func = d->p2p.func;
      v4.p2p.buff = d->p2p.buff;
      v4.p2p.datatype = d->p2p.datatype;
      v4.p2p.count = d->p2p.count;
      v4.p2p.peer = d->p2p.peer;
      v4.p2p.nChannels = d->p2p.nChannels;
      break;
    case ncclProfileProxyOp:
      v4.proxyOp.pid = d->proxyOp.pid;
      v4.proxyOp.channelId = d->proxyOp.channelId;
      v4.proxyOp.peer = d->proxyOp.peer;
      v4.proxyOp.nSteps = d->proxyOp.nSteps;
      v4.proxyOp.chunkSize = d->proxyOp.chunkSize;
      v4.proxyOp.isSend = d->proxyOp.isSend;
      break;
    case ncclProfileProxyStep:
      v4.proxyStep.step = d->proxyStep.step;
      break;
    case ncclProfileKernelCh:
      v4.kernelCh.channelId = d->kernelCh.channelId;
      v4.kernelCh.pTimer = d->kernelCh.pTimer;
      break;
    case ncclProfileNetPlugin:
      v4.netPlugin.id = d->netPlugin.id;
      v4.netPlugin.data = d->netPlugin.data;
      break;
    default:  // Group, ProxyCtrl: no payload
      break;
  }
  return gV4->startEvent(context, eHandle, &v4);
}

[[nodiscard]] ncclResult_t v4RecordEventState(void* eHandle, ncclProfilerEventState_v5_t state,
                                ncclProfilerEventStateArgs_v5_t* args) {
  // The GroupApi states have no v4 event to attach to (and never get a handle).
  if (state == ncclProfilerGroupStartApiStop || state == ncclProfilerGroupEndApiStart) return ncclSuccess;
  return gV4->recordEventState(eHandle, state, args);  // same state values and args layout
}

[[nodiscard]] ncclResult_t v4StopEvent(void* eHandle) { return gV4->stopEvent(eHandle); }
[[nodiscard]] ncclResult_t v4Finalize(void* context) { return gV4->finalize(context); }

ncclProfiler_v5_t gAdapter;

}  // namespace

const ncclProfiler_v5_t* adaptProfilerV4(const ncclProfiler_v4_t* v4) {
  if (v4 == nullptr || v4->init == nullptr || v4->startEvent == nullptr || v4->stopEvent == nullptr ||
      v4->recordEventState == nullptr || v4->finalize == nullptr)
    return nullptr;
  gV4 = v4;
  gAdapter.name = v4->name;
  gAdapter.init = v4Init;
  gAdapter.startEvent = v4StartEvent;
  gAdapter.stopEvent = v4StopEvent;
  gAdapter.recordEventState = v4RecordEventState;
  gAdapter.finalize = v4Finalize;
  return &gAdapter;
}

}  // namespace uniccl
