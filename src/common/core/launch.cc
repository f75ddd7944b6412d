#include "common/core/launch.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/comm_plan.h"
#include "common/core/describe_launch.h"
#include "common/core/launch_observer.h"
#include "common/core/graph_buffers.h"
#include "common/core/planner.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"
#include "common/watchdog/watchdog.h"

namespace uniccl {

namespace {

// Done-event callback of a launch whose work items sat in the FIFO.
void onFifoLaunchDone(void* arg, uint64_t fifoEnd) {
  ncclComm* comm = static_cast<ncclComm*>(arg);
  comm->workFifo.markConsumed((uint32_t)fifoEnd);
}

// Nothing to free: an inline launch's done event only lets drainLaunches()
// wait for it and report a failed kernel. KernelCh stamps are read by the
// poller thread (profiler/kernel_ch_poller.h).
void onInlineLaunchDone(void*, uint64_t) {}

// An eager launch whose work items travel in its arguments owns nothing to
// reclaim, and when the watchdog tracks it its progress words say when it
// ended (drainLaunches): recording a done event and querying it on the next
// call buy nothing more, and cost 1.6-2.8 us of host time per launch on
// H200 (an 8-byte AllReduce on 2 GPUs from one thread: 11.0-13.4 us per
// iteration without, 16.1-16.6 with). One launch in
// UNICCL_DONE_EVENT_INTERVAL (default 64; 1: every launch) still records one,
// so a kernel fault also surfaces through the callback queue; it surfaces
// anyway at the next launch (faults are sticky).
static_assert(knobSpec(Knob::UNICCL_PDL_RELEASE_CHANNELS).intDefault == dev::kMaxChannels / 2,
              "PDL releases early up to half the channels by default");

uint32_t doneEventInterval() {
  static const uint32_t n = (uint32_t)std::max<int64_t>(1, knobInt(Knob::UNICCL_DONE_EVENT_INTERVAL));
  return n;
}

}  // namespace

bool releaseEarly(const ncclComm* comm, unsigned grid, bool shortLaunch) {
  // Up to UNICCL_PDL_RELEASE_CHANNELS (64) blocks: the small and mid sizes,
  // where the launch gap is a large part of the time. Beyond, the next
  // kernel's waiting blocks would hold SMs for the whole of a long
  // collective, which the user's kernels on other streams could use (it
  // costs under 1% of graph-mode busbw at 16-64 MiB on 2x H200). A short
  // launch holds them only briefly, whatever its grid: a p2p launch of small
  // messages has every p2p channel's block, most of them without a part
  // (4 H200s, graphs: AlltoAll of 16 B-16 KiB 7.8-8.2 us -> 7.2-7.7,
  // SendRecv 4.1-4.6 -> 3.5-4.0; docs/performance-history.md, "Why a small AlltoAll cost twice a SendRecv").
  static const int64_t maxBlocks = knobInt(Knob::UNICCL_PDL_RELEASE_CHANNELS);
  // Ranks sharing a GPU never release early: the next kernel's parked blocks
  // would hold residency their peers' blocks were counted on (gpu_sharing.h).
  return comm->programmaticLaunch && !comm->gpuShared && ((int64_t)grid <= maxBlocks || shortLaunch);
}

bool shortP2pLaunch(const dev::Work* works, int n) {
  for (int i = 0; i < n; i++) {
    const dev::Work& w = works[i];
    if (w.coll != dev::kCollP2p) return false;
    if ((w.p.sendPeer >= 0 && w.p.sendBytes > kShortP2pBytes) || (w.p.recvPeer >= 0 && w.p.recvBytes > kShortP2pBytes))
      return false;
  }
  return n > 0;
}

ncclResult_t collectStreams(CommPlan& p) {
  ncclComm* comm = p.comm;
  LaunchPlan& plan = p.launch;
  LaunchStreams* s = &plan.streams;
  std::vector<gpu::Stream>& others = plan.otherStreams;
  others.clear();
  bool first = true;
  auto note = [&](gpu::Stream st) {
    if (first) {
      s->launch = st;
      first = false;
    } else if (st != s->launch && std::find(others.begin(), others.end(), st) == others.end()) {
      others.push_back(st);
    }
  };
  for (const Task& t : p.tasks.colls) note(t.stream);
  for (const Task& t : p.tasks.p2p) note(t.stream);

  // The launch stream is the first task's (checkTaskStreams may have asked already).
  if (plan.captureKnown) s->capture = plan.capture;
  else UCHECK(gpu::streamGetCaptureInfo(s->launch, &s->capture));
  UCHECK(checkCaptureSupported(comm, s->capture, s->launch));   // a group of one skips checkTaskStreams
  s->captured = s->capture.status == gpu::CaptureStatus::Active;
  if (comm->orderEvent == nullptr) UCHECK(gpu::eventCreate(&comm->orderEvent));
  // Kernels of one communicator run in issue order even across streams
  // (their connections' step counters depend on it).
  if (!s->captured && comm->haveLastStream && comm->lastStream != s->launch) {
    UCHECK(gpu::eventRecord(comm->orderEvent, comm->lastStream));
    UCHECK(gpu::streamWaitEvent(s->launch, comm->orderEvent));
  }
  for (gpu::Stream o : others) {
    UCHECK(gpu::eventRecord(comm->orderEvent, o));
    UCHECK(gpu::streamWaitEvent(s->launch, comm->orderEvent));
  }
  return ncclSuccess;
}

ncclResult_t finishStreams(CommPlan& p) {
  ncclComm* comm = p.comm;
  const LaunchPlan& plan = p.launch;
  const LaunchStreams& s = plan.streams;
  if (!plan.otherStreams.empty()) {
    UCHECK(gpu::eventRecord(comm->orderEvent, s.launch));
    for (gpu::Stream o : plan.otherStreams) UCHECK(gpu::streamWaitEvent(o, comm->orderEvent));
  }
  if (!s.captured) {
    comm->lastStream = s.launch;
    comm->haveLastStream = true;
  }
  return ncclSuccess;
}

// A peer these works need whose network connection closed, or -1.
// Collectives need the whole ring; p2p items only their peers.
static int lostPeerOf(const ncclComm* comm, const dev::Work* works, int n) {
  const int any = comm->transports.lostNetPeer();
  if (any < 0) return -1;
  for (int i = 0; i < n; i++) {
    const dev::Work& w = works[i];
    if (w.coll != dev::kCollP2p) return any;
    if (comm->transports.netPeerLost(w.p.sendPeer)) return w.p.sendPeer;
    if (comm->transports.netPeerLost(w.p.recvPeer)) return w.p.recvPeer;
  }
  return -1;
}

ncclResult_t launchWorks(CommPlan& p, size_t k) {
  ncclComm* comm = p.comm;
  const LaunchPlan& plan = p.launch;
  const KernelLaunch& L = plan.launches[k];
  const LaunchStreams& s = plan.streams;
  const dev::Work* works = &plan.works[L.firstWork];
  const int n = (int)L.nWorks;
  const unsigned grid = L.grid;
  if (int gone = lostPeerOf(comm, works, n); gone >= 0) {
    // A kernel would wait for a peer that is no longer there.
    WARN("Rank %d: rank %d closed its network connections (it destroyed its communicator or died); this "
         "communicator cannot run more operations: abort it (ncclCommAbort)", comm->rank, gone);
    int expected = ncclSuccess;
    comm->asyncError.compare_exchange_strong(expected, ncclRemoteError, std::memory_order_acq_rel);
    return ncclRemoteError;
  }
  dev::KernelArgs args;
  args.comm = comm->devComm;
  args.channels = comm->channelsDev;
  args.nWorks = (uint32_t)n;

  gpu::LaunchConfig cfg;
  cfg.gridX = grid;
  cfg.blockX = dev::kThreadsPerBlock;
  cfg.stream = s.launch;
  // A kernel forked onto the side stream (SidePlan::forksKernel, a message
  // to itself) starts with the group's kernel, not after it took the SMs.
  cfg.programmatic = comm->programmaticLaunch && !p.side.forksKernel();
  args.releaseEarly = releaseEarly(comm, grid, shortP2pLaunch(works, n));
  void* argv[] = {&args};

  // Where the work items travel: in the arguments (a few), in a copy the
  // graph owns (captured: replays run long after the FIFO moved on), or in
  // the work FIFO.
  const bool inlined = n <= dev::kMaxInlineWorks;
  uint32_t fifoEnd = 0;
  if (inlined) {
    args.works = nullptr;
    args.workOffset = 0;
    args.workMask = 0;
    memcpy(args.inlineWorks, works, n * sizeof(dev::Work));
  } else if (s.captured) {
    void* host = nullptr;
    void* devPtr = nullptr;
    size_t bytes = n * sizeof(dev::Work);
    UCHECK(gpu::hostAllocMapped(&host, &devPtr, bytes));
    memcpy(host, works, bytes);
    // On failure the buffer is queued for freeing already.
    UCHECK(graphOwnBuffer(s.capture.graph, host, GraphBufferKind::kHostMapped));
    args.works = static_cast<const dev::Work*>(devPtr);
    args.workOffset = 0;
    args.workMask = ~0u;
  } else {
    uint32_t bytes = (uint32_t)(n * sizeof(dev::Work));
    uint32_t offset;
    UCHECK(comm->workFifo.reserve(bytes, &offset));
    comm->workFifo.write(offset, works, bytes);
    args.works = static_cast<const dev::Work*>(comm->workFifo.devBase());
    args.workOffset = offset;
    args.workMask = comm->workFifo.mask();
    fifoEnd = offset + bytes;
  }

  // The watchdog times the launch by the progress words the kernel writes:
  // an eager launch carries only its id (watchdog/eager_tracker.h), a
  // captured one its graph slot (watchdog/graph_tracker.h; the graph gets
  // no node of its own).
  LaunchWatch watch;
  WorkDesc desc;
  CommWatch* const watcher = comm->watch.get();
  if (watcher != nullptr) {
    describeLaunch(plan, k, comm->channelsHost[0].ringNext, comm->channelsHost[0].ringPrev, &desc);
    UCHECK(watchLaunchBegin(watcher, s.captured, s.capture, grid, desc, &watch));
  }
  args.launchId = watch.eagerId;
  args.graph = watch.graph;
  // A done event for eager launches that own FIFO space or are not
  // tracked, and one in doneEventInterval() of the others (above).
  gpu::Event done = nullptr;
  if (!s.captured &&
      (!inlined || watch.eagerId == 0 || ++comm->launchesWithoutDoneEvent >= doneEventInterval())) {
    UCHECK(comm->donePool.get(&done));
    comm->launchesWithoutDoneEvent = 0;
  }
  void* observed = p.observer != nullptr ? p.observer->kernelLaunchBegin(p, k) : nullptr;
  ncclResult_t res = gpu::launchKernel(L.kernel, cfg, argv, done);
  if (p.observer != nullptr) p.observer->kernelLaunchEnd(p, k, observed, res);
  if (s.captured) return res;
  if (res != ncclSuccess) {
    if (done != nullptr) comm->donePool.put(done);
    return res;
  }
  comm->transports.wakeNetProxy();   // network steps follow soon: the proxy stops backing off
  if (done != nullptr) res = comm->callbacks.push(done, inlined ? onInlineLaunchDone : onFifoLaunchDone, comm, fifoEnd);
  if (watcher != nullptr) watchLaunchEnd(watcher, grid, desc, &watch);
  return res;
}

ncclResult_t drainLaunches(ncclComm* comm) {
  UCHECK(comm->callbacks.drain());
  return watchWaitEagerLaunches(comm->watch.get());
}

}  // namespace uniccl
