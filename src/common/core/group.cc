#include "common/core/group.h"

#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common/api_export.h"
#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/comm_plan.h"
#include "common/core/comm_transport.h"
#include "common/core/cost_model.h"
#include "common/core/gpu_sharing.h"
#include "common/core/inplace_stage.h"
#include "common/core/graph_buffers.h"
#include "common/core/launch.h"
#include "common/core/launch_helpers.h"
#include "common/core/launch_profiling.h"
#include "common/core/planner.h"
#include "common/core/side_state.h"
#include "common/core/side_stream.h"
#include "common/device_guard.h"
#include "common/util/debug.h"
#include "common/util/guarded.h"

namespace uniccl {

namespace {

// The calling thread's open group. NCCL's group API is per thread: calls
// between a thread's ncclGroupStart and ncclGroupEnd nest on that thread
// and join that thread's group, whichever communicators they name, while
// other threads run groups of their own; so what the group end consumes
// (the nesting depth, the first error of a call inside the group, the
// communicators that recorded tasks, the deferred communicator setups and
// the profiler's GroupApi events) belongs to the thread until its
// outermost ncclGroupEnd moves it into the group's plan (core/comm_plan.h).
struct OpenGroup {
  int depth = 0;
  ncclResult_t error = ncclSuccess;   // first failure of a call inside the open group
  std::vector<ncclComm*> comms;       // with tasks, in first-use order
  std::vector<std::function<ncclResult_t()>> initJobs;
  std::vector<const void*> initJobKeys;   // [job]: its serialization key (nullptr: none)
  GroupApiEvents apiEvents;               // the profiler's GroupApi event per communicator
};

thread_local OpenGroup tGroup;

// Moves the communicators of the thread's open group, with their tasks,
// into `plan` (the list keeps its capacity for the next group).
void takeOpenGroup(OpenGroup& g, GroupPlan* plan) {
  for (ncclComm* c : g.comms) {
    c->inGroupList = false;
    CommPlan& p = plan->add(c);
    p.events.groupApi = profilerCurrentGroupApi(&g.apiEvents, c->profiler.get());
  }
  g.comms.clear();
}

// A group that does not launch (a failed call in it, a failed step): its
// plans go without their kernels. Communicators whose tasks were counted as
// posted and not launched leave the copy-engine path (their peers' counts
// may disagree from here on).
void dropGroup(GroupPlan& plan) {
  for (CommPlan& p : plan) {
    if (!p.launched && hasKernelTasks(p)) disableCopyEngine(p.sides);
    profilerDropTasks(p.comm);  // [profiler]
  }
}

// Splits the group's launches by GPU when helper threads may issue some of
// them (core/launch_helpers.h): eager groups over two or more GPUs. The
// plans of one GPU form one job (CommPlan::launchJob), launched in group
// order on one thread; different GPUs' jobs may run at once. Returns the
// number of jobs; below 2: launch on this thread.
int planDeviceLaunches(GroupPlan& plan) {
  if (plan.size() < 2) return 0;
  for (const CommPlan& p : plan)
    if (!p.launch.captureKnown || p.launch.capture.status != gpu::CaptureStatus::None) return 0;
  int jobs = 0;
  for (CommPlan& p : plan) {
    p.launchJob = -1;
    for (const CommPlan& q : plan) {
      if (&q == &p) break;
      if (q.gpuDev == p.gpuDev) {
        p.launchJob = q.launchJob;
        break;
      }
    }
    if (p.launchJob < 0) p.launchJob = jobs++;
  }
  return jobs;
}

struct DeviceLaunches {
  GroupPlan* plan;
  DeviceGuard* callerDevice;
  std::thread::id caller;
};

[[nodiscard]] ncclResult_t launchDeviceJob(void* ctx, int job) {
  const DeviceLaunches& d = *static_cast<const DeviceLaunches*>(ctx);
  bool deviceSet = false;
  for (CommPlan& p : *d.plan) {
    if (p.launchJob != job) continue;
    if (!deviceSet) {
      if (std::this_thread::get_id() == d.caller) {
        UCHECK(d.callerDevice->use(p.gpuDev));
      } else {
        int current = -1;
        UCHECK(gpu::getDevice(&current));   // a helper thread keeps the device of its last job
        if (current != p.gpuDev) UCHECK(gpu::setDevice(p.gpuDev));
      }
      deviceSet = true;
    }
    UCHECK(launchTasks(p));
    p.launched = true;
  }
  return ncclSuccess;
}

[[nodiscard]] ncclResult_t runInitJobs(OpenGroup& g) {
  g.initJobKeys.clear();
  return runConcurrently(g.initJobs);
}

// Connections first, in phases across all communicators of the group (one
// thread may drive both ends of a connection): offers, accepts, the
// network handshakes all together, then the network links' proxy ops.
[[nodiscard]] ncclResult_t connectGroup(GroupPlan& plan, DeviceGuard& device) {
  bool any = false;
  for (CommPlan& p : plan) {
    peersToConnect(p, &p.newPeers);
    any = any || !p.newPeers.empty();
  }
  if (!any) return ncclSuccess;
  for (CommPlan& p : plan) {
    if (p.newPeers.empty()) continue;
    UCHECK(device.use(p.gpuDev));
    const TransportComm tc = transportComm(p.comm);
    for (const PeerNeed& need : p.newPeers) UCHECK(p.comm->transports.offer(tc, need));
  }
  for (CommPlan& p : plan) {
    if (p.newPeers.empty()) continue;
    UCHECK(device.use(p.gpuDev));
    const TransportComm tc = transportComm(p.comm);
    for (const PeerNeed& need : p.newPeers) UCHECK(p.comm->transports.accept(tc, need));
  }
  {
    std::vector<NetLink*> net;
    for (CommPlan& p : plan) p.comm->transports.netLinksToConnect(p.newPeers, &net);
    UCHECK(NetLink::connectAll(net));
  }
  for (CommPlan& p : plan) {
    if (p.newPeers.empty()) continue;
    UCHECK(device.use(p.gpuDev));
    const TransportComm tc = transportComm(p.comm);
    for (const PeerNeed& need : p.newPeers) UCHECK(p.comm->transports.complete(tc, need.peer));
  }
  return ncclSuccess;
}

// The group end's steps, each over the whole plan: plan (streams, staging,
// side streams) -> connect -> launch -> join.
[[nodiscard]] ncclResult_t launchGroup(GroupPlan& plan) {
  if (plan.empty()) return ncclSuccess;
  ncclResult_t res = ncclSuccess;
  DeviceGuard device;
  const UseDevice useDevice = [&device](int dev) { return device.use(dev); };
  for (CommPlan& p : plan) UCHECK_GOTO(checkTaskStreams(p), res, fail);
  UCHECK_GOTO(checkSharedGpuStreams(plan), res, fail);
  // In-place AlltoAll sends read a copy taken before any transfer of the
  // group is queued (copy-engine copies included).
  UCHECK_GOTO(stageInPlaceSends(plan, useDevice), res, fail);
  // Side streams: transfers with both ends in this group may go by copy
  // engine (and need no connection), messages to itself by a side kernel.
  UCHECK_GOTO(startSideStreams(plan, useDevice), res, fail);
  UCHECK_GOTO(connectGroup(plan, device), res, fail);
  if (const int jobs = planDeviceLaunches(plan); jobs >= 2) {
    DeviceLaunches d{&plan, &device, std::this_thread::get_id()};
    UCHECK_GOTO(runOnLaunchHelpers(jobs, launchDeviceJob, &d), res, fail);
  } else {
    for (CommPlan& p : plan) {
      UCHECK_GOTO(device.use(p.gpuDev), res, fail);
      UCHECK_GOTO(launchTasks(p), res, fail);
      p.launched = true;
    }
  }
  res = joinSideStreams(plan, useDevice, /*launched=*/true);
  {
    ncclResult_t r2 = finishInPlaceStaging(plan, useDevice);   // after the copies' joins: they read the scratch too
    return res != ncclSuccess ? res : r2;
  }
fail:
  dropGroup(plan);
  (void)joinSideStreams(plan, useDevice, /*launched=*/false);   // queued copies still order the streams
  (void)finishInPlaceStaging(plan, useDevice);
  return res;
}

}  // namespace

bool inGroup() { return tGroup.depth > 0; }

void leaveGroup(ncclComm* comm) {
  OpenGroup& g = tGroup;
  g.apiEvents.forget(comm->profiler.get());   // its profiler context goes with it
  if (!comm->inGroupList) return;
  for (size_t i = 0; i < g.comms.size(); i++) {
    if (g.comms[i] != comm) continue;
    g.comms.erase(g.comms.begin() + (long)i);
    comm->inGroupList = false;
    if (!comm->tasks.empty()) disableCopyEngine(&comm->sideState->streams);   // counted by no one, but its peers may launch theirs
    comm->tasks.clear();
    profilerDropTasks(comm);  // [profiler]
    WARN("Rank %d: communicator %p destroyed inside an open group: its operations of the group are dropped",
         comm->rank, (void*)comm);
    return;
  }
}

ncclResult_t groupErrCheck(ncclResult_t result) {
  OpenGroup& g = tGroup;
  if (result != ncclSuccess && result != ncclInProgress && g.depth > 0 && g.error == ncclSuccess) g.error = result;
  return result;
}

void deferToGroupEnd(std::function<ncclResult_t()> job, const void* serialKey) {
  OpenGroup& g = tGroup;
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
            (void)runGuarded("communicator setup thread", [&] { messages[i] = lastErrorMessage(); });
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
  OpenGroup& g = tGroup;
  void* apiEvent = profilerTaskApiBegin(comm, task, &g.apiEvents, g.depth);  // [profiler] GroupApi + CollApi/P2pApi
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
  // A group of one: the common case, kept free of allocation (the plan
  // takes the storage of the communicator's last one).
  ProfilerGroupApiScope profilerGroupApi(&g.apiEvents);  // [profiler] ends the implicit group's GroupApi event
  GroupPlan plan(comm);
  CommPlan& p = plan.front();
  p.events.groupApi = profilerCurrentGroupApi(&g.apiEvents, comm->profiler.get());
  ncclResult_t res = ncclSuccess;
  DeviceGuard device;
  countPostedTasks(p.sides, p.nRanks, p.tasks);
  if (comm->gpuShared) UCHECK_GOTO(checkSharedGpuStreams(plan), res, fail);
  UCHECK_GOTO(device.use(comm->gpuDev), res, fail);
  // Messages, and PAT AllGathers (core/allgather_pat.h), may need new connections.
  peersToConnect(p, &p.newPeers);
  if (!p.newPeers.empty()) UCHECK_GOTO(comm->transports.connect(transportComm(comm), p.newPeers), res, fail);
  UCHECK_GOTO(launchTasks(p), res, fail);
  return ncclSuccess;
fail:
  dropGroup(plan);
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
  OpenGroup& g = tGroup;
  if (g.depth == 0) {
    WARN("ncclGroupEnd called without a matching ncclGroupStart");
    return ncclInvalidUsage;
  }
  if (--g.depth > 0) return ncclSuccess;
  ProfilerGroupApiScope profilerGroupApi(&g.apiEvents);  // [profiler] GroupEndApiStart now, GroupApi stop after the launch
  reclaimGraphBuffers();
  if (g.error != ncclSuccess) {
    // As NCCL: a group with a failed call launches nothing. Deferred
    // communicator inits still run (they were valid calls).
    ncclResult_t err = g.error;
    g.error = ncclSuccess;
    WARN("ncclGroupEnd: a call inside the group failed (%s); none of the group's operations were launched",
         ncclGetErrorString(err));
    {
      GroupPlan dropped;
      takeOpenGroup(g, &dropped);
      dropGroup(dropped);
    }
    ncclResult_t initRes = runInitJobs(g);
    (void)initRes;   // their outcome is each communicator's async error
    return err;
  }
  // Deferred inits first: the plans read what they set up (rank, GPU).
  const ncclResult_t initRes = runInitJobs(g);
  GroupPlan plan;
  takeOpenGroup(g, &plan);
  if (initRes != ncclSuccess) {
    dropGroup(plan);
    return initRes;
  }
  return launchGroup(plan);
}

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo);
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  OpenGroup& g = tGroup;
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
  ProfilerGroupApiScope profilerGroupApi(&g.apiEvents);  // [profiler] the simulated group ends its GroupApi event too
  g.error = ncclSuccess;
  {
    GroupPlan dropped;
    takeOpenGroup(g, &dropped);
    dropGroup(dropped);
  }
  g.initJobs.clear();
  g.initJobKeys.clear();
  return ncclSuccess;
}
