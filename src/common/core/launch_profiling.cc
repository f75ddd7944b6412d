#include "common/core/launch_profiling.h"

#include <algorithm>
#include <vector>

#include "common/core/comm_plan.h"
#include "common/core/launch_observer.h"
#include "common/core/tuning.h"
#include "common/gpu.h"
#include "common/profiler/kernel_ch.h"
#include "common/profiler/kernel_ch_poller.h"
#include "device/dev_types.h"

namespace uniccl {

namespace {

int distinctHosts(const ncclComm* comm) {
  std::vector<uint64_t> hosts;
  hosts.reserve(comm->peers.size());
  for (const PeerInfo& p : comm->peers) hosts.push_back(p.hostHash);
  std::sort(hosts.begin(), hosts.end());
  return std::max<int>(1, (int)(std::unique(hosts.begin(), hosts.end()) - hosts.begin()));
}

bool isCaptured(gpu::Stream s) {
  gpu::CaptureInfo info{};
  return gpu::streamGetCaptureInfo(s, &info) == ncclSuccess && info.status == gpu::CaptureStatus::Active;
}

// The first work item of the group's task i (collectives first, as
// LaunchPlan::workTask counts them), or nullptr: it has none (the side plan
// took it off the kernels). A PAT collective's items come after the
// group's other items, so task i's is not always works[i].
const dev::Work* firstWorkOf(const LaunchPlan& plan, size_t i) {
  for (size_t k = 0; k < plan.workTask.size() && k < plan.works.size(); k++)
    if (plan.workTask[k] == (int)i) return &plan.works[k];
  return nullptr;
}

// The Coll event of collective t, described from its first work item w
// (nullptr: it runs on no kernel of this group).
ProfilerCollInfo collInfo(const Task& t, const dev::Work* w, int warp) {
  ProfilerCollInfo c;
  c.seqNumber = t.seq;
  c.func = taskKindName(t.kind);
  c.sendBuff = t.sendbuff;
  c.recvBuff = t.recvbuff;
  c.count = t.count;
  c.root = t.root;
  c.dtype = t.dtype;
  c.nWarps = dev::kThreadsPerBlock / warp;
  if (w != nullptr && w->coll == dev::kCollP2p) {   // PAT rounds: p2p items, always Simple
    c.nChannels = w->channelHi - w->channelLo + 1;
    c.algo = "PAT";
    c.proto = protoName(dev::kProtoSimple);
  } else if (w != nullptr) {
    c.nChannels = w->channelHi - w->channelLo + 1;
    c.algo = w->c.algo == dev::kAlgoTree ? "Tree" : w->c.algo == dev::kAlgoSymmetric ? "Symmetric" : "Ring";
    c.proto = protoName(w->proto);
  } else {   // one-rank copies (no kernel), a collective the side plan moved off the kernels, or a refused plan
    c.nChannels = 0;
    c.nWarps = 0;
    c.algo = "None";
    c.proto = "None";
  }
  return c;
}

// KernelCh: which channels stamp each work item, under the Coll / P2p event
// of its task (events.tasks: colls, then p2p, as LaunchPlan::workTask
// counts them). Channels from kMaxProfiledChannels on run unstamped (a
// 64-bit mask).
void markProfiledWorks(CommPlan& p, KernelChTracker* tracker) {
  LaunchPlan& plan = p.launch;
  const std::vector<void*>& events = p.events.tasks;
  for (size_t i = 0; i < plan.works.size(); i++) {
    const size_t task = (size_t)plan.workTask[i];
    dev::Work& w = plan.works[i];
    const int hi = std::min<int>(w.channelHi, dev::kMaxProfiledChannels - 1);
    if (w.channelLo > hi) continue;
    w.profMask |= tracker->expectChannels(w.channelLo, hi, task < events.size() ? events[task] : nullptr);
  }
}

// The profiler as the observer of the launch sequence: the Group event and
// the tasks' Coll / P2p events start once the plan is made (described from
// it, as NCCL does) and stop when the sequence ends; KernelLaunch events go
// around each kernel launch. The events live in the plan (CommPlan::events).
class ProfilingObserver final : public LaunchObserver {
 public:
  void planned(CommPlan& p, ncclResult_t planResult) override {
    ncclComm* comm = p.comm;
    ProfilerContext* prof = comm->profiler.get();
    const TaskList& tasks = p.tasks;
    const LaunchPlan& plan = p.launch;
    const bool onKernels = planResult == ncclSuccess && !plan.oneRankCopies;
    // Parents line up with tasks only if every task went through enqueueTask
    // since the last launch; otherwise the tasks go without parents.
    const bool collParents = prof->collApiParents.size() == tasks.colls.size();
    const bool p2pParents = prof->p2pApiParents.size() == tasks.p2p.size();
    p.events.group = profilerStartGroup(prof);
    p.events.tasks.clear();
    // Warps of the GPU's own width (64-lane wavefronts on CDNA).
    const int warp = comm->peers.empty() || comm->peers[comm->rank].warpSize == 0
                         ? 32 : comm->peers[comm->rank].warpSize;
    for (size_t i = 0; i < tasks.colls.size(); i++) {
      const ProfilerCollInfo c = collInfo(tasks.colls[i], onKernels ? firstWorkOf(plan, i) : nullptr, warp);
      p.events.tasks.push_back(profilerStartColl(prof, collParents ? prof->collApiParents[i] : nullptr,
                                                 p.events.group, c));
    }
    for (size_t i = 0; i < tasks.p2p.size(); i++) {
      const Task& t = tasks.p2p[i];
      ProfilerP2pInfo c;
      c.func = taskKindName(t.kind);
      c.buff = t.kind == TaskKind::Send ? const_cast<void*>(t.sendbuff) : t.recvbuff;
      c.count = t.count;
      c.dtype = t.dtype;
      c.peer = t.peer();
      c.nChannels = onKernels ? comm->p2pChannels : 0;
      p.events.tasks.push_back(profilerStartP2p(prof, p2pParents ? prof->p2pApiParents[i] : nullptr,
                                                p.events.group, c));
    }
    prof->collApiParents.clear();
    prof->p2pApiParents.clear();
    if (onKernels && comm->kernelCh != nullptr) markProfiledWorks(p, comm->kernelCh.get());
  }

  void* kernelLaunchBegin(CommPlan& p, size_t) override {
    return profilerStartKernelLaunch(p.comm->profiler.get(), p.events.groupApi, p.launch.streams.launch);
  }

  void kernelLaunchEnd(CommPlan& p, size_t, void* begun, ncclResult_t) override {
    profilerStop(p.comm->profiler.get(), begun);
  }

  void ended(CommPlan& p, ncclResult_t) override {
    ProfilerContext* prof = p.comm->profiler.get();
    // Stopped in reverse so that the events of one launch nest in a timeline.
    for (size_t i = p.events.tasks.size(); i-- > 0;) profilerStop(prof, p.events.tasks[i]);
    p.events.tasks.clear();
    profilerStop(prof, p.events.group);
    p.events.group = nullptr;
    // KernelCh stamps of what was launched follow soon: the poller wakes
    // once per launch sequence, not once per kernel.
    if (p.comm->kernelCh != nullptr && !p.launch.works.empty()) kernel_ch_poller::kick();
  }
};

ProfilingObserver gProfilingObserver;

}  // namespace

void profilerCommInit(ncclComm* comm) {
  ProfilerCommInfo info;
  info.commId = comm->commHash;
  info.commName = comm->config.commName.c_str();
  info.nNodes = distinctHosts(comm);
  info.nRanks = comm->nRanks;
  info.rank = comm->rank;
  comm->profiler = profilerInit(info);
}

void* profilerTaskApiBeginSlow(ncclComm* comm, const Task& task, GroupApiEvents* groupApi, int groupDepth) {
  ProfilerContext* p = comm->profiler.get();
  if (!p->wants(kProfGroupApiMask)) return nullptr;
  const bool captured = isCaptured(task.stream);
  void* group = profilerStartGroupApi(groupApi, p, groupDepth > 0 ? groupDepth : 1, captured);
  const char* func = taskKindName(task.kind);
  void* api;
  if (task.kind == TaskKind::Send || task.kind == TaskKind::Recv) {
    api = profilerStartP2pApi(p, group, func, task.count, task.dtype, (void*)task.stream, captured);
    p->p2pApiParents.push_back(api);
  } else {
    api = profilerStartCollApi(p, group, func, task.count, task.dtype, task.root, (void*)task.stream, captured);
    p->collApiParents.push_back(api);
  }
  return api;
}

LaunchObserver* profilingObserver() { return &gProfilingObserver; }

}  // namespace uniccl
