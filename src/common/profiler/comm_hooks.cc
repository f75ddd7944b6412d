#include "common/profiler/comm_hooks.h"

#include <algorithm>
#include <vector>

#include "common/core/launch_plan.h"
#include "common/core/planner.h"
#include "common/core/tuning.h"
#include "common/gpu.h"
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

void* profilerTaskApiBeginSlow(ncclComm* comm, const Task& task, int groupDepth) {
  ProfilerContext* p = comm->profiler.get();
  if (!p->wants(kProfGroupApiMask)) return nullptr;
  const bool captured = isCaptured(task.stream);
  void* group = profilerStartGroupApi(p, groupDepth > 0 ? groupDepth : 1, captured);
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

ncclResult_t launchTasksWithEvents(ncclComm* comm) {
  ProfilerContext* p = comm->profiler.get();
  const TaskList& tasks = comm->tasks;
  // The plan first: the Coll events describe what the launch will run.
  ncclResult_t res = planTasks(comm);
  const LaunchPlan& plan = comm->plan;
  const bool planned = res == ncclSuccess && !plan.oneRankCopies;
  // Parents line up with tasks only if every task went through enqueueTask
  // since the last launch; otherwise the tasks go without parents.
  const bool collParents = p->collApiParents.size() == tasks.colls.size();
  const bool p2pParents = p->p2pApiParents.size() == tasks.p2p.size();
  p->launchGroup = profilerStartGroup(p);
  p->launchTaskEvents.clear();
  // Warps of the GPU's own width (64-lane wavefronts on CDNA).
  const int warp = comm->peers.empty() || comm->peers[comm->rank].warpSize == 0
                       ? 32 : comm->peers[comm->rank].warpSize;
  for (size_t i = 0; i < tasks.colls.size(); i++) {
    const Task& t = tasks.colls[i];
    ProfilerCollInfo c;
    c.seqNumber = t.seq;
    c.func = taskKindName(t.kind);
    c.sendBuff = t.sendbuff;
    c.recvBuff = t.recvbuff;
    c.count = t.count;
    c.root = t.root;
    c.dtype = t.dtype;
    c.nWarps = dev::kThreadsPerBlock / warp;
    const dev::Work* w = planned ? firstWorkOf(plan, i) : nullptr;
    if (w != nullptr && w->coll == dev::kCollP2p) {   // PAT rounds: p2p items, always Simple
      c.nChannels = w->channelHi - w->channelLo + 1;
      c.algo = "PAT";
      c.proto = protoName(dev::kProtoSimple);
    } else if (w != nullptr) {
      c.nChannels = w->channelHi - w->channelLo + 1;
      c.algo = w->c.algo == dev::kAlgoTree ? "Tree" : w->c.algo == dev::kAlgoSymmetric ? "Symmetric" : "Ring";
      c.proto = protoName(w->proto);
    } else {         // one-rank copies (no kernel), a collective the side plan moved off the kernels, or a group the planner refused
      c.nChannels = 0;
      c.nWarps = 0;
      c.algo = "None";
      c.proto = "None";
    }
    p->launchTaskEvents.push_back(profilerStartColl(p, collParents ? p->collApiParents[i] : nullptr, p->launchGroup, c));
  }
  for (size_t i = 0; i < tasks.p2p.size(); i++) {
    const Task& t = tasks.p2p[i];
    ProfilerP2pInfo c;
    c.func = taskKindName(t.kind);
    c.buff = t.kind == TaskKind::Send ? const_cast<void*>(t.sendbuff) : t.recvbuff;
    c.count = t.count;
    c.dtype = t.dtype;
    c.peer = t.peer();
    c.nChannels = planned ? comm->p2pChannels : 0;
    p->launchTaskEvents.push_back(profilerStartP2p(p, p2pParents ? p->p2pApiParents[i] : nullptr, p->launchGroup, c));
  }
  p->collApiParents.clear();
  p->p2pApiParents.clear();

  if (res == ncclSuccess) res = launchPlan(comm);
  endGroupTasks(comm);

  // Stopped in reverse so that the events of one launch nest in a timeline.
  for (size_t i = p->launchTaskEvents.size(); i-- > 0;) profilerStop(p, p->launchTaskEvents[i]);
  p->launchTaskEvents.clear();
  profilerStop(p, p->launchGroup);
  p->launchGroup = nullptr;
  return res;
}

}  // namespace uniccl
