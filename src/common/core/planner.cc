#include "common/core/planner.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "common/core/allgather_pat.h"
#include "common/core/allreduce_ce_split.h"
#include "common/core/comm.h"
#include "common/core/comm_plan.h"
#include "common/core/direct_recv.h"
#include "common/core/launch.h"
#include "common/core/launch_observer.h"
#include "common/core/one_rank.h"
#include "common/core/pat_scratch.h"
#include "common/core/reducescatter_pat.h"
#include "common/core/tuning.h"
#include "common/util/debug.h"
#include "device/kernel_choices.h"
#include "device/kernels.h"

namespace uniccl {

namespace {

dev::Coll collOf(TaskKind kind) {
  switch (kind) {
    case TaskKind::AllReduce: return dev::kCollAllReduce;
    case TaskKind::Broadcast: return dev::kCollBroadcast;
    case TaskKind::Reduce: return dev::kCollReduce;
    case TaskKind::AllGather: return dev::kCollAllGather;
    case TaskKind::ReduceScatter: return dev::kCollReduceScatter;
    default: return dev::kCollP2p;
  }
}

// Puts a direct view (core/direct_recv.h) into a work item: false when
// there is none or it does not fit the item's 48 bits.
bool setRecvView(uintptr_t to, dev::Work* w, uint16_t* hi) {
  if (to == 0 || to >= dev::kP2pViewLimit) return false;
  w->recvViewLo = (uint32_t)to;
  *hi = (uint16_t)(to >> 32);
  return true;
}

// AllGather, Broadcast and the all-gather half of the ring AllReduce store
// steps verbatim in the receiver's output: a registered output the ring
// predecessor can store into is offered to it (device/coll_ring.h,
// startDirect; core/direct_recv.h).
void offerCollectiveOutput(ncclComm* comm, const Task& t, dev::Work* w) {
  const bool copyColl = t.kind == TaskKind::AllGather || t.kind == TaskKind::Broadcast ||
                        (t.kind == TaskKind::AllReduce && !w->c.exchange);
  if (!copyColl || comm->nRanks < 2 || w->proto != dev::kProtoSimple || w->c.algo != dev::kAlgoRing) return;
  if (t.kind == TaskKind::Broadcast && t.root == comm->rank) return;   // the root receives nothing
  const size_t out = t.count * dataTypeSize(t.dtype) * (t.kind == TaskKind::AllGather ? (size_t)comm->nRanks : 1);
  if (!dev::p2pExchanges(w->proto, out, comm->devCommHost.p2pDirectMinBytes)) return;
  // One view per item: it is for the ring predecessor, which must then be
  // the same on every channel of the item (rings differ per channel across
  // hosts and on GPU meshes: common/topo/rings.h).
  const int prev = comm->channelsHost[w->channelLo].ringPrev;
  for (int c = w->channelLo + 1; c <= w->channelHi; c++)
    if (comm->channelsHost[c].ringPrev != prev) return;
  const uintptr_t to = directRecvTarget(comm, prev, t.recvbuff, out);
  if (setRecvView(to, w, &w->c.recvViewHi)) comm->direct.collPlanned++;
}

dev::Work collWork(ncclComm* comm, const Task& t) {
  dev::Work w;
  // Through symmetric windows when tuning says so (its own item layout, Work::s).
  if (tuneSymmetric(comm, t, &w)) return w;
  memset(&w, 0, sizeof(w));
  CollTuning tune = tuneCollective(comm, t.kind, tuningBytes(comm, t));
  w.coll = collOf(t.kind);
  w.proto = tune.proto;
  w.c.algo = tune.algo;
  w.c.exchange = tune.exchange ? 1 : 0;
  w.channelLo = 0;
  w.channelHi = (uint8_t)(tune.nChannels - 1);
  w.c.redOp = t.redOp;
  w.c.dtype = (uint8_t)t.dtype;
  w.c.scalarKind = t.scalarKind;
  w.c.root = t.root;
  w.c.sliceBytes = tune.sliceBytes;
  w.c.sendbuff = t.sendbuff;
  w.c.recvbuff = t.recvbuff;
  w.c.count = t.count;
  w.c.scalar = t.scalar;
  offerCollectiveOutput(comm, t, &w);
  return w;
}

// P2p tasks become rounds: in round r every rank sends to rank+r and
// receives from rank-r, so the two halves of one work item always face
// matching halves on the peers, in the same order on every channel.
// taskOfWork: for every work appended, the index in tasks.p2p of its send
// task (or of its recv task when it has no send).
// Only the tasks the plan leaves to the kernels (SidePlan::p2pPath: the
// others go by copy engine or a side kernel).
[[nodiscard]] ncclResult_t p2pWorks(CommPlan& p, std::vector<dev::Work>* out, std::vector<int>* taskOfWork) {
  ncclComm* comm = p.comm;
  const int n = comm->nRanks, me = comm->rank;
  const std::vector<Task>& tasks = p.tasks.p2p;
  const SidePlan& side = p.side;
  auto onKernels = [&](size_t i) { return side.p2pPathOf(i) == TaskPath::Kernels; };
  uint32_t slice = p2pSliceBytes(comm);
  // Only the rounds that carry a message, in increasing order (the order
  // every rank uses): a group's cost follows its tasks, not the rank count.
  std::vector<int>& rounds = p.launch.p2pRounds;
  rounds.clear();
  for (size_t i = 0; i < tasks.size(); i++) {
    if (!onKernels(i)) continue;
    const Task& t = tasks[i];
    const int peer = t.peer();
    rounds.push_back(t.kind == TaskKind::Send ? (peer - me + n) % n : (me - peer + n) % n);
  }
  std::sort(rounds.begin(), rounds.end());
  rounds.erase(std::unique(rounds.begin(), rounds.end()), rounds.end());
  for (int r : rounds) {
    int sendPeer = (me + r) % n, recvPeer = (me - r + n) % n;
    size_t si = 0, ri = 0;
    for (;;) {
      while (si < tasks.size() && !(tasks[si].kind == TaskKind::Send && tasks[si].peer() == sendPeer && onKernels(si)))
        si++;
      while (ri < tasks.size() && !(tasks[ri].kind == TaskKind::Recv && tasks[ri].peer() == recvPeer && onKernels(ri)))
        ri++;
      bool haveSend = si < tasks.size(), haveRecv = ri < tasks.size();
      if (!haveSend && !haveRecv) break;
      dev::Work w = emptyP2pWork(comm, slice);
      if (r == 0) {
        // Self: a local copy needs both halves, of the same size.
        if (haveSend != haveRecv ||
            tasks[si].count * dataTypeSize(tasks[si].dtype) != tasks[ri].count * dataTypeSize(tasks[ri].dtype)) {
          WARN("Send to self and recv from self must come in pairs of equal size in one group (rank %d)", me);
          return ncclInvalidUsage;
        }
      }
      taskOfWork->push_back((int)(haveSend ? si : ri));
      if (haveSend) {
        const Task& t = tasks[si++];
        w.p.sendPeer = sendPeer;
        w.p.sendBuff = t.sendbuff;
        w.p.sendBytes = t.count * dataTypeSize(t.dtype);
        w.p.sendProto = r == 0 ? (uint8_t)dev::kProtoSimple : p2pProto(comm, sendPeer, w.p.sendBytes);
      }
      if (haveRecv) {
        const Task& t = tasks[ri++];
        w.p.recvPeer = recvPeer;
        w.p.recvBuff = t.recvbuff;
        w.p.recvBytes = t.count * dataTypeSize(t.dtype);
        w.p.recvProto = r == 0 ? (uint8_t)dev::kProtoSimple : p2pProto(comm, recvPeer, w.p.recvBytes);
        // A registered buffer the sender can store into is offered to it
        // (core/direct_recv.h); the item carries the sender's view of it.
        if (r != 0 && dev::p2pExchanges(w.p.recvProto, w.p.recvBytes, comm->devCommHost.p2pDirectMinBytes)) {
          const uintptr_t to = directRecvTarget(comm, recvPeer, t.recvbuff, w.p.recvBytes);
          if (setRecvView(to, &w, &w.p.recvViewHi)) comm->direct.p2pPlanned++;
        }
      }
      out->push_back(w);
    }
  }
  return ncclSuccess;
}

// The capture state of the stream the group's kernels will launch on (the
// first task's, as collectStreams takes it), asked once per group.
[[nodiscard]] ncclResult_t planCapture(CommPlan& p, gpu::CaptureInfo* cap) {
  LaunchPlan& plan = p.launch;
  if (!plan.captureKnown) {
    const TaskList& tasks = p.tasks;
    const gpu::Stream s = !tasks.colls.empty() ? tasks.colls[0].stream : tasks.p2p[0].stream;
    UCHECK(gpu::streamGetCaptureInfo(s, &plan.capture));
    plan.captureKnown = true;
  }
  *cap = plan.capture;
  return ncclSuccess;
}

}  // namespace

// Splits the plan's works into kernel launches: consecutive collectives of
// one datatype, kind (ring/tree or symmetric: separate kernels,
// device/kernel.h) and, for ring/tree, protocol (a collective kernel per
// protocol) share a kernel; p2p items ride along with whatever collective
// kernel comes last (every one but the symmetric runs them), or go to the
// p2p kernel; a launch start that names a datatype (PAT ReduceScatter
// rounds) takes that datatype's Simple collective kernel, the only one
// that runs p2p items whose receive reduces.
ncclResult_t planLaunches(LaunchPlan* plan) {
  const std::vector<dev::Work>& works = plan->works;
  const size_t nColl = plan->nColl;
  auto symmetric = [&](size_t i) { return works[i].c.algo == dev::kAlgoSymmetric; };
  const std::vector<LaunchStart>& starts = plan->launchStarts;
  auto startAt = [&](size_t i) {
    return std::lower_bound(starts.begin(), starts.end(), (uint32_t)i,
                            [](const LaunchStart& s, uint32_t w) { return s.work < w; });
  };
  auto startsLaunch = [&](size_t i) {
    auto it = startAt(i);
    return it != starts.end() && it->work == i;
  };
  // The datatype whose kernel the launch starting at work i needs (the
  // last launch start at or before it), or -1.
  auto reduceTypeAt = [&](size_t i) {
    auto it = startAt(i + 1);
    return it == starts.begin() ? -1 : std::prev(it)->reduceType;
  };
  auto reduces = [&](size_t i) { return works[i].coll == dev::kCollP2p && dev::p2pRecvReduces(works[i].p.recvProto); };
  auto noKernelsFor = [](ncclDataType_t dt) {
    WARN("This uniccl build has no kernels for datatype %s (built with -Dkernel_filter=%s); "
         "rebuild with -Dkernel_filter=all", dataTypeName(dt), UNICCL_KERNEL_FILTER);
    return ncclInvalidUsage;
  };
  // A build may leave reduction ops out of its kernels (-Dkernel_ops).
  const unsigned kernelOps = dev::collectiveKernelOps();
  auto noKernelsForOp = [](int op) {
    // The kernel ops by their -Dkernel_ops names (dev::RedOp order).
    static const char* const kNames[] = {"sum", "prod", "max", "min", "premulsum (ncclAvg over floats)",
                                         "sumpostdiv (ncclAvg over integers)"};
    static_assert(sizeof(kNames) / sizeof(kNames[0]) == dev::kNumRedOps, "a name per op");
    WARN("This uniccl build has no kernels for reduction op %s (built with -Dkernel_ops=%s); "
         "rebuild with -Dkernel_ops=all", op >= 0 && op < dev::kNumRedOps ? kNames[op] : "?",
         UNICCL_KERNEL_OPS_OPTION);
    return ncclInvalidUsage;
  };
  auto opBuilt = [&](int op) { return op >= 0 && op < dev::kNumRedOps && ((kernelOps >> op) & 1u) != 0; };
  // One walk over the items: an op this build's kernels left out is the
  // user's to fix; and the kernels have code only for what the tuner chooses
  // (device/kernel_choices.h, collKernelRuns): an item outside it is a
  // planner bug, never launched.
  for (size_t i = 0; i < works.size(); i++) {
    const dev::Work& w = works[i];
    if (reduces(i) && !opBuilt(dev::p2pRecvRedOp(w.p.recvProto))) return noKernelsForOp(dev::p2pRecvRedOp(w.p.recvProto));
    if (i >= nColl) continue;
    if (dev::collReduces(w.coll) && !opBuilt(w.c.redOp)) return noKernelsForOp(w.c.redOp);
    if (!symmetric(i) && !dev::collKernelRuns(w.coll, w.c.algo, w.proto, w.c.redOp, w.c.dtype, w.c.exchange != 0)) {
      WARN("Internal error: the kernels have no code for collective %d, algorithm %d, protocol %s, op %d, "
           "datatype %s%s", (int)w.coll, (int)w.c.algo, protoName(w.proto), (int)w.c.redOp,
           dataTypeName((ncclDataType_t)w.c.dtype), w.c.exchange ? " (exchange)" : "");
      return ncclInternalError;
    }
  }
  size_t first = 0;
  while (first < works.size()) {
    size_t last = first + 1;
    const void* kernel;
    if (first < nColl) {
      ncclDataType_t dt = (ncclDataType_t)works[first].c.dtype;
      const bool sym = symmetric(first);
      const uint8_t proto = works[first].proto;
      kernel = sym ? dev::symmetricKernel(dt) : dev::collectiveKernel(dt, proto);
      if (kernel == nullptr) {
        if (sym || dev::collectiveKernel(dt, dev::kProtoSimple) == nullptr) return noKernelsFor(dt);
        WARN("Internal error: this uniccl build has no %s kernel for datatype %s", protoName(proto), dataTypeName(dt));
        return ncclInternalError;
      }
      auto joins = [&](size_t i) {
        if (i >= nColl) return !sym && !reduces(i);
        return works[i].c.dtype == works[first].c.dtype && symmetric(i) == sym && (sym || works[i].proto == proto);
      };
      while (last < works.size() && last - first < kMaxWorksPerLaunch && joins(last) && !startsLaunch(last)) last++;
    } else {
      const int reduceType = reduceTypeAt(first);
      if (reduceType >= 0) {
        kernel = dev::collectiveKernel((ncclDataType_t)reduceType, dev::kProtoSimple);
        if (kernel == nullptr) return noKernelsFor((ncclDataType_t)reduceType);
      } else {
        kernel = dev::p2pKernel();
      }
      while (last < works.size() && last - first < kMaxWorksPerLaunch && !startsLaunch(last)) last++;
      for (size_t i = first; i < last && reduceType < 0; i++) {
        if (!reduces(i)) continue;
        WARN("Internal error: a p2p item that reduces what it receives, planned on the p2p kernel");
        return ncclInternalError;
      }
    }
    KernelLaunch L;
    L.firstWork = (uint32_t)first;
    L.nWorks = (uint32_t)(last - first);
    L.kernel = kernel;
    for (size_t i = first; i < last; i++) L.grid = std::max(L.grid, (unsigned)works[i].channelHi + 1);
    plan->launches.push_back(L);
    first = last;
  }
  return ncclSuccess;
}

ncclResult_t planWorks(CommPlan& p) {
  ncclComm* comm = p.comm;
  LaunchPlan& plan = p.launch;
  plan.works.clear();
  plan.workSeq.clear();
  plan.workTask.clear();
  plan.launches.clear();
  plan.launchStarts.clear();
  plan.usesPatScratch = false;
  const std::vector<Task>& colls = p.tasks.colls;
  bool anyPat = false;
  size_t patScratchBytes = 0;   // the most any PAT ReduceScatter of the group needs (they run one after another)
  for (size_t i = 0; i < colls.size(); i++) {
    // The side plan (tuning's planSideStreams) may take a collective off
    // the kernels, or leave them the ReduceScatter of a split AllReduce.
    const TaskPath path = p.side.collPathOf(i);
    if (path == TaskPath::Kernels && collUsesPat(comm, colls[i])) {
      anyPat = true;   // p2p rounds after every other item (below)
      if (colls[i].kind == TaskKind::ReduceScatter)
        patScratchBytes = std::max(patScratchBytes, patReduceScatterScratchBytes(
                                                        comm->nRanks, colls[i].count * dataTypeSize(colls[i].dtype)));
      continue;
    }
    if (path == TaskPath::Kernels) plan.works.push_back(collWork(comm, colls[i]));
    else if (path == TaskPath::ReduceScatterThenCopy)
      plan.works.push_back(collWork(comm, reduceScatterHalf(comm->rank, colls[i])));
    else continue;
    plan.workSeq.push_back(colls[i].seq);
    plan.workTask.push_back((int)i);
  }
  plan.nColl = plan.works.size();
  if (!p.tasks.p2p.empty()) {
    UCHECK(p2pWorks(p, &plan.works, &plan.workTask));
    for (size_t i = plan.nColl; i < plan.works.size(); i++) {
      const int t = plan.workTask[i];
      plan.workSeq.push_back(p.tasks.p2p[(size_t)t].seq);
      plan.workTask[i] = (int)colls.size() + t;
    }
  }
  // PAT ReduceScatters keep their partial sums in scratch (core/pat_scratch.h).
  void* scratch = nullptr;
  if (patScratchBytes > 0) {
    gpu::CaptureInfo cap;
    UCHECK(planCapture(p, &cap));
    UCHECK(patScratch(p.patScratch, comm->rank, comm->gpuShared, patScratchBytes, cap, &scratch));
    plan.usesPatScratch = cap.status != gpu::CaptureStatus::Active;
  }
  // PAT AllGathers and ReduceScatters: their rounds after the group's other
  // items, each round a launch of its own, in task order (the same on
  // every rank).
  for (size_t i = 0; anyPat && i < colls.size(); i++) {
    const Task& t = colls[i];
    if (p.side.collPathOf(i) != TaskPath::Kernels || !collUsesPat(comm, t)) continue;
    const size_t first = plan.works.size();
    if (t.kind == TaskKind::ReduceScatter)
      UCHECK(patReduceScatterWorks(p.rank, p.nRanks, emptyP2pWork(comm, p2pSliceBytes(comm)), t, scratch,
                                   &plan.works, &plan.launchStarts));
    else
      patAllGatherWorks(comm, t, &plan.works, &plan.launchStarts);
    plan.workSeq.resize(plan.works.size(), t.seq);
    plan.workTask.resize(plan.works.size(), (int)i);
    countPatDecision(t.kind);
    TRACE(kSubsysColl, "rank %d: %s of %zu elements as PAT rounds (%zu items)", comm->rank, taskKindName(t.kind),
          t.count, plan.works.size() - first);
  }
  return planLaunches(&plan);
}

dev::Work emptyP2pWork(const ncclComm* comm, uint32_t sliceBytes) {
  dev::Work w;
  memset(&w, 0, sizeof(w));
  w.coll = dev::kCollP2p;
  w.proto = dev::kProtoSimple;
  w.channelLo = 0;
  w.channelHi = (uint8_t)(comm->p2pChannels - 1);
  w.p.sliceBytes = sliceBytes;
  w.p.sendPeer = -1;
  w.p.recvPeer = -1;
  return w;
}

size_t tuningBytes(const ncclComm* comm, const Task& t) {
  size_t bytes = t.count * dataTypeSize(t.dtype);
  if (t.kind == TaskKind::AllGather || t.kind == TaskKind::ReduceScatter) bytes *= comm->nRanks;
  return bytes;
}

void peersToConnect(const CommPlan& p, std::vector<PeerNeed>* needs) {
  const ncclComm* comm = p.comm;
  needs->clear();
  const std::vector<Task>& tasks = p.tasks.p2p;
  for (size_t i = 0; i < tasks.size(); i++) {
    const Task& t = tasks[i];
    // Messages the side plan moves outside the kernels need no connection.
    if (p.side.p2pPathOf(i) != TaskPath::Kernels) continue;
    const uint8_t dir = t.kind == TaskKind::Send ? kDirSend : kDirRecv;
    if (t.peer() == comm->rank || comm->transports.ready(t.peer(), dir)) continue;
    addPeerNeed(needs, t.peer(), dir);
  }
  // PAT AllGathers and ReduceScatters send to and receive from ranks at
  // distances 2^k (core/allgather_pat.h).
  for (const Task& t : p.tasks.colls) {
    if (!collUsesPat(comm, t)) continue;
    forEachPatPeer(p.rank, p.nRanks, [&](int peer) {
      if (!comm->transports.ready(peer, kDirBoth)) addPeerNeed(needs, peer, kDirBoth);
    });
    break;   // the same peers for every PAT collective of the communicator
  }
  // The tree's parents and children, both ways, for the first AllReduce on
  // the tree.
  if (comm->transports.treeReady()) return;
  for (const Task& t : p.tasks.colls) {
    if (t.kind != TaskKind::AllReduce || !allReduceUsesTree(comm, tuningBytes(comm, t))) continue;
    for (int peer : comm->transports.treePeers())
      if (!comm->transports.ready(peer, kDirBoth)) addPeerNeed(needs, peer, kDirBoth);
    break;
  }
}

ncclResult_t checkCaptureSupported(const ncclComm* comm, const gpu::CaptureInfo& cap, gpu::Stream s) {
  const char* why = nullptr;
  if (cap.status == gpu::CaptureStatus::Active && !gpu::graphCaptureSupported(&why)) {
    WARN("Rank %d: stream %p is capturing a graph, but %s; run the operation outside the capture",
         comm->rank, s, why);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

ncclResult_t checkTaskStreams(CommPlan& p) {
  const ncclComm* comm = p.comm;
  gpu::Stream first = nullptr;
  bool haveFirst = false;
  gpu::CaptureInfo firstCap{};
  auto check = [&](const Task& t) -> ncclResult_t {
    if (haveFirst && t.stream == first) return ncclSuccess;
    gpu::CaptureInfo cap;
    UCHECK(gpu::streamGetCaptureInfo(t.stream, &cap));
    if (cap.status == gpu::CaptureStatus::Invalidated) {
      WARN("Stream %p is in an invalidated capture: end the capture and start again", t.stream);
      return ncclInvalidUsage;
    }
    UCHECK(checkCaptureSupported(comm, cap, t.stream));
    if (!haveFirst) {
      first = t.stream;
      firstCap = cap;
      haveFirst = true;
      p.launch.capture = cap;
      p.launch.captureKnown = true;
      return ncclSuccess;
    }
    bool capA = firstCap.status == gpu::CaptureStatus::Active, capB = cap.status == gpu::CaptureStatus::Active;
    if (capA != capB || (capA && cap.graphId != firstCap.graphId)) {
      WARN("Rank %d: the operations of one group use streams %s; put captured and uncaptured operations "
           "(or operations captured into different graphs) in separate groups",
           comm->rank, capA != capB ? "that are partly captured and partly not" : "captured into different graphs");
      return ncclInvalidUsage;
    }
    return ncclSuccess;
  };
  for (const Task& t : p.tasks.colls) UCHECK(check(t));
  for (const Task& t : p.tasks.p2p) UCHECK(check(t));
  return ncclSuccess;
}

ncclResult_t planTasks(CommPlan& p) {
  // One rank: copies on the stream instead of a kernel (core/one_rank.h).
  p.launch.oneRankCopies = oneRankNeedsNoKernel(p);
  if (p.launch.oneRankCopies) return ncclSuccess;
  return planWorks(p);
}

ncclResult_t launchPlan(CommPlan& p) {
  LaunchPlan& plan = p.launch;
  if (plan.oneRankCopies) return launchOneRank(p);
  if (plan.works.empty()) return ncclSuccess;
  UCHECK(collectStreams(p));
  ncclResult_t res = ncclSuccess;
  for (size_t k = 0; k < plan.launches.size() && res == ncclSuccess; k++) res = launchWorks(p, k);
  // The eager scratch of PAT ReduceScatters is free again behind what was
  // launched (also when a later launch failed).
  if (plan.usesPatScratch) {
    const ncclResult_t r = patScratchLaunched(p.patScratch, plan.streams.launch);
    if (res == ncclSuccess) res = r;
  }
  UCHECK(res);
  return finishStreams(p);
}

ncclResult_t launchTasks(CommPlan& p) {
  ncclResult_t res = planTasks(p);
  if (p.observer != nullptr) p.observer->planned(p, res);
  if (res == ncclSuccess) res = launchPlan(p);
  if (p.observer != nullptr) p.observer->ended(p, res);
  return res;
}

}  // namespace uniccl
