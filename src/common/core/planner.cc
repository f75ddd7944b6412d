#include "common/core/planner.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/launch.h"
#include "common/core/one_rank.h"
#include "common/core/tuning.h"
#include "common/util/debug.h"
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

dev::Work collWork(const ncclComm* comm, const Task& t) {
  dev::Work w;
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
  return w;
}

// P2p tasks become rounds: in round r every rank sends to rank+r and
// receives from rank-r, so the two halves of one work item always face
// matching halves on the peers, in the same order on every channel.
// taskOfWork (optional): for every work appended, the index in tasks.p2p of
// its send task (or of its recv task when it has no send).
ncclResult_t p2pWorks(ncclComm* comm, std::vector<dev::Work>* out, std::vector<int>* taskOfWork) {
  const int n = comm->nRanks, me = comm->rank;
  const std::vector<Task>& tasks = comm->tasks.p2p;
  uint32_t slice = p2pSliceBytes(comm);
  for (int r = 0; r < n; r++) {
    int sendPeer = (me + r) % n, recvPeer = (me - r + n) % n;
    size_t si = 0, ri = 0;
    for (;;) {
      while (si < tasks.size() && !(tasks[si].kind == TaskKind::Send && tasks[si].peer() == sendPeer)) si++;
      while (ri < tasks.size() && !(tasks[ri].kind == TaskKind::Recv && tasks[ri].peer() == recvPeer)) ri++;
      bool haveSend = si < tasks.size(), haveRecv = ri < tasks.size();
      if (!haveSend && !haveRecv) break;
      dev::Work w;
      memset(&w, 0, sizeof(w));
      w.coll = dev::kCollP2p;
      w.proto = dev::kProtoSimple;
      w.channelLo = 0;
      w.channelHi = (uint8_t)(comm->p2pChannels - 1);
      w.p.sliceBytes = slice;
      w.p.sendPeer = -1;
      w.p.recvPeer = -1;
      if (r == 0) {
        // Self: a local copy needs both halves, of the same size.
        if (haveSend != haveRecv ||
            tasks[si].count * dataTypeSize(tasks[si].dtype) != tasks[ri].count * dataTypeSize(tasks[ri].dtype)) {
          WARN("Send to self and recv from self must come in pairs of equal size in one group (rank %d)", me);
          return ncclInvalidUsage;
        }
      }
      if (taskOfWork != nullptr) taskOfWork->push_back((int)(haveSend ? si : ri));
      if (haveSend) {
        const Task& t = tasks[si++];
        w.p.sendPeer = sendPeer;
        w.p.sendBuff = t.sendbuff;
        w.p.sendBytes = t.count * dataTypeSize(t.dtype);
        w.p.sendProto = r == 0 ? dev::kProtoSimple : p2pProto(comm, sendPeer, w.p.sendBytes);
      }
      if (haveRecv) {
        const Task& t = tasks[ri++];
        w.p.recvPeer = recvPeer;
        w.p.recvBuff = t.recvbuff;
        w.p.recvBytes = t.count * dataTypeSize(t.dtype);
        w.p.recvProto = r == 0 ? dev::kProtoSimple : p2pProto(comm, recvPeer, w.p.recvBytes);
      }
      out->push_back(w);
    }
  }
  return ncclSuccess;
}

// KernelCh profiling: which channels stamp each work item, and the Coll/P2p
// event it reports under (comm->profiler->launchTaskEvents: colls, then p2p).
void markProfiledWorks(ncclComm* comm, std::vector<dev::Work>& works, size_t nColl,
                       const std::vector<int>& p2pTaskOfWork) {
  const std::vector<void*>& events = comm->profiler->launchTaskEvents;
  for (size_t i = 0; i < works.size(); i++) {
    const size_t task = i < nColl ? i : comm->tasks.colls.size() + (size_t)p2pTaskOfWork[i - nColl];
    void* parent = task < events.size() ? events[task] : nullptr;
    dev::Work& w = works[i];
    // Channels from kMaxProfiledChannels on run unstamped (a 64-bit mask).
    for (int c = w.channelLo; c <= w.channelHi && c < dev::kMaxProfiledChannels; c++)
      if (comm->kernelCh->expect(c, parent) != 0) w.profMask |= 1ull << c;
  }
}

}  // namespace

size_t tuningBytes(const ncclComm* comm, const Task& t) {
  size_t bytes = t.count * dataTypeSize(t.dtype);
  if (t.kind == TaskKind::AllGather || t.kind == TaskKind::ReduceScatter) bytes *= comm->nRanks;
  return bytes;
}

void peersToConnect(ncclComm* comm, std::vector<int>* peers) {
  peers->clear();
  for (const Task& t : comm->tasks.p2p) {
    if (t.peer() == comm->rank || comm->transports.connected(t.peer())) continue;
    if (std::find(peers->begin(), peers->end(), t.peer()) == peers->end()) peers->push_back(t.peer());
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

ncclResult_t checkTaskStreams(ncclComm* comm) {
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
      comm->tasks.capture = cap;
      comm->tasks.captureKnown = true;
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
  for (const Task& t : comm->tasks.colls) UCHECK(check(t));
  for (const Task& t : comm->tasks.p2p) UCHECK(check(t));
  return ncclSuccess;
}

ncclResult_t launchTasks(ncclComm* comm) {
  std::vector<dev::Work>& works = comm->workScratch;
  works.clear();
  ncclResult_t res = ncclSuccess;

  // One rank: copies on the stream instead of a kernel (core/one_rank.h).
  bool copied = false;
  res = launchOneRank(comm, &copied);
  if (res != ncclSuccess || copied) {
    comm->tasks.clear();
    return res;
  }
  for (const Task& t : comm->tasks.colls) works.push_back(collWork(comm, t));
  size_t nColl = works.size();
  {
    std::vector<int>* taskOfWork = nullptr;
    if (comm->kernelCh) {
      comm->p2pTaskScratch.clear();
      taskOfWork = &comm->p2pTaskScratch;
    }
    if (!comm->tasks.p2p.empty()) UCHECK_GOTO(p2pWorks(comm, &works, taskOfWork), res, done);
    if (comm->kernelCh) markProfiledWorks(comm, works, nColl, comm->p2pTaskScratch);
  }
  if (works.empty()) goto done;

  {
    LaunchStreams streams;
    UCHECK_GOTO(collectStreams(comm, &streams), res, done);
    // Launches: consecutive collectives of one datatype share a kernel; p2p
    // items ride along with whatever kernel comes last (every kernel runs them).
    size_t first = 0;
    while (first < works.size()) {
      size_t last = first + 1;
      const void* kernel;
      if (first < nColl) {
        ncclDataType_t dt = (ncclDataType_t)works[first].c.dtype;
        kernel = dev::collectiveKernel(dt);
        if (kernel == nullptr) {
          WARN("This uniccl build has no kernels for datatype %s (built with -Dkernel_filter=%s); "
               "rebuild with -Dkernel_filter=all", dataTypeName(dt), UNICCL_KERNEL_FILTER);
          res = ncclInvalidUsage;
          goto done;
        }
        while (last < works.size() && last - first < kMaxWorksPerLaunch &&
               (last >= nColl || works[last].c.dtype == works[first].c.dtype))
          last++;
      } else {
        kernel = dev::p2pKernel();
        last = std::min(works.size(), first + kMaxWorksPerLaunch);
      }
      UCHECK_GOTO(launchWorks(comm, &works[first], (int)(last - first), kernel, streams), res, done);
      first = last;
    }
    UCHECK_GOTO(finishStreams(comm, streams), res, done);
  }
done:
  comm->tasks.clear();
  return res;
}

}  // namespace uniccl
