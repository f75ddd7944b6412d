// The profiler plugin as the rest of uniccl sees it: one ProfilerContext per
// communicator (nullptr when no plugin is loaded or its init failed) and
// inline helpers that start, update and stop events.
//
// Cost without a plugin: every helper is one predictable branch on the
// context pointer. With a plugin, a helper whose event type the activation
// mask does not ask for (directly or through an event type nested below it,
// as NCCL decides) returns nullptr without calling the plugin; every helper
// accepts nullptr handles and contexts.
//
// Nothing here knows ncclComm's layout: callers pass plain values, so the
// layer is unit-tested without a GPU (tests/unit/profiler). The core
// adapts it to communicators and plans (core/launch_profiling.h).
//
// Thread safety: a context is immutable after create() except for the mask,
// which the plugin may change at any time (read with relaxed loads); helpers
// may be called from any thread (API, proxy, callback threads), as NCCL does.
// The plugin must be thread-safe, as NCCL requires.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "uniccl.h"
#include "uniccl_profiler.h"

namespace uniccl {

struct ProfilerPlugin;  // loader.h

// The event types that make each helper fire: the type itself plus every
// type nested below it, so that children always find their parent (NCCL's rule).
constexpr int kProfGroupApiMask = ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi |
                                  ncclProfileKernelLaunch | ncclProfileGroup | ncclProfileColl | ncclProfileP2p |
                                  ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileKernelCh |
                                  ncclProfileNetPlugin;
constexpr int kProfCollApiMask = ncclProfileCollApi | ncclProfileColl | ncclProfileProxyOp | ncclProfileProxyStep |
                                 ncclProfileKernelCh | ncclProfileNetPlugin;
constexpr int kProfP2pApiMask = ncclProfileP2pApi | ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep |
                                ncclProfileKernelCh | ncclProfileNetPlugin;
constexpr int kProfGroupMask = ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp |
                               ncclProfileProxyStep | ncclProfileKernelCh | ncclProfileNetPlugin;
constexpr int kProfCollMask =
    ncclProfileColl | ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileKernelCh | ncclProfileNetPlugin;
constexpr int kProfP2pMask =
    ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileKernelCh | ncclProfileNetPlugin;
constexpr int kProfProxyOpMask = ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileNetPlugin;
constexpr int kProfProxyStepMask = ncclProfileProxyStep | ncclProfileNetPlugin;

// What profilerInit hands the plugin's init().
struct ProfilerCommInfo {
  uint64_t commId = 0;           // same on every rank of the communicator
  const char* commName = "";     // the config's commName ("" when none)
  int nNodes = 1;                // distinct hosts among the ranks
  int nRanks = 1;
  int rank = 0;
};

class ProfilerContext {
 public:
  ~ProfilerContext();  // plugin finalize(), then the library reference is dropped
  ProfilerContext(const ProfilerContext&) = delete;
  ProfilerContext& operator=(const ProfilerContext&) = delete;

  int mask() const { return __atomic_load_n(&mask_, __ATOMIC_RELAXED); }
  bool wants(int types) const { return (mask() & types) != 0; }
  int rank() const { return rank_; }
  const char* pluginName() const;
  int pluginVersion() const;

  // Raw plugin calls (the helpers below fill the descriptors).
  void* start(ncclProfilerEventDescr_v5_t* d);
  void stop(void* handle);
  void record(void* handle, ncclProfilerEventState_t state, ncclProfilerEventStateArgs_v5_t* args);

  // Parents of the tasks recorded since the last launch, in enqueue order
  // (the CollApi / P2pApi events). Owned by the thread that drives the comm.
  std::vector<void*> collApiParents;
  std::vector<void*> p2pApiParents;

 private:
  friend std::unique_ptr<ProfilerContext> profilerInit(const ProfilerCommInfo& info);
  ProfilerContext() = default;
  const ProfilerPlugin* plugin_ = nullptr;
  void* pluginContext_ = nullptr;
  int mask_ = 0;  // written by the plugin (init and later), read relaxed
  int rank_ = 0;
};

// Loads the plugin (NCCL_PROFILER_PLUGIN, see loader.h) and calls its init().
// nullptr when there is no plugin, or its init failed (logged; the caller
// carries on without profiling).
std::unique_ptr<ProfilerContext> profilerInit(const ProfilerCommInfo& info);
// Calls finalize() and drops the library (dlclose when the last context goes).
inline void profilerFinalize(std::unique_ptr<ProfilerContext>& ctx) { ctx.reset(); }

// NCCL's strings for descriptors ("ncclFloat32", "AllReduce", "Ring", "LL").
const char* profilerDataTypeName(ncclDataType_t dtype);

// The GroupApi events of one open group of one thread, one per
// communicator context (NCCL keeps the same state per thread: its group API
// is per thread). The thread's group state owns it (core/group.cc); unlike
// NCCL (one GroupApi per thread, under the first communicator's context),
// every communicator's events keep their parents in that communicator's
// own context.
class GroupApiEvents {
 public:
  bool empty() const { return entries_.empty(); }
  // p's event of this group: the one already open, or a new one
  // (GroupStartApiStop recorded right after its start).
  void* start(ProfilerContext* p, int groupDepth, bool graphCaptured);
  // GroupEndApiStart (the outermost ncclGroupEnd) on every event not marked yet.
  void recordEnd();
  // Stops every event (the group launched) and forgets them.
  void stop();
  // p's open event, or nullptr.
  void* current(const ProfilerContext* p) const;
  // A context that goes while the group is open: its event is forgotten.
  void forget(const ProfilerContext* p);

 private:
  struct Entry {
    ProfilerContext* ctx;
    void* handle;
    bool endRecorded;
  };
  std::vector<Entry> entries_;
};

// What the profiler opened for one communicator's launch (the group's plan
// holds it: core/comm_plan.h): the calling thread's GroupApi event (parent
// of KernelLaunch), the Group event and the tasks' Coll / P2p events
// (tasks[i]: the i-th collective, then the p2p tasks, in the plan's task
// order; nullptr where not profiled). Its vector keeps its capacity.
struct ProfilerLaunchEvents {
  void* groupApi = nullptr;
  void* group = nullptr;
  std::vector<void*> tasks;
  void clear() {
    groupApi = nullptr;
    group = nullptr;
    tasks.clear();
  }
};

// ------------------------------------------------------------ generic
inline void profilerStop(ProfilerContext* p, void* handle) {
  if (__builtin_expect(p != nullptr && handle != nullptr, 0)) p->stop(handle);
}

inline void profilerRecordState(ProfilerContext* p, void* handle, ncclProfilerEventState_t state,
                                ncclProfilerEventStateArgs_v5_t* args = nullptr) {
  if (__builtin_expect(p != nullptr && handle != nullptr, 0)) p->record(handle, state, args);
}

// ------------------------------------------------------------ API layer
// GroupApi: one per outermost group of the calling thread and communicator
// (a call outside a group is a group of one), kept in the group's
// GroupApiEvents. Started by the group's first operation on that
// communicator (then ncclProfilerGroupStartApiStop is recorded),
// GroupEndApiStart when the outermost ncclGroupEnd runs, stopped when the
// group has launched.
inline void* profilerStartGroupApi(GroupApiEvents* g, ProfilerContext* p, int groupDepth, bool graphCaptured) {
  if (__builtin_expect(p == nullptr, 1) || !p->wants(kProfGroupApiMask)) return nullptr;
  return g->start(p, groupDepth, graphCaptured);
}
inline void profilerRecordGroupEndApi(GroupApiEvents* g) {
  if (__builtin_expect(!g->empty(), 0)) g->recordEnd();
}
inline void profilerStopGroupApi(GroupApiEvents* g) {
  if (__builtin_expect(!g->empty(), 0)) g->stop();
}
// The group's GroupApi event of p (parent of KernelLaunch), or nullptr.
inline void* profilerCurrentGroupApi(const GroupApiEvents* g, const ProfilerContext* p) {
  if (__builtin_expect(p == nullptr || g->empty(), 1)) return nullptr;
  return g->current(p);
}

void* profilerStartCollApiSlow(ProfilerContext* p, void* parent, const char* func, size_t count,
                               ncclDataType_t dtype, int root, void* stream, bool graphCaptured);
inline void* profilerStartCollApi(ProfilerContext* p, void* parent, const char* func, size_t count,
                                  ncclDataType_t dtype, int root, void* stream, bool graphCaptured) {
  if (__builtin_expect(p == nullptr, 1) || !p->wants(kProfCollApiMask)) return nullptr;
  return profilerStartCollApiSlow(p, parent, func, count, dtype, root, stream, graphCaptured);
}

void* profilerStartP2pApiSlow(ProfilerContext* p, void* parent, const char* func, size_t count, ncclDataType_t dtype,
                              void* stream, bool graphCaptured);
inline void* profilerStartP2pApi(ProfilerContext* p, void* parent, const char* func, size_t count,
                                 ncclDataType_t dtype, void* stream, bool graphCaptured) {
  if (__builtin_expect(p == nullptr, 1) || !p->wants(kProfP2pApiMask)) return nullptr;
  return profilerStartP2pApiSlow(p, parent, func, count, dtype, stream, graphCaptured);
}

// KernelLaunch: around one kernel launch; parent = the group's GroupApi event.
void* profilerStartKernelLaunchSlow(ProfilerContext* p, void* parent, void* stream);
inline void* profilerStartKernelLaunch(ProfilerContext* p, void* parent, void* stream) {
  if (__builtin_expect(p == nullptr, 1) || !p->wants(ncclProfileKernelLaunch)) return nullptr;
  return profilerStartKernelLaunchSlow(p, parent, stream);
}

// ------------------------------------------------------------ launch layer
// Group: the operations of one communicator handed to the GPU together.
void* profilerStartGroupSlow(ProfilerContext* p);
inline void* profilerStartGroup(ProfilerContext* p) {
  if (__builtin_expect(p == nullptr, 1) || !p->wants(kProfGroupMask)) return nullptr;
  return profilerStartGroupSlow(p);
}

struct ProfilerCollInfo {
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  ncclDataType_t dtype;
  int nChannels;
  int nWarps;
  const char* algo;
  const char* proto;
};
// Coll: parent = its CollApi event, parentGroup = the Group event.
void* profilerStartCollSlow(ProfilerContext* p, void* parentApi, void* parentGroup, const ProfilerCollInfo& c);
inline void* profilerStartColl(ProfilerContext* p, void* parentApi, void* parentGroup, const ProfilerCollInfo& c) {
  if (__builtin_expect(p == nullptr, 1) || !p->wants(kProfCollMask)) return nullptr;
  return profilerStartCollSlow(p, parentApi, parentGroup, c);
}

struct ProfilerP2pInfo {
  const char* func;  // "Send" / "Recv"
  void* buff;
  size_t count;
  ncclDataType_t dtype;
  int peer;
  int nChannels;
};
void* profilerStartP2pSlow(ProfilerContext* p, void* parentApi, void* parentGroup, const ProfilerP2pInfo& c);
inline void* profilerStartP2p(ProfilerContext* p, void* parentApi, void* parentGroup, const ProfilerP2pInfo& c) {
  if (__builtin_expect(p == nullptr, 1) || !p->wants(kProfP2pMask)) return nullptr;
  return profilerStartP2pSlow(p, parentApi, parentGroup, c);
}

// ------------------------------------------------------------ proxy layer
// ProxyOp: one network operation on one channel; parent = the Coll/P2p event.
void* profilerStartProxyOpSlow(ProfilerContext* p, void* parentTask, int channelId, int peer, int nSteps,
                               int chunkSize, bool isSend);
inline void* profilerStartProxyOp(ProfilerContext* p, void* parentTask, int channelId, int peer, int nSteps,
                                  int chunkSize, bool isSend) {
  if (__builtin_expect(p == nullptr, 1) || !p->wants(kProfProxyOpMask)) return nullptr;
  return profilerStartProxyOpSlow(p, parentTask, channelId, peer, nSteps, chunkSize, isSend);
}

// ProxyStep: one network transfer of a ProxyOp; states SendGPUWait ->
// SendPeerWait_v4 -> SendWait (send) or RecvWait -> RecvFlushWait -> RecvGPUWait.
void* profilerStartProxyStepSlow(ProfilerContext* p, void* parentOp, int step);
inline void* profilerStartProxyStep(ProfilerContext* p, void* parentOp, int step) {
  if (__builtin_expect(p == nullptr, 1) || !p->wants(kProfProxyStepMask)) return nullptr;
  return profilerStartProxyStepSlow(p, parentOp, step);
}
inline void profilerRecordProxyStep(ProfilerContext* p, void* step, ncclProfilerEventState_t state, size_t bytes) {
  if (__builtin_expect(p == nullptr || step == nullptr, 1)) return;
  ncclProfilerEventStateArgs_v5_t a;
  a.proxyStep.transSize = bytes;
  p->record(step, state, &a);
}

// ProxyCtrl: the proxy thread's own activity (no parent).
void* profilerStartProxyCtrlSlow(ProfilerContext* p);
inline void* profilerStartProxyCtrl(ProfilerContext* p) {
  if (__builtin_expect(p == nullptr, 1) || !p->wants(ncclProfileProxyCtrl)) return nullptr;
  return profilerStartProxyCtrlSlow(p);
}

// KernelCh: one channel working on one task, stamped with GPU timer values
// (ns); kernel_ch.h delivers them from the per-channel rings.
void* profilerStartKernelChSlow(ProfilerContext* p, void* parentTask, int channelId, uint64_t startTimer);
inline void* profilerStartKernelCh(ProfilerContext* p, void* parentTask, int channelId, uint64_t startTimer) {
  if (__builtin_expect(p == nullptr, 1) || !p->wants(ncclProfileKernelCh)) return nullptr;
  return profilerStartKernelChSlow(p, parentTask, channelId, startTimer);
}
inline void profilerStopKernelCh(ProfilerContext* p, void* handle, uint64_t stopTimer) {
  if (__builtin_expect(p == nullptr || handle == nullptr, 1)) return;
  ncclProfilerEventStateArgs_v5_t a;
  a.kernelCh.pTimer = stopTimer;
  p->record(handle, ncclProfilerKernelChStop, &a);
  p->stop(handle);
}

// NetPlugin: an event a network transport defines (id = NCCL_PROFILER_NET_TYPE_* | version).
void* profilerStartNetPluginSlow(ProfilerContext* p, void* parent, int64_t id, void* data);
inline void* profilerStartNetPlugin(ProfilerContext* p, void* parent, int64_t id, void* data) {
  if (__builtin_expect(p == nullptr, 1) || !p->wants(ncclProfileNetPlugin)) return nullptr;
  return profilerStartNetPluginSlow(p, parent, id, data);
}

}  // namespace uniccl
