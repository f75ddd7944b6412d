#include "common/profiler/profiler.h"

#include <unistd.h>

#include <cstring>
#include <vector>

#include "common/profiler/loader.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

pid_t processId() {
  static const pid_t pid = getpid();
  return pid;
}

ncclProfilerEventDescr_v5_t descr(uint64_t type, void* parent, int rank) {
  ncclProfilerEventDescr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = type;
  d.parentObj = parent;
  d.rank = rank;
  return d;
}

uint8_t clampU8(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

}  // namespace

std::unique_ptr<ProfilerContext> profilerInit(const ProfilerCommInfo& info) {
  const ProfilerPlugin* plugin = profilerPluginAcquire();
  if (plugin == nullptr) return nullptr;
  std::unique_ptr<ProfilerContext> ctx(new ProfilerContext());
  ctx->plugin_ = plugin;
  ctx->rank_ = info.rank;
  processId();
  ncclResult_t res = plugin->api->init(&ctx->pluginContext_, info.commId, &ctx->mask_,
                                       info.commName ? info.commName : "", info.nNodes, info.nRanks, info.rank,
                                       profilerPluginLogger);
  if (res != ncclSuccess) {
    WARN("PROFILER/Plugin: %s init failed (%s) for rank %d of comm 0x%llx; this communicator carries on without "
         "profiling",
         plugin->name.c_str(), ncclGetErrorString(res), info.rank, (unsigned long long)info.commId);
    ctx->plugin_ = nullptr;  // no finalize for a context that never initialized
    profilerPluginRelease();
    return nullptr;
  }
  INFO(kSubsysInit, "PROFILER/Plugin: %s (v%d) active for rank %d, event mask 0x%x", plugin->name.c_str(),
       plugin->version, info.rank, ctx->mask());
  return ctx;
}

ProfilerContext::~ProfilerContext() {
  if (plugin_ == nullptr) return;
  ncclResult_t res = plugin_->api->finalize(pluginContext_);
  if (res != ncclSuccess)
    INFO(kSubsysInit, "PROFILER/Plugin: %s finalize returned %s", plugin_->name.c_str(), ncclGetErrorString(res));
  profilerPluginRelease();
}

const char* ProfilerContext::pluginName() const { return plugin_ ? plugin_->name.c_str() : ""; }
int ProfilerContext::pluginVersion() const { return plugin_ ? plugin_->version : 0; }

// Plugin results other than success are ignored after init, as in NCCL: a
// profiler must never change what the communicator does.
void* ProfilerContext::start(ncclProfilerEventDescr_v5_t* d) {
  void* handle = nullptr;
  plugin_->api->startEvent(pluginContext_, &handle, d);
  return handle;
}

void ProfilerContext::stop(void* handle) { plugin_->api->stopEvent(handle); }

void ProfilerContext::record(void* handle, ncclProfilerEventState_t state, ncclProfilerEventStateArgs_v5_t* args) {
  plugin_->api->recordEventState(handle, state, args);
}

const char* profilerDataTypeName(ncclDataType_t dtype) {
  static const char* names[] = {"ncclInt8",    "ncclUint8",    "ncclInt32",      "ncclUint32",
                                "ncclInt64",   "ncclUint64",   "ncclFloat16",    "ncclFloat32",
                                "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  int i = (int)dtype;
  return i >= 0 && i < (int)(sizeof(names) / sizeof(names[0])) ? names[i] : "ncclUnknownType";
}

void* GroupApiEvents::start(ProfilerContext* p, int groupDepth, bool graphCaptured) {
  for (const Entry& e : entries_)
    if (e.ctx == p) return e.handle;  // later operations of the same group
  ncclProfilerEventDescr_v5_t d = descr(ncclProfileGroupApi, nullptr, p->rank());
  d.groupApi.graphCaptured = graphCaptured;
  d.groupApi.groupDepth = groupDepth;
  void* handle = p->start(&d);
  entries_.push_back(Entry{p, handle, false});
  if (handle != nullptr) p->record(handle, ncclProfilerGroupStartApiStop, nullptr);
  return handle;
}

void GroupApiEvents::recordEnd() {
  for (Entry& e : entries_) {
    if (e.endRecorded) continue;
    e.endRecorded = true;
    if (e.handle != nullptr) e.ctx->record(e.handle, ncclProfilerGroupEndApiStart, nullptr);
  }
}

void GroupApiEvents::stop() {
  recordEnd();
  for (const Entry& e : entries_)
    if (e.handle != nullptr) e.ctx->stop(e.handle);
  entries_.clear();
}

void* GroupApiEvents::current(const ProfilerContext* p) const {
  for (const Entry& e : entries_)
    if (e.ctx == p) return e.handle;
  return nullptr;
}

void GroupApiEvents::forget(const ProfilerContext* p) {
  for (size_t i = 0; i < entries_.size(); i++)
    if (entries_[i].ctx == p) entries_.erase(entries_.begin() + (long)i--);
}

void* profilerStartCollApiSlow(ProfilerContext* p, void* parent, const char* func, size_t count,
                               ncclDataType_t dtype, int root, void* stream, bool graphCaptured) {
  ncclProfilerEventDescr_v5_t d = descr(ncclProfileCollApi, parent, p->rank());
  d.collApi.func = func;
  d.collApi.count = count;
  d.collApi.datatype = profilerDataTypeName(dtype);
  d.collApi.root = root;
  d.collApi.stream = stream;
  d.collApi.graphCaptured = graphCaptured;
  return p->start(&d);
}

void* profilerStartP2pApiSlow(ProfilerContext* p, void* parent, const char* func, size_t count, ncclDataType_t dtype,
                              void* stream, bool graphCaptured) {
  ncclProfilerEventDescr_v5_t d = descr(ncclProfileP2pApi, parent, p->rank());
  d.p2pApi.func = func;
  d.p2pApi.count = count;
  d.p2pApi.datatype = profilerDataTypeName(dtype);
  d.p2pApi.stream = stream;
  d.p2pApi.graphCaptured = graphCaptured;
  return p->start(&d);
}

void* profilerStartKernelLaunchSlow(ProfilerContext* p, void* parent, void* stream) {
  ncclProfilerEventDescr_v5_t d = descr(ncclProfileKernelLaunch, parent, p->rank());
  d.kernelLaunch.stream = stream;
  return p->start(&d);
}

void* profilerStartGroupSlow(ProfilerContext* p) {
  ncclProfilerEventDescr_v5_t d = descr(ncclProfileGroup, nullptr, p->rank());
  return p->start(&d);
}

void* profilerStartCollSlow(ProfilerContext* p, void* parentApi, void* parentGroup, const ProfilerCollInfo& c) {
  ncclProfilerEventDescr_v5_t d = descr(ncclProfileColl, parentApi, p->rank());
  d.coll.seqNumber = c.seqNumber;
  d.coll.func = c.func;
  d.coll.sendBuff = c.sendBuff;
  d.coll.recvBuff = c.recvBuff;
  d.coll.count = c.count;
  d.coll.root = c.root;
  d.coll.datatype = profilerDataTypeName(c.dtype);
  d.coll.nChannels = clampU8(c.nChannels);
  d.coll.nWarps = clampU8(c.nWarps);
  d.coll.algo = c.algo ? c.algo : "";
  d.coll.proto = c.proto ? c.proto : "";
  d.coll.parentGroup = parentGroup;
  return p->start(&d);
}

void* profilerStartP2pSlow(ProfilerContext* p, void* parentApi, void* parentGroup, const ProfilerP2pInfo& c) {
  ncclProfilerEventDescr_v5_t d = descr(ncclProfileP2p, parentApi, p->rank());
  d.p2p.func = c.func;
  d.p2p.buff = c.buff;
  d.p2p.datatype = profilerDataTypeName(c.dtype);
  d.p2p.count = c.count;
  d.p2p.peer = c.peer;
  d.p2p.nChannels = clampU8(c.nChannels);
  d.p2p.parentGroup = parentGroup;
  return p->start(&d);
}

void* profilerStartProxyOpSlow(ProfilerContext* p, void* parentTask, int channelId, int peer, int nSteps,
                               int chunkSize, bool isSend) {
  ncclProfilerEventDescr_v5_t d = descr(ncclProfileProxyOp, parentTask, p->rank());
  d.proxyOp.pid = processId();
  d.proxyOp.channelId = clampU8(channelId);
  d.proxyOp.peer = peer;
  d.proxyOp.nSteps = nSteps;
  d.proxyOp.chunkSize = chunkSize;
  d.proxyOp.isSend = isSend ? 1 : 0;
  return p->start(&d);
}

void* profilerStartProxyStepSlow(ProfilerContext* p, void* parentOp, int step) {
  ncclProfilerEventDescr_v5_t d = descr(ncclProfileProxyStep, parentOp, p->rank());
  d.proxyStep.step = step;
  return p->start(&d);
}

void* profilerStartProxyCtrlSlow(ProfilerContext* p) {
  ncclProfilerEventDescr_v5_t d = descr(ncclProfileProxyCtrl, nullptr, p->rank());
  return p->start(&d);
}

void* profilerStartKernelChSlow(ProfilerContext* p, void* parentTask, int channelId, uint64_t startTimer) {
  ncclProfilerEventDescr_v5_t d = descr(ncclProfileKernelCh, parentTask, p->rank());
  d.kernelCh.channelId = clampU8(channelId);
  d.kernelCh.pTimer = startTimer;
  return p->start(&d);
}

void* profilerStartNetPluginSlow(ProfilerContext* p, void* parent, int64_t id, void* data) {
  ncclProfilerEventDescr_v5_t d = descr(ncclProfileNetPlugin, parent, p->rank());
  d.netPlugin.id = id;
  d.netPlugin.data = data;
  return p->start(&d);
}

}  // namespace uniccl
