#include "common/core/group.h"

#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common/api_export.h"
#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/cost_model.h"
#include "common/core/device_guard.h"
#include "common/core/gpu_sharing.h"
#include "common/core/inplace_stage.h"
#include "common/core/graph_buffers.h"
#include "common/core/launch.h"
#include "common/core/launch_helpers.h"
#include "common/core/planner.h"
#include "common/core/side_stream.h"
#include "common/profiler/comm_hooks.h"
#include "common/util/debug.h"
#include "common/util/guarded.h"

namespace uniccl {

namespace {

// A group's launches as one job per device (core/launch_helpers.h): the
// comms of one device launch in group order on one thread, different
// devices' jobs may run at the same time on launch helper threads.
struct DeviceLaunches {
  std::vector<ncclComm*> comms;   // the group's comms, grouped by device
  std::vector<int> begin;         // job j: comms[begin[j]] .. comms[begin[j + 1] - 1]
  DeviceGuard* callerDevice = nullptr;
  std::thread::id caller;
  int jobs() const { return (int)begin.size() - 1; }
};

struct GroupState {
  int depth = 0;
  ncclResult_t error = ncclSuccess;   // first failure of a call inside the open group
  std::vector<ncclComm*> comms;                          // with tasks, in first-use order
  std::vector<std::function<ncclResult_t()>> initJobs;
  std::vector<const void*> initJobKeys;   // [job]: its serialization key (nullptr: none)
  std::vector<int> peerScratch;
  DeviceLaunches launches;
};

thread_local GroupState tGroup;


// Splits the group's launches by device when helper threads may issue some
// of them: eager groups over two or more devices, without a profiler (its
// group events are the calling thread's). False: launch on this thread.
bool planDeviceLaunches(const std::vector<ncclComm*>& comms, DeviceLaunches* d) {
  d->comms.clear();
  d->begin.clear();
  if (comms.size() < 2) return false;
  for (const ncclComm* c : comms) {
    if (c->profiler != nullptr || c->kernelCh != nullptr) return false;
    if (!c->plan.captureKnown || c->plan.capture.status != gpu::CaptureStatus::None) return false;
  }
  for (ncclComm* c : comms) {
    bool seen = false;
    for (size_t j = 0; j < d->begin.size() && !seen; j++) seen = d->comms[(size_t)d->begin[j]]->gpuDev == c->gpuDev;
    if (seen) continue;
    d->begin.push_back((int)d->comms.size());
    for (ncclComm* o : comms)
      if (o->gpuDev == c->gpuDev) d->comms.push_back(o);
  }
  d->begin.push_back((int)d->comms.size());
  return d->jobs() >= 2;
}

ncclResult_t launchDeviceJob(void* ctx, int job) {
  DeviceLaunches& d = *static_cast<DeviceLaunches*>(ctx);
  const int dev = d.comms[(size_t)d.begin[(size_t)job]]->gpuDev;
  if (std::this_thread::get_id() == d.caller) {
    UCHECK(d.callerDevice->use(dev));
  } else {
    int current = -1;
    UCHECK(gpu::getDevice(&current));   // a helper thread keeps the device of its last job
    if (current != dev) UCHECK(gpu::setDevice(dev));
  }
  for (int k = d.begin[(size_t)job]; k < d.begin[(size_t)job + 1]; k++) UCHECK(launchTasks(d.comms[(size_t)k]));
  return ncclSuccess;
}

void dropTasks(std::vector<ncclComm*>& comms) {
  for (ncclComm* c : comms) {
    if (hasKernelTasks(c)) disableCopyEngine(c);  // its peers may have launched their ends
    c->tasks.clear();
    c->plan.endGroup();
    profilerDropTasks(c);  // [profiler]
    c->inGroupList = false;
  }
  comms.clear();
}

ncclResult_t runInitJobs(GroupState& g) {
  g.initJobKeys.clear();
  return runConcurrently(g.initJobs);
}

ncclResult_t launchGroup(GroupState& g) {
  ncclResult_t res = runInitJobs(g);
  if (res != ncclSuccess) {
    dropTasks(g.comms);
    return res;
  }
  if (g.comms.empty()) return ncclSuccess;
  DeviceGuard device;
  const UseDevice useDevice = [&device](int dev) { return device.use(dev); };
  SideStreamGroup& sides = sideStreamGroup();
  InPlaceStaging& staging = inPlaceStaging();
  for (ncclComm* c : g.comms) UCHECK_GOTO(checkTaskStreams(c), res, fail);
  UCHECK_GOTO(checkSharedGpuStreams(g.comms.data(), g.comms.size()), res, fail);
  // In-place AlltoAll sends read a copy taken before any transfer of the
  // group is queued (copy-engine copies included).
  UCHECK_GOTO(staging.start(g.comms, useDevice), res, fail);
  // Side streams: transfers with both ends in this group may go by copy
  // engine (and need no connection), messages to itself by a side kernel.
  UCHECK_GOTO(sides.start(g.comms, useDevice), res, fail);
  // Connections first, in phases across all communicators of the group
  // (one thread may drive both ends of a connection).
  for (ncclComm* c : g.comms) {
    peersToConnect(c, &g.peerScratch);
    if (g.peerScratch.empty()) continue;
    UCHECK_GOTO(device.use(c->gpuDev), res, fail);
    for (int p : g.peerScratch) UCHECK_GOTO(c->transports.offer(c, p), res, fail);
  }
  for (ncclComm* c : g.comms) {
    peersToConnect(c, &g.peerScratch);
    if (g.peerScratch.empty()) continue;
    UCHECK_GOTO(device.use(c->gpuDev), res, fail);
    for (int p : g.peerScratch) UCHECK_GOTO(c->transports.accept(c, p), res, fail);
  }
  {   // network links: every handshake of the group together (one thread may drive both ends)
    std::vector<NetLink*> net;
    for (ncclComm* c : g.comms) {
      peersToConnect(c, &g.peerScratch);
      c->transports.netLinksToConnect(g.peerScratch, &net);
    }
    UCHECK_GOTO(NetLink::connectAll(net), res, fail);
  }
  for (ncclComm* c : g.comms) {   // network links: start the proxy ops
    peersToConnect(c, &g.peerScratch);
    if (g.peerScratch.empty()) continue;
    UCHECK_GOTO(device.use(c->gpuDev), res, fail);
    for (int p : g.peerScratch) UCHECK_GOTO(c->transports.complete(c, p), res, fail);
  }
  if (planDeviceLaunches(g.comms, &g.launches)) {
    for (ncclComm* c : g.comms) c->inGroupList = false;
    g.launches.callerDevice = &device;
    g.launches.caller = std::this_thread::get_id();
    UCHECK_GOTO(runOnLaunchHelpers(g.launches.jobs(), launchDeviceJob, &g.launches), res, fail);
  } else {
    for (ncclComm* c : g.comms) {
      UCHECK_GOTO(device.use(c->gpuDev), res, fail);
      c->inGroupList = false;
      UCHECK_GOTO(launchTasksProfiled(c), res, fail);  // [profiler] Group + Coll/P2p events around launchTasks
    }
  }
  g.comms.clear();
  res = sides.join(useDevice, /*launched=*/true);
  {
    ncclResult_t r2 = staging.finish(useDevice);   // after the copies' joins: they read the scratch too
    return res != ncclSuccess ? res : r2;
  }
fail:
  // First: which tasks stayed with the kernels is in the side plans, which
  // the join clears.
  dropTasks(g.comms);
  (void)sides.join(useDevice, /*launched=*/false);   // queued copies still order the streams
  (void)staging.finish(useDevice);
  return res;
}

}  // namespace

bool inGroup() { return tGroup.depth > 0; }

void leaveGroup(ncclComm* comm) {
  if (!comm->inGroupList) return;
  GroupState& g = tGroup;
  for (size_t i = 0; i < g.comms.size(); i++) {
    if (g.comms[i] != comm) continue;
    g.comms.erase(g.comms.begin() + (long)i);
    std::vector<ncclComm*> one{comm};
    dropTasks(one);
    WARN("Rank %d: communicator %p destroyed inside an open group: its operations of the group are dropped",
         comm->rank, (void*)comm);
    return;
  }
}

ncclResult_t groupErrCheck(ncclResult_t result) {
  GroupState& g = tGroup;
  if (result != ncclSuccess && result != ncclInProgress && g.depth > 0 && g.error == ncclSuccess) g.error = result;
  return result;
}

void deferToGroupEnd(std::function<ncclResult_t()> job, const void* serialKey) {
  GroupState& g = tGroup;
  if (serialKey != nullptr) {
    for (size_t i = 0; i < g.initJobs.size(); i++) {
      if (g.initJobKeys[i] != serialKey) continue;
      // Runs after the earlier job of the same key, on its thread; every job
      // runs (collective steps stay in step across ranks), the first error wins.
      g.initJobs[i] = [first = std::move(g.initJobs[i]), next = std::move(job)]() {
        ncclResult_t a = first();
        ncclResult_t b = next();
        return a != ncclSuccess ? a : b;
      };
      return;
    }
  }
  g.initJobs.push_back(std::move(job));
  g.initJobKeys.push_back(serialKey);
}

ncclResult_t runConcurrently(std::vector<std::function<ncclResult_t()>>& jobs) {
  if (jobs.empty()) return ncclSuccess;
  std::vector<ncclResult_t> results(jobs.size(), ncclSuccess);
  std::vector<std::string> messages(jobs.size());
  // What a job throws is its failure (and never leaves a thread or the API).
  auto run = [&](size_t i) { return runGuarded("communicator setup thread", [&] { return jobs[i](); }); };
  if (jobs.size() == 1) {
    results[0] = run(0);
  } else {
    std::vector<std::thread> threads;
    threads.reserve(jobs.size());
    for (size_t i = 0; i < jobs.size(); i++) {
      try {
        threads.emplace_back([&, i] {
          results[i] = run(i);
          if (results[i] != ncclSuccess) {
            // Thread-local: hand it over (a string that cannot be built is left out).
            runGuarded("communicator setup thread", [&] { messages[i] = lastErrorMessage(); });
          }
        });
      } catch (const std::system_error& e) {
        // The jobs started wait for this one's peers: they fail by their own timeouts.
        WARN("Cannot start a thread for a communicator setup job (%s)", e.what());
        results[i] = ncclSystemError;
        messages[i] = lastErrorMessage();
      }
    }
    for (std::thread& t : threads) t.join();
  }
  jobs.clear();
  for (size_t i = 0; i < results.size(); i++) {
    if (results[i] == ncclSuccess) continue;
    if (!messages[i].empty()) setLastErrorMessage(messages[i].c_str());
    return results[i];
  }
  return ncclSuccess;
}

ncclResult_t enqueueTask(ncclComm* comm, const Task& task) {
  TaskList& list = comm->tasks;
  GroupState& g = tGroup;
  void* apiEvent = profilerTaskApiBegin(comm, task, g.depth);  // [profiler] GroupApi + CollApi/P2pApi
  if (task.kind == TaskKind::Send || task.kind == TaskKind::Recv) {
    list.p2p.push_back(task);
  } else {
    list.colls.push_back(task);
  }
  profilerTaskApiEnd(comm, apiEvent);  // [profiler]
  if (g.depth > 0) {
    if (!comm->inGroupList) {
      comm->inGroupList = true;
      g.comms.push_back(comm);
    }
    return ncclSuccess;
  }
  // A group of one: the common case, kept free of allocation.
  ProfilerGroupApiScope profilerGroupApi;  // [profiler] ends the implicit group's GroupApi event
  ncclResult_t res = ncclSuccess;
  DeviceGuard device;
  countPostedTasks(comm);
  if (comm->gpuShared) UCHECK_GOTO(checkSharedGpuStreams(&comm, 1), res, fail);
  UCHECK_GOTO(device.use(comm->gpuDev), res, fail);
  // Messages, and PAT AllGathers (core/allgather_pat.h), may need new connections.
  peersToConnect(comm, &g.peerScratch);
  if (!g.peerScratch.empty()) UCHECK_GOTO(comm->transports.connect(comm, g.peerScratch), res, fail);
  return launchTasksProfiled(comm);  // [profiler] Group + Coll/P2p events around launchTasks
fail:
  disableCopyEngine(comm);  // counted, never launched
  list.clear();
  comm->plan.endGroup();
  profilerDropTasks(comm);  // [profiler]
  return res;
}

}  // namespace uniccl

using namespace uniccl;

NCCL_API(ncclResult_t, ncclGroupStart);
ncclResult_t ncclGroupStart() {
  tGroup.depth++;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGroupEnd);
ncclResult_t ncclGroupEnd() {
  GroupState& g = tGroup;
  if (g.depth == 0) {
    WARN("ncclGroupEnd called without a matching ncclGroupStart");
    return ncclInvalidUsage;
  }
  if (--g.depth > 0) return ncclSuccess;
  ProfilerGroupApiScope profilerGroupApi;  // [profiler] GroupEndApiStart now, GroupApi stop after the launch
  reclaimGraphBuffers();
  if (g.error != ncclSuccess) {
    // As NCCL: a group with a failed call launches nothing. Deferred
    // communicator inits still run (they were valid calls).
    ncclResult_t err = g.error;
    g.error = ncclSuccess;
    WARN("ncclGroupEnd: a call inside the group failed (%s); none of the group's operations were launched",
         ncclGetErrorString(err));
    dropTasks(g.comms);
    ncclResult_t initRes = runInitJobs(g);
    (void)initRes;   // their outcome is each communicator's async error
    return err;
  }
  return launchGroup(g);
}

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo);
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  GroupState& g = tGroup;
  if (g.depth == 0) {
    WARN("ncclGroupSimulateEnd called without a matching ncclGroupStart");
    return ncclInvalidUsage;
  }
  if (simInfo == nullptr || simInfo->magic != 0x74685283u || simInfo->size < sizeof(size_t) + 2 * sizeof(unsigned) + sizeof(float)) {
    WARN("ncclGroupSimulateEnd: simInfo must be initialized with NCCL_SIM_INFO_INITIALIZER");
    return ncclInvalidArgument;
  }
  // As NCCL: the estimate of the operations recorded so far (core/cost_model.h),
  // and the group is discarded without launching anything.
  simInfo->estimatedTime = (float)estimateGroupUs(g.comms);
  if (--g.depth > 0) return ncclSuccess;
  ProfilerGroupApiScope profilerGroupApi;  // [profiler] the simulated group ends its GroupApi event too
  g.error = ncclSuccess;
  dropTasks(g.comms);
  g.initJobs.clear();
  g.initJobKeys.clear();
  return ncclSuccess;
}
