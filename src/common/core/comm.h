// struct ncclComm: one rank's communicator. Owns every resource of that rank
// (device comm, channels, transports, work FIFO, events); destroy and abort
// release them all, in reverse order of creation.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "common/bootstrap/bootstrap.h"
#include "common/core/comm_plan.h"
#include "common/core/config.h"
#include "common/core/peer_info.h"
#include "common/core/redop.h"
#include "common/core/direct_recv.h"
#include "common/core/registry.h"
#include "common/core/tasks.h"
#include "common/core/tuning.h"
#include "common/core/validate.h"
#include "common/enqueue/event_callback_queue.h"
#include "common/enqueue/event_pool.h"
#include "common/enqueue/work_fifo.h"
#include "common/gpu.h"
#include "common/core/comm_liveness.h"
#include "common/profiler/kernel_ch.h"
#include "common/profiler/profiler.h"
#include "common/topo/system.h"
#include "common/transport/transport.h"
#include "common/watchdog/comm_watch.h"
#include "device/dev_types.h"

namespace uniccl {

struct SideState;        // core/side_state.h
struct SymmetricState;

enum class CommState : int {
  Initializing,   // non-blocking init still running
  Ready,
  Failed,         // init failed; only destroy/abort allowed
  Finalized,
  Aborted,
  Revoked,        // ncclCommRevoke (or a shrink with NCCL_SHRINK_ABORT): no more operations; split, shrink, destroy
};

}  // namespace uniccl

struct ncclComm {
  // Every communicator lives in pages of its own, registered while it lives
  // and never reused once it is destroyed (core/comm_registry.h): the API
  // tells a destroyed handle from a live one without reading it.
  static void* operator new(std::size_t bytes);
  static void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept;
  static void operator delete(void* p) noexcept;
  static void operator delete(void* p, const std::nothrow_t&) noexcept;
  // Out of line (core/comm.cc), where the side state's type is complete.
  ncclComm();
  ~ncclComm();
  ncclComm(const ncclComm&) = delete;
  ncclComm& operator=(const ncclComm&) = delete;

  int rank = -1;
  int nRanks = 0;
  int gpuDev = -1;
  int virtualId = -1;          // ncclCommInitRankMulti's id of this rank on its GPU (split children inherit it)
  bool gpuShared = false;      // some GPU holds several ranks of this comm (core/gpu_sharing.h)
  int channelFit = 0;          // channels every rank's blocks stay resident with (gpu_sharing.h)
  uint64_t commHash = 0;       // same on every rank of this communicator (derived from the unique id)
  uniccl::CommConfig config;
  std::atomic<uniccl::CommState> state{uniccl::CommState::Initializing};
  std::atomic<int> asyncError{ncclInProgress};   // ncclResult_t, read by ncclCommGetAsyncError

  std::unique_ptr<uniccl::Bootstrap> bootstrap;
  std::vector<uniccl::PeerInfo> peers;           // [nRanks], from the bootstrap allgather
  uniccl::topo::System topology;                 // hosts, GPUs, links, NICs, rank places (common/topo): rings and trees come from it

  // Abort: the host side (bootstrap waits) and a host-mapped flag every
  // device spin loop polls; ncclCommAbort sets both.
  std::atomic<uint32_t> hostAbort{0};
  volatile uint32_t* abortFlagHost = nullptr;
  uint32_t* abortFlagDev = nullptr;
  std::vector<void*> deviceAllocs;               // DevComm, channels, peers, ring ranks

  // Device-side view: DevComm + Channel[kMaxChannels] in device memory, with
  // a host mirror kept for wiring connections.
  uniccl::dev::DevComm devCommHost{};
  uniccl::dev::DevComm* devComm = nullptr;
  uniccl::dev::Channel channelsHost[uniccl::dev::kMaxChannels]{};
  uniccl::dev::Channel* channelsDev = nullptr;
  int nChannels = 0;           // channels wired (ring + p2p)
  int p2pChannels = 0;         // channels a p2p transfer is spread over
  bool allP2p = false;         // every ring neighbour is reached through P2P (tuning)
  bool programmaticLaunch = false;  // kernels launch with PDL (UNICCL_PDL, sm_90+; launch.cc)
  uniccl::Transports transports;  // connection resources per peer/channel

  // Enqueue machinery (driven by one thread at a time, as in NCCL).
  uniccl::EventPool donePool;                         // done events, recycled by the callback queue
  uniccl::EventCallbackQueue callbacks{&donePool};
  uint32_t launchesWithoutDoneEvent = 0;              // since the last done event (launch.cc)
  uniccl::WorkFifo workFifo;
  uniccl::gpu::Stream lastStream = nullptr;   // stream of the previous launch (ordering across streams)
  bool haveLastStream = false;
  uniccl::gpu::Event orderEvent = nullptr;    // recorded on lastStream when the next launch moves elsewhere
  uint64_t opCount = 0;                       // collectives issued (sequence numbers for logs)
  // The copy engines' side stream and the eager scratches of in-place
  // AlltoAll sends and PAT ReduceScatters (core/side_state.h): made with
  // the comm (nullptr only when that allocation failed), released by
  // releaseSideState at destroy and abort.
  std::unique_ptr<uniccl::SideState> sideState;
  // Timeout tracking of this comm's launches (common/watchdog; nullptr when
  // UNICCL_TIMEOUT=0). Declared after donePool/callbacks so it goes first.
  std::unique_ptr<uniccl::CommWatch> watch;
  // Dead-peer reporting: links to the ring neighbours (common/liveness;
  // nullptr with one rank). Stopped first at destroy and abort.
  std::unique_ptr<uniccl::CommLiveness> liveness;
  // Profiler plugin context (common/profiler; nullptr: no plugin or its init failed).
  std::unique_ptr<uniccl::ProfilerContext> profiler;
  // KernelCh events: the per-channel stamp rings the kernels write (host-mapped)
  // and their reader; nullptr unless the plugin asks for KernelCh.
  std::unique_ptr<uniccl::KernelChTracker> kernelCh;
  void* profRingsHost = nullptr;

  uniccl::TaskList tasks;                     // tasks of the open group (the group end's plan reads and clears them)
  bool inGroupList = false;                   // queued in the thread's group comm list
  // The storage of this communicator's last plan (core/comm_plan.h), which
  // the next group end takes and gives back: its vectors keep their
  // capacity, so steady-state launches do not allocate. Nothing reads it.
  std::unique_ptr<uniccl::CommPlan> planStorage;
  // What the tuning derived once from the transports and the cost model
  // (core/tuning.h).
  mutable uniccl::TuningCache tuningCache;

  std::thread initThread;                     // non-blocking init runs here
  // A failed init's last error text: a non-blocking init fails on
  // initThread, whose last error the caller cannot read, so
  // ncclCommGetAsyncError hands it to the caller's thread. Written before
  // asyncError is published.
  std::string initError;
  // Non-blocking ncclCommFinalize (config.blocking == 0) waits for the
  // launches here; ncclCommGetAsyncError answers ncclInProgress meanwhile.
  std::thread finalizeThread;

  uniccl::RedOpTable redOps;                  // ncclRedOpCreatePreMulSum ops of this comm
  uniccl::BufferRegistry registry;            // ncclCommRegister'ed buffers
  // Direct receives (core/direct_recv.h): the import service and importer
  // (none: no peer of this host in another process, or direct messages
  // off), and what the planner planned.
  uniccl::DirectRecvs direct;
  // Symmetric memory windows and the device window table
  // (common/symmetric/symmetric.h); created by the first registration,
  // released by releaseSymmetric() at destroy and abort.
  uniccl::SymmetricState* symmetric = nullptr;
  // Ranks per LSA team (comm_lsa.h): 0 until first asked once the
  // reach matrix is known, then fixed for the comm's life.
  mutable std::atomic<int> lsaSizeCache{0};

  // Device allocations whose buffers checkBuffer accepted lately (core/validate.h).
  uniccl::CheckedRanges checkedBuffers;
};
