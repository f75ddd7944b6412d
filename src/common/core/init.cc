// Communicator lifecycle: init (blocking, non-blocking, in a group, InitAll,
// Split), finalize, destroy, abort, and the small queries.
#include <algorithm>
#include <functional>
#include <cstring>
#include <random>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "common/api_export.h"
#include "common/bootstrap/root.h"
#include "common/bootstrap/unique_id.h"
#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/comm_init.h"
#include "common/core/comm_transport.h"
#include "common/core/gpu_sharing.h"
#include "common/core/host_rows.h"
#include "common/core/group.h"
#include "common/core/graph_buffers.h"
#include "common/core/launch.h"
#include "common/core/side_state.h"
#include "common/core/tuning.h"
#include "common/core/validate.h"
#include "common/core/launch_profiling.h"
#include "common/device_guard.h"
#include "common/profiler/kernel_ch_poller.h"
#include "common/symmetric/symmetric.h"
#include "common/core/comm_topology.h"
#include "common/topo/nics.h"
#include "common/topo/rings.h"
#include "common/topo/trees.h"
#include "common/util/debug.h"
#include "common/util/guarded.h"
#include "common/util/knobs.h"
#include "common/util/socket.h"
#include "common/core/comm_watchdog.h"
#include "common/watchdog/watchdog.h"
#include "device/kernels.h"

namespace uniccl {

namespace {

// How long a failed init waits for the liveness links to name a rank that is
// gone when only a transport's failure or another rank's abort is known (the
// links see a death at once; only an overloaded machine makes this wait long).
constexpr int64_t kLossSettleMs = 2000;

uint64_t hashBytes(const void* p, size_t n) {
  const unsigned char* s = static_cast<const unsigned char*>(p);
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ULL;
  return h;
}

template <typename T>
[[nodiscard]] ncclResult_t allocDevice(ncclComm* comm, T** out, size_t count) {
  void* p = nullptr;
  UCHECK(gpu::deviceAlloc(&p, count * sizeof(T)));
  comm->deviceAllocs.push_back(p);
  UCHECK(gpu::memset(p, 0, count * sizeof(T)));
  *out = static_cast<T*>(p);
  return ncclSuccess;
}

// Every kernel a communicator may launch (the datatypes this build has).
std::vector<const void*> launchedKernels() {
  std::vector<const void*> ks;
  for (int t = 0; t < ncclNumTypes; t++) {
    for (int p = 0; p < dev::kNumProtos; p++)
      if (const void* k = dev::collectiveKernel((ncclDataType_t)t, p)) ks.push_back(k);
    if (const void* k = dev::symmetricKernel((ncclDataType_t)t)) ks.push_back(k);
  }
  ks.push_back(dev::p2pKernel());
  return ks;
}

// Loads every kernel module on `dev` once per process (see gpu::preloadKernel).
[[nodiscard]] ncclResult_t preloadKernels(int dev) {
  static std::mutex mutex;
  static std::vector<bool> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  if ((size_t)dev < loaded.size() && loaded[dev]) return ncclSuccess;
  for (const void* k : launchedKernels()) UCHECK(gpu::preloadKernel(k));
  if ((size_t)dev >= loaded.size()) loaded.resize(dev + 1, false);
  loaded[dev] = true;
  return ncclSuccess;
}

// Device-side communicator: DevComm, channels with their rings and trees
// from the topology (common/topo: rank order and the double binary tree on
// one host without a GPU mesh), per-channel peer tables (wired by the
// transports: ring and tree peers at init, p2p peers lazily).
[[nodiscard]] ncclResult_t setupDevice(ncclComm* comm) {
  void* abortDev = nullptr;
  void* abortHost = nullptr;
  UCHECK(gpu::hostAllocMapped(&abortHost, &abortDev, 64));
  memset(abortHost, 0, 64);
  comm->abortFlagHost = static_cast<volatile uint32_t*>(abortHost);
  comm->abortFlagDev = static_cast<uint32_t*>(abortDev);

  const int n = comm->nRanks;
  bool allP2p = n > 1;
  for (int r = 0; r < n; r++) allP2p = allP2p && comm->transports.p2pReachable(r, (r + 1) % n);
  comm->allP2p = allP2p;
  UCHECK(chooseChannelCount(comm, &comm->nChannels));
  comm->p2pChannels = comm->nChannels;

  // Every channel's ring: the kernels index ringRanks by ring position
  // (device/coll_ring.h), so each channel has its own array.
  const std::vector<std::vector<int>> rings = topo::buildRings(comm->topology, comm->nChannels);
  int* ringRanks = nullptr;
  UCHECK(allocDevice(comm, &ringRanks, (size_t)n * comm->nChannels));
  std::vector<int> order;
  order.reserve((size_t)n * comm->nChannels);
  for (const std::vector<int>& ring : rings) order.insert(order.end(), ring.begin(), ring.end());
  UCHECK(gpu::memcpy(ringRanks, order.data(), order.size() * sizeof(int)));
  // As NCCL logs its rings: rank 0 says each channel's order (the first 32 ranks).
  for (int c = 0; c < comm->nChannels && comm->rank == 0 && n > 1; c++) {
    std::string line;
    for (int i = 0; i < n && i < 32; i++) line += " " + std::to_string(rings[c][i]);
    INFO(kSubsysInit, "Channel %02d/%02d :%s%s", c, comm->nChannels, line.c_str(), n > 32 ? " ..." : "");
  }

  // Each channel's NIC on this rank's host: the network links open the channel there.
  comm->transports.setChannelNics(
      topo::channelNicsOfRank(comm->topology, topo::assignNics(comm->topology, rings), comm->rank));

  UCHECK(allocDevice(comm, &comm->channelsDev, dev::kMaxChannels));
  std::vector<int> treePeers;   // every channel's tree parent and children, each once
  for (int c = 0; c < comm->nChannels; c++) {
    dev::Channel& ch = comm->channelsHost[c];
    const std::vector<int>& ring = rings[c];
    const int idx = (int)(std::find(ring.begin(), ring.end(), comm->rank) - ring.begin());
    ch.ringIndex = idx;
    ch.ringPrev = ring[(idx - 1 + n) % n];
    ch.ringNext = ring[(idx + 1) % n];
    ch.ringRanks = ringRanks + (size_t)c * n;
    const TreeNode tree = topo::buildTree(comm->topology, c)[comm->rank];
    ch.treeUp = tree.parent;
    ch.treeDown[0] = tree.children[0];
    ch.treeDown[1] = tree.children[1];
    for (int p : {ch.treeUp, ch.treeDown[0], ch.treeDown[1]})
      if (p >= 0 && std::find(treePeers.begin(), treePeers.end(), p) == treePeers.end()) treePeers.push_back(p);
    UCHECK(allocDevice(comm, &ch.peers, n));
  }
  comm->transports.setTreePeers(std::move(treePeers));
  UCHECK(gpu::memcpy(comm->channelsDev, comm->channelsHost, sizeof(comm->channelsHost)));

  dev::DevComm& d = comm->devCommHost;
  d.rank = comm->rank;
  d.nRanks = n;
  d.nChannels = comm->nChannels;
  // Kernels launched programmatically (PDL) start while the previous kernel
  // of their stream still runs and wait for it only after their preamble
  // (device/kernel.h): in a graph of small collectives the launch gap
  // overlaps the previous kernel. All kernels share one build, so the p2p
  // kernel stands for them.
  bool pdl = false;
  if (knobInt(Knob::UNICCL_PDL) != 0) UCHECK(gpu::programmaticLaunchSupported(dev::p2pKernel(), &pdl));
  comm->programmaticLaunch = pdl;
  INFO(kSubsysInit, "rank %d: programmatic dependent launch %s", comm->rank, pdl ? "on" : "off");
  d.buffBytes[dev::kProtoLL] = (int)comm->transports.layout().llBytes;
  d.buffBytes[dev::kProtoSimple] = (int)comm->transports.layout().simpleBytes;
  d.buffBytes[dev::kProtoLL128] = (int)comm->transports.layout().ll128Bytes;   // 0: no LL128 slots
  d.abortFlag = comm->abortFlagDev;
  d.channels = comm->channelsDev;
  d.p2pDirectMinBytes = (uint64_t)std::max<int64_t>(0, knobInt(Knob::UNICCL_P2P_DIRECT_MIN_BYTES));
  UCHECK(allocDevice(comm, &comm->devComm, 1));
  UCHECK(gpu::memcpy(comm->devComm, &d, sizeof(d)));
  return ncclSuccess;
}

// This rank's connection needs at init: on every channel it receives from
// its ring predecessor and sends to its successor (a P2P link carries slots
// only for the direction it serves). Tree parents and children connect
// when the first collective on the tree is planned (planner.cc).
std::vector<PeerNeed> initConnectNeeds(const ncclComm* comm) {
  std::vector<PeerNeed> needs;
  for (int c = 0; c < comm->nChannels; c++) {
    const dev::Channel& ch = comm->channelsHost[c];
    if (ch.ringNext >= 0) addPeerNeed(&needs, ch.ringNext, kDirSend);
    if (ch.ringPrev >= 0) addPeerNeed(&needs, ch.ringPrev, kDirRecv);
  }
  return needs;
}

// KernelCh profiling: rings in host-mapped memory the kernels stamp, and
// the tracker that turns stamps into events (only when the plugin asks).
[[nodiscard]] ncclResult_t setupKernelCh(ncclComm* comm) {
  if (!comm->profiler || !comm->profiler->wants(ncclProfileKernelCh)) return ncclSuccess;
  void* host = nullptr;
  void* dev = nullptr;
  const size_t bytes = sizeof(KernelChRing) * comm->nChannels;
  UCHECK(gpu::hostAllocMapped(&host, &dev, bytes));
  memset(host, 0, bytes);
  comm->profRingsHost = host;
  gpu::DeviceProps props;
  UCHECK(gpu::getDeviceProps(comm->gpuDev, &props));   // the stamps' timer rate (ticks to ns)
  comm->kernelCh = std::make_unique<KernelChTracker>(comm->profiler.get(), static_cast<KernelChRing*>(host),
                                                     comm->nChannels, props.timerRateKHz);
  kernel_ch_poller::add(comm->kernelCh.get());
  comm->devCommHost.profRings = static_cast<dev::ProfRing*>(dev);
  return gpu::memcpy(comm->devComm, &comm->devCommHost, sizeof(comm->devCommHost));
}

// The whole initialization of one rank; records the outcome in the comm.
[[nodiscard]] ncclResult_t initRankSteps(ncclComm* comm, int nranks, const std::vector<ncclUniqueId>& ids, int rank, int gpuDev) {
  ncclResult_t res = ncclSuccess;
  PeerInfo info;
  HostRows hostRows;
  std::vector<PeerNeed> connectNeeds;
  comm->rank = rank;
  comm->nRanks = nranks;
  comm->gpuDev = gpuDev;
  comm->commHash = hashBytes(ids.data(), sizeof(ncclUniqueId));   // the first id: every rank passes the same
  clearLastError();   // what init logs from here on says why it failed
  UCHECK_GOTO(gpu::setDevice(gpuDev), res, fail);
  setLogDevice(gpuDev);
  logVersionOnce();
  loadTuningEnv();

  // Kernels load before the peer info: their occupancy is part of it.
  UCHECK_GOTO(preloadKernels(gpuDev), res, fail);
  UCHECK_GOTO(fillLocalPeerInfo(gpuDev, &info), res, fail);
  UCHECK_GOTO(fillSharingInfo(launchedKernels(), dev::kThreadsPerBlock, comm->virtualId, &info), res, fail);
  UCHECK_GOTO(commLivenessListen(comm, &info.livenessListen), res, fail);
  UCHECK_GOTO(topo::placeFromFile(rank, nranks, &info, &comm->topology), res, fail);
  UCHECK_GOTO(Bootstrap::init(ids.data(), (int)ids.size(), rank, nranks, &info, sizeof(info), &comm->bootstrap,
                                  &comm->hostAbort), res, fail);
  comm->peers.resize(nranks);
  for (int r = 0; r < nranks; r++) memcpy(&comm->peers[r], comm->bootstrap->peerInfo(r), sizeof(PeerInfo));
  // From here on a rank that dies is reported at once (its link closes), not
  // after the bootstrap timeout: the waits below end through hostAbort.
  UCHECK_GOTO(commLivenessLink(comm), res, fail);
  UCHECK_GOTO(exchangeHostRows(comm, &hostRows), res, fail);
  UCHECK_GOTO(topo::buildTopology(comm, hostRows.hosts, hostRows.topology, hostRows.topologyBytes, &comm->topology),
              res, fail);
  {
    GpuSharing sharing;
    UCHECK_GOTO(checkGpuSharing(comm->peers, rank, &sharing), res, fail);
    comm->gpuShared = sharing.shared;
    comm->channelFit = sharing.maxChannels;
  }
  profilerCommInit(comm);  // [profiler] plugin init for this comm; a failing plugin only disables profiling
  UCHECK_GOTO(comm->transports.init(transportComm(comm), transportPeers(comm), std::move(hostRows.reach)), res, fail);
  UCHECK_GOTO(setupDevice(comm), res, fail);
  UCHECK_GOTO(setupKernelCh(comm), res, fail);
  if (nranks > 1) {
    connectNeeds = initConnectNeeds(comm);
    UCHECK_GOTO(comm->transports.connect(transportComm(comm), connectNeeds), res, fail);
  }
  UCHECK_GOTO(comm->workFifo.init(0, &comm->callbacks), res, fail);
  // Before the barrier: once any rank's init returns, every rank's service listens.
  UCHECK_GOTO(startImportService(comm), res, fail);
  UCHECK_GOTO(comm->bootstrap->barrier(), res, fail);
  UCHECK_GOTO(watchdogRegister(comm, watchdogTimeoutMsFromEnv()), res, fail);
  INFO(kSubsysInit, "comm %p rank %d nranks %d gpuDev %d busId %s - Init COMPLETE (%d channels, %s)", (void*)comm,
       rank, nranks, gpuDev, info.busId, comm->nChannels,
       nranks == 1 ? "single rank" : transportName(comm->transports.kind(comm->channelsHost[0].ringNext)));
  comm->state.store(CommState::Ready, std::memory_order_release);
  comm->asyncError.store(ncclSuccess, std::memory_order_release);
  commLivenessReady(comm);   // a peer lost since its last wait: the async error says so now
  return ncclSuccess;
fail:
  {
    // A lost peer is why the waits ended: say which (a rank that is gone,
    // when a failed handshake or a peer's abort was only the first sign).
    const std::string loss = commLivenessLoss(comm, kLossSettleMs);
    if (!loss.empty()) {
      res = ncclRemoteError;
      WARN("Rank %d/%d: %s", rank, nranks, loss.c_str());
    }
  }
  {
    // The cause was logged where it was found: keep it in the last error the
    // caller reads (ncclGetLastError), after this line's summary.
    const std::string cause = lastErrorMessage();
    WARN("Initialization of rank %d/%d on GPU %d failed: %s%s%s", rank, nranks, gpuDev, ncclGetErrorString(res),
         cause.empty() ? "" : ": ", cause.c_str());
  }
  comm->initError = lastErrorMessage();
  comm->state.store(CommState::Failed, std::memory_order_release);
  comm->asyncError.store(res, std::memory_order_release);
  return res;
}

}  // namespace

// Runs on the caller's thread or on a library thread (non-blocking init,
// group end, InitAll): an exception fails the init as an error would.
ncclResult_t commInitRank(ncclComm* comm, int nranks, const std::vector<ncclUniqueId>& ids, int rank, int gpuDev) {
  const ncclResult_t res =
      runGuarded("communicator init", [&] { return initRankSteps(comm, nranks, ids, rank, gpuDev); });
  if (res != ncclSuccess && comm->state.load(std::memory_order_acquire) != CommState::Failed) {
    // A message that cannot be copied (out of memory) is left out; res says what failed.
    (void)runGuarded("communicator init", [&] { comm->initError = lastErrorMessage(); });
    comm->state.store(CommState::Failed, std::memory_order_release);
    comm->asyncError.store(res, std::memory_order_release);
  }
  return res;
}

// Releases everything the communicator owns. With `abort`, in-flight kernels
// are told to stop first instead of being waited for.
void commFree(ncclComm* comm, bool abort) {
  leaveGroup(comm);
  if (comm->initThread.joinable()) {
    if (abort) comm->hostAbort.store(1, std::memory_order_release);
    comm->initThread.join();
  }
  if (comm->finalizeThread.joinable()) {
    // The comm finished its init (finalize needs that): the device abort
    // flag exists, and raising it ends the launches the thread waits for.
    if (abort) {
      comm->hostAbort.store(1, std::memory_order_release);
      if (comm->abortFlagHost != nullptr) __atomic_store_n(comm->abortFlagHost, 1u, __ATOMIC_RELEASE);
    }
    comm->finalizeThread.join();
  }
  // The neighbours learn whether this rank leaves (destroy) or aborts (abort,
  // failed init); from here on the liveness monitor no longer looks at this comm.
  {
    const CommState st = comm->state.load(std::memory_order_acquire);
    commLivenessStop(comm, st != CommState::Aborted && st != CommState::Failed);
  }
  // From here on the watchdog thread no longer looks at this comm.
  watchdogUnregister(comm);
  // No more direct-receive imports (an abort ends the one in flight): the
  // registry they report to goes with the comm.
  if (comm->direct.importer) comm->direct.importer->stop();
  // Teardown releases everything it can: a call that fails below was logged
  // by the backend, and the resources after it are released all the same.
  DeviceGuard device;
  if (comm->gpuDev >= 0) (void)device.use(comm->gpuDev);
  if (abort) {
    comm->hostAbort.store(1, std::memory_order_release);
    if (comm->abortFlagHost != nullptr) *comm->abortFlagHost = 1;
  }
  // Launches end (normally or through the abort flag); their callbacks free
  // FIFO space and return events to the pool before the pool goes.
  if (drainLaunches(comm) != ncclSuccess) {
    WARN("Rank %d: a kernel of this communicator failed; releasing its resources anyway", comm->rank);
  }
  reclaimGraphBuffers();
  comm->transports.release();
  // Peers' buffers mapped for this rank's sends: the kernels that stored
  // into them have ended.
  if (comm->direct.service) comm->direct.service->stop();
  comm->direct.service.reset();
  if (comm->kernelCh) {
    kernel_ch_poller::remove(comm->kernelCh.get());
    comm->kernelCh->poll();    // the kernels have ended: every stamp that will come is there
    comm->kernelCh.reset();    // stops what is still open
  }
  if (comm->profRingsHost != nullptr) (void)gpu::hostFree(comm->profRingsHost);
  profilerCommFinalize(comm);  // [profiler] plugin finalize (+ dlclose with the last comm), after the last event
  releaseSymmetric(&comm->symmetric);   // windows: after the kernels that may use them ended
  for (void* p : comm->deviceAllocs) (void)gpu::deviceFree(p);
  comm->deviceAllocs.clear();
  if (comm->orderEvent != nullptr) (void)gpu::eventDestroy(comm->orderEvent);
  // The side stream and the scratches: the launches that used them drained above.
  if (comm->sideState) releaseSideState(comm->sideState.get(), abort);
  if (comm->abortFlagHost != nullptr) (void)gpu::hostFree(const_cast<uint32_t*>(comm->abortFlagHost));
  comm->liveness.reset();
  comm->bootstrap.reset();
  delete comm;   // its address is retired: later calls with the handle are refused (core/comm_registry.h)
}

// Creates a fresh unique id (never the NCCL_COMM_ID one): for split children.
ncclResult_t freshUniqueId(ncclUniqueId* out) {
  reapFinishedRoots();   // join the root threads of earlier inits (as ncclGetUniqueId does)
  return newRandomUniqueId(out);
}

ncclResult_t newComm(const ncclConfig_t* config, const CommConfig* inherit, ncclComm** out) {
  CommConfig cfg;
  if (config == nullptr && inherit != nullptr) {
    cfg = *inherit;
    applyConfigEnv(&cfg);
  } else {
    UCHECK(readConfig(config, &cfg));
  }
  ncclComm* comm = new (std::nothrow) ncclComm();
  if (comm == nullptr || !comm->sideState) {
    WARN("Out of host memory allocating a communicator");
    delete comm;
    return ncclSystemError;
  }
  comm->config = cfg;
  *out = comm;
  return ncclSuccess;
}

// Blocking, non-blocking or deferred-to-group-end init of a fresh comm.
ncclResult_t initChildComm(ncclComm* parent, ncclComm* child, const std::vector<int>& members, uint32_t tag) {
  int newRank = 0;
  while (newRank < (int)members.size() && members[newRank] != parent->rank) newRank++;
  ncclUniqueId id;
  ncclResult_t res = ncclSuccess;
  if (newRank == (int)members.size()) {
    WARN("Rank %d is not a member of the communicator it derives", parent->rank);
    res = ncclInternalError;
  } else if (newRank == 0) {
    res = freshUniqueId(&id);
    for (size_t i = 1; i < members.size() && res == ncclSuccess; i++)
      res = parent->bootstrap->send(members[i], tag, &id, sizeof(id));
  } else {
    res = parent->bootstrap->recv(members[0], tag, &id, sizeof(id));
  }
  if (res != ncclSuccess) {
    child->asyncError.store(res);
    child->state.store(CommState::Failed);
    return res;
  }
  return commInitRank(child, (int)members.size(), {id}, newRank, parent->gpuDev);
}

ncclResult_t runDerivation(std::function<ncclResult_t()> job, ncclComm* child, ncclComm** newcomm) {
  if (inGroup()) {
    deferToGroupEnd(std::move(job));
    return ncclSuccess;
  }
  ncclResult_t res = job();
  if (res != ncclSuccess && child) {
    *newcomm = nullptr;
    commFree(child, true);
  }
  return res;
}

[[nodiscard]] ncclResult_t startInit(ncclComm* comm, int nranks, const std::vector<ncclUniqueId>& ids, int rank, int dev) {
  comm->rank = rank;
  comm->nRanks = nranks;
  comm->gpuDev = dev;
  if (inGroup()) {
    deferToGroupEnd([=] { return commInitRank(comm, nranks, ids, rank, dev); });
    return ncclSuccess;
  }
  if (!comm->config.blocking) {
    // Its outcome becomes the comm's state and async error (commInitRank), which the caller polls.
    comm->initThread = std::thread([=] { (void)commInitRank(comm, nranks, ids, rank, dev); });
    return ncclInProgress;
  }
  return commInitRank(comm, nranks, ids, rank, dev);
}

}  // namespace uniccl

using namespace uniccl;

namespace {

// InitRank, InitRankConfig and RCCL's InitRankMulti: one rank on the
// calling thread's current GPU; virtualId >= 0 lets it share that GPU.
[[nodiscard]] ncclResult_t initRankOnCurrentGpu(const char* fn, ncclComm_t* newcomm, int nranks,
                                  const std::vector<ncclUniqueId>& commIds, int rank, ncclConfig_t* config,
                                  int virtualId) {
  if (newcomm == nullptr) {
    WARN("%s: comm is a NULL pointer", fn);
    return ncclInvalidArgument;
  }
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    WARN("%s: invalid rank %d / nranks %d (need 0 <= rank < nranks)", fn, rank, nranks);
    return ncclInvalidArgument;
  }
  // The config first: a bad config is the caller's error whatever the GPUs.
  ncclComm* comm = nullptr;
  UCHECK(newComm(config, nullptr, &comm));
  comm->virtualId = virtualId;
  int ndev = 0, dev = -1;
  ncclResult_t res = gpu::getDeviceCount(&ndev);
  if (res == ncclSuccess && ndev < 1) {
    WARN("%s: no GPU is visible to this process", fn);
    res = ncclUnhandledCudaError;
  }
  if (res == ncclSuccess) res = gpu::getDevice(&dev);
  if (res != ncclSuccess) {
    WARN("%s: cannot select a GPU for rank %d", fn, rank);
    delete comm;
    return res;
  }
  *newcomm = comm;
  res = startInit(comm, nranks, commIds, rank, dev);
  if (res != ncclSuccess && res != ncclInProgress) {
    *newcomm = nullptr;
    // Why the init failed stays the last error: the teardown may log too
    // (a goodbye to a peer that is gone).
    const std::string cause = lastErrorMessage();
    commFree(comm, true);
    setLastErrorMessage(cause.c_str());
  }
  return res;
}

}  // namespace

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
         ncclConfig_t* config);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* newcomm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return initRankOnCurrentGpu("ncclCommInitRankConfig", newcomm, nranks, {commId}, rank, config, -1);
}

// RCCL's multi-rank-per-device init (rccl/rccl.h): like ncclCommInitRank,
// and the rank may share its GPU with other ranks of the communicator, each
// with its own virtualId (core/gpu_sharing.h says what must hold).
NCCL_API(ncclResult_t, ncclCommInitRankMulti, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
         int virtualId);
ncclResult_t ncclCommInitRankMulti(ncclComm_t* newcomm, int nranks, ncclUniqueId commId, int rank, int virtualId) {
  if (virtualId < 0) {
    WARN("ncclCommInitRankMulti: virtualId %d must be >= 0 (one id per rank of a GPU)", virtualId);
    return ncclInvalidArgument;
  }
  return initRankOnCurrentGpu("ncclCommInitRankMulti", newcomm, nranks, {commId}, rank, nullptr, virtualId);
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitRank(ncclComm_t* newcomm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(newcomm, nranks, commId, rank, nullptr);
}

NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
         ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  if (nId < 1 || commIds == nullptr) {
    WARN("ncclCommInitRankScalable: need nId >= 1 unique ids (got %d, ids %p)", nId, (void*)commIds);
    return ncclInvalidArgument;
  }
  // Every rank passes the same ids in the same order; each id's root serves
  // a block of the ranks (common/bootstrap/bootstrap.h).
  return initRankOnCurrentGpu("ncclCommInitRankScalable", newcomm, nranks,
                              std::vector<ncclUniqueId>(commIds, commIds + nId), myrank, config, -1);
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist);
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  const char* fn = "ncclCommInitAll";
  if (comms == nullptr || ndev < 1) {
    WARN("%s: need a comms array and ndev >= 1 (got %p, %d)", fn, (void*)comms, ndev);
    return ncclInvalidArgument;
  }
  int visible = 0;
  UCHECK(gpu::getDeviceCount(&visible));
  for (int i = 0; i < ndev; i++) {
    int d = devlist ? devlist[i] : i;
    if (d < 0 || d >= visible) {
      WARN("%s: device %d (entry %d) is not one of the %d visible GPUs", fn, d, i, visible);
      return ncclInvalidArgument;
    }
  }
  ncclUniqueId id;
  UCHECK(freshUniqueId(&id));
  std::vector<ncclComm*> created(ndev, nullptr);
  for (int i = 0; i < ndev; i++) {
    ncclResult_t r = newComm(nullptr, nullptr, &created[i]);
    if (r != ncclSuccess) {
      for (ncclComm* c : created)
        if (c) commFree(c, true);
      return r;
    }
    created[i]->config.blocking = true;
  }
  std::vector<std::function<ncclResult_t()>> jobs;
  for (int i = 0; i < ndev; i++) {
    int d = devlist ? devlist[i] : i;
    jobs.push_back([&, i, d] { return commInitRank(created[i], ndev, {id}, i, d); });
  }
  // A single job runs on this thread and switches its device: switch back.
  int saved = -1;
  const bool haveSaved = gpu::getDevice(&saved) == ncclSuccess;
  ncclResult_t res = runConcurrently(jobs);
  if (haveSaved) (void)gpu::setDevice(saved);   // res is the outcome to report; the backend logs a failed switch
  if (res != ncclSuccess) {
    for (ncclComm* c : created) commFree(c, true);
    return res;
  }
  for (int i = 0; i < ndev; i++) comms[i] = created[i];
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
         ncclConfig_t* config);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  const char* fn = "ncclCommSplit";
  UCHECK(checkCommManageable(comm, fn));
  if (newcomm == nullptr) {
    WARN("%s: newcomm is a NULL pointer", fn);
    return ncclInvalidArgument;
  }
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    WARN("%s: color %d must be >= 0 or NCCL_SPLIT_NOCOLOR", fn, color);
    return ncclInvalidArgument;
  }
  *newcomm = nullptr;
  ncclComm* child = nullptr;
  if (color != NCCL_SPLIT_NOCOLOR) UCHECK(newComm(config, &comm->config, &child));
  if (child) {
    child->virtualId = comm->virtualId;   // ranks made to share a GPU may share it in the child too
    *newcomm = child;
  }
  auto job = [comm, color, key, child]() -> ncclResult_t {
    struct Entry { int color, key, rank; };
    std::vector<Entry> all(comm->nRanks);
    all[comm->rank] = {color, key, comm->rank};
    ncclResult_t res = comm->bootstrap->allGather(all.data(), sizeof(Entry));
    if (res != ncclSuccess) {
      if (child) child->asyncError.store(res), child->state.store(CommState::Failed);
      return res;
    }
    if (child == nullptr) return ncclSuccess;
    std::vector<Entry> members;
    for (const Entry& e : all)
      if (e.color == color) members.push_back(e);
    std::stable_sort(members.begin(), members.end(),
                     [](const Entry& a, const Entry& b) { return a.key != b.key ? a.key < b.key : a.rank < b.rank; });
    std::vector<int> ranks;
    for (const Entry& e : members) ranks.push_back(e.rank);
    return initChildComm(comm, child, ranks, 0x53504c00u ^ (uint32_t)color);   // "SPL"
  };
  return runDerivation(job, child, newcomm);
}

namespace {

// Waits (on the comm's GPU) until every launch of the communicator ended.
[[nodiscard]] ncclResult_t drainOnCommDevice(ncclComm* comm) {
  DeviceGuard device;
  UCHECK(device.use(comm->gpuDev));
  return drainLaunches(comm);
}

}  // namespace

// Blocking: returns once the communicator's operations ended. Non-blocking
// (config.blocking == 0, as NCCL): returns ncclInProgress at once; the wait
// runs on a thread of the comm and ncclCommGetAsyncError answers
// ncclInProgress until it ended, then ncclSuccess (or the launches' error).
// Either way no operation may be issued once finalize was called.
NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm);
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  UCHECK(checkCommUsable(comm, "ncclCommFinalize"));
  if (!comm->config.blocking) {
    if (comm->initThread.joinable()) comm->initThread.join();   // its init ended (the comm is usable)
    comm->asyncError.store(ncclInProgress, std::memory_order_release);
    comm->state.store(CommState::Finalized, std::memory_order_release);
    try {
      comm->finalizeThread = std::thread([comm] {
        ncclResult_t res = runGuarded("finalize thread", [comm] { return drainOnCommDevice(comm); });
        if (res != ncclSuccess)
          WARN("ncclCommFinalize: rank %d: waiting for the communicator's operations failed (%s)", comm->rank,
               ncclGetErrorString(res));
        comm->asyncError.store(res, std::memory_order_release);
      });
    } catch (const std::system_error& e) {
      WARN("ncclCommFinalize: cannot start the finalize thread (%s)", e.what());
      comm->asyncError.store(ncclSystemError, std::memory_order_release);
      return ncclSystemError;
    }
    return ncclInProgress;
  }
  UCHECK(drainOnCommDevice(comm));
  comm->state.store(CommState::Finalized, std::memory_order_release);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;   // as NCCL: destroying NULL is a no-op
  UCHECK(checkCommHandle(comm, "ncclCommDestroy"));
  // A revoked communicator's operations were stopped: nothing of theirs is
  // left to deliver, so its network sends are not waited for (as on abort).
  commFree(comm, comm->state.load(std::memory_order_acquire) == CommState::Revoked);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  UCHECK(checkCommHandle(comm, "ncclCommAbort"));
  comm->state.store(CommState::Aborted, std::memory_order_release);
  commFree(comm, true);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  UCHECK(checkCommHandle(comm, "ncclCommGetAsyncError"));
  if (asyncError == nullptr) {
    WARN("ncclCommGetAsyncError: asyncError is a NULL pointer");
    return ncclInvalidArgument;
  }
  *asyncError = (ncclResult_t)comm->asyncError.load(std::memory_order_acquire);
  // A failed init's cause, also when it failed on another thread (non-blocking init).
  if (*asyncError != ncclSuccess && *asyncError != ncclInProgress && !comm->initError.empty() &&
      comm->state.load(std::memory_order_acquire) == CommState::Failed)
    setLastErrorMessage(comm->initError.c_str());
  // A lost peer (common/liveness): which rank, and where it ran.
  else if (*asyncError == ncclRemoteError) {
    const std::string loss = commLivenessLoss(comm);
    if (!loss.empty()) setLastErrorMessage(loss.c_str());
  }
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  UCHECK(checkCommHandle(comm, "ncclCommCount"));
  if (count == nullptr) {
    WARN("ncclCommCount: count is a NULL pointer");
    return ncclInvalidArgument;
  }
  *count = comm->nRanks;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  UCHECK(checkCommHandle(comm, "ncclCommCuDevice"));
  if (device == nullptr) {
    WARN("ncclCommCuDevice: device is a NULL pointer");
    return ncclInvalidArgument;
  }
  *device = comm->gpuDev;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  UCHECK(checkCommHandle(comm, "ncclCommUserRank"));
  if (rank == nullptr) {
    WARN("ncclCommUserRank: rank is a NULL pointer");
    return ncclInvalidArgument;
  }
  *rank = comm->rank;
  return ncclSuccess;
}
