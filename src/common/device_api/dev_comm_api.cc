// ncclDevCommCreate / ncclDevCommDestroy: device communicators.
//
// A device communicator is a plain struct (include/nccl_device/core.h,
// NCCL 2.28.9's layout) that kernels receive by value: ranks, the LSA team,
// the comm's device window table, and a resource window (a symmetric window
// of memory uniccl allocates) holding the LSA barriers and the buffers the
// requirements list asks for (resource_layout.h). Creation is collective,
// like registering a window; the ranks agree on success before any of them
// allocates, so a refusal on one rank (different requirements) fails all
// of them instead of leaving the others waiting.
//
// GIN (GPU-initiated networking: puts, signals, counters, barriers) goes
// through the proxy thread and the network (gin.h); multimem is not
// provided: asking for it is refused with ncclInvalidUsage
// (docs/device_api.md).
#include <cstring>

#include "common/api_export.h"
#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/comm_symmetric.h"
#include "common/core/group.h"
#include "common/core/validate.h"
#include "common/device_api/gin.h"
#include "common/device_api/resource_layout.h"
#include "common/device_guard.h"
#include "common/memory/mem_alloc.h"
#include "common/symmetric/symmetric.h"
#include "common/util/debug.h"
#include "nccl_device.h"

using namespace uniccl;

namespace {

// NCCL's reciprocal for division on the GPU without a divide: floor((2^32 -
// 1) / x), plus one for powers of two (so x = 1 gives 0, read as "divide by 1").
uint32_t reciprocal32(uint32_t x) { return 0xffffffffu / x + ((x & (x - 1)) == 0 ? 1u : 0u); }

// Every rank's verdict on the requirements: one failure fails all. GIN is
// collective (links to every rank): every rank must ask for the same.
[[nodiscard]] ncclResult_t agreeOnPlan(ncclComm* comm, ncclResult_t mine, const GinConfig& gin, bool wantGin) {
  struct Verdict {
    int32_t status, gin, contexts, signals, counters;
  };
  std::vector<Verdict> st(comm->nRanks);
  st[comm->rank] = Verdict{(int32_t)mine, wantGin ? 1 : 0, gin.contexts, gin.signals, gin.counters};
  UCHECK(comm->bootstrap->allGather(st.data(), sizeof(Verdict)));
  for (int r = 0; r < comm->nRanks; r++) {
    if (st[r].status == ncclSuccess) continue;
    if (mine == ncclSuccess)
      WARN("ncclDevCommCreate: rank %d refused the requirements (error %d); no device communicator is created", r,
           st[r].status);
    return mine != ncclSuccess ? mine : (ncclResult_t)st[r].status;
  }
  const Verdict& me = st[comm->rank];
  for (int r = 0; r < comm->nRanks; r++) {
    const Verdict& v = st[r];
    if (v.gin == me.gin && (!me.gin || (v.contexts == me.contexts && v.signals == me.signals &&
                                        v.counters == me.counters)))
      continue;
    WARN("ncclDevCommCreate: rank %d asks for GIN %d (%d contexts, %d signals, %d counters), rank %d for GIN %d (%d, "
         "%d, %d); every rank must ask for the same GIN resources", comm->rank, me.gin, me.contexts, me.signals,
         me.counters, r, v.gin, v.contexts, v.signals, v.counters);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

// argStatus: this rank's arguments were found bad already; it still takes
// part in the agreement so that the others fail with it.
[[nodiscard]] ncclResult_t createDevComm(ncclComm* comm, const ncclDevCommRequirements_t* reqs, ncclDevComm_t* outDevComm,
                           ncclResult_t argStatus) {
  DeviceGuard device;
  UCHECK(device.use(comm->gpuDev));
  const WindowComm windows = windowComm(comm);
  const LsaPlace& lsa = windows.lsa;
  ResourceLayout layout;
  ncclResult_t plan = argStatus != ncclSuccess ? argStatus
                                               : planResources(*reqs, comm->nRanks, lsa.size, lsa.self, &layout);
  GinConfig gin;
  if (plan == ncclSuccess && layout.gin) {
    int hint = reqs->ginContextCount;
    gin.contexts = hint < 1 ? 1 : hint > NCCL_GIN_MAX_CONTEXTS ? NCCL_GIN_MAX_CONTEXTS : hint;
    gin.signals = layout.ginSignalCount;
    gin.counters = layout.ginCounterCount;
  }
  UCHECK(agreeOnPlan(comm, plan, gin, plan == ncclSuccess && layout.gin));

  void* mem = nullptr;
  ncclResult_t res = memAllocPolled(&mem, layout.bytes);   // barriers and LL lines: peers poll them
  if (res == ncclSuccess) res = gpu::memset(mem, 0, layout.bytes);   // barriers start at epoch 0
  // The window registration is collective and fails on every rank if one fails.
  SymWindow* win = nullptr;
  ncclResult_t reg = registerWindow(windows, mem, layout.bytes, NCCL_WIN_DEFAULT, /*internal=*/true, res, &win);
  if (res == ncclSuccess) res = reg;
  ncclDevCommWindowTable* table = nullptr;
  if (res == ncclSuccess) res = windowTableHead(windows, &table);
  if (res != ncclSuccess) {
    if (win != nullptr) (void)deregisterWindow(windows, win);   // res is the failure to report
    if (mem != nullptr) ncclMemFree(mem);
    return res;
  }
  ncclDevComm_t d;
  memset(&d, 0, sizeof(d));
  GinState* ginState = nullptr;
  if (layout.gin) {
    // Collective too: every rank reaches this point (the plan and the window were agreed on).
    res = ginCreate(comm, gin, &d, &ginState);
    if (res != ncclSuccess) {
      (void)deregisterWindow(windows, win);   // res is the failure to report
      ncclMemFree(mem);
      return res;
    }
  }
  DevCommResources resources{win->dev, win, mem, nullptr};
  if (ginState != nullptr) resources.stopReaders = [ginState] { ginDestroy(ginState); };
  addDevCommResources(windows, resources);

  d.rank = comm->rank;
  d.nRanks = comm->nRanks;
  d.nRanks_rcp32 = reciprocal32((uint32_t)comm->nRanks);
  d.lsaRank = lsa.self;
  d.lsaSize = lsa.size;
  d.lsaSize_rcp32 = reciprocal32((uint32_t)lsa.size);
  d.windowTable = table;
  d.resourceWindow = win->dev;
  d.resourceWindow_inlined = win->host;
  d.lsaBarrier = layout.lsaBarrier;
  d.railGinBarrier = layout.railGinBarrier;
  for (const ResourceLayout::Placement& p : layout.placements) *p.out = p.handle;
  for (const ResourceLayout::GinPlacement& p : layout.ginSignals) *p.out = p.first;
  for (const ResourceLayout::GinPlacement& p : layout.ginCounters) *p.out = p.first;
  *outDevComm = d;
  INFO(NCCL_INIT, "Rank %d: device communicator: LSA team %d of %d, %zu bytes of resources, %d LSA barriers",
       comm->rank, lsa.self, lsa.size, layout.bytes, layout.lsaBarrier.nBarriers);
  return ncclSuccess;
}

}  // namespace

NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
         ncclDevComm_t* outDevComm);
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm) {
  const char* fn = "ncclDevCommCreate";
  UCHECK(groupErrCheck(checkCommUsable(comm, fn)));
  ncclResult_t args = ncclSuccess;
  if (reqs == nullptr) {
    WARN("%s: reqs is a null pointer", fn);
    args = ncclInvalidArgument;
  } else if (outDevComm == nullptr) {
    WARN("%s: outDevComm is a null pointer", fn);
    args = ncclInvalidArgument;
  }
  if (inGroup()) {
    // Runs at ncclGroupEnd (the requirements are read then), after this
    // comm's earlier deferred calls. A bad call fails the group and still
    // takes part, so the other ranks fail with it rather than wait for it.
    deferToGroupEnd([comm, reqs, outDevComm, args]() { return createDevComm(comm, reqs, outDevComm, args); }, comm);
    return args != ncclSuccess ? groupErrCheck(args) : ncclSuccess;
  }
  return createDevComm(comm, reqs, outDevComm, args);
}

NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, ncclDevComm_t const* devComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm) {
  const char* fn = "ncclDevCommDestroy";
  UCHECK(checkCommHandle(comm, fn));
  if (devComm == nullptr) {
    WARN("%s: devComm is a null pointer", fn);
    return ncclInvalidArgument;
  }
  DevCommResources r;
  if (!takeDevCommResources(comm->symmetric, devComm->resourceWindow, &r)) {
    WARN("%s: devComm %p was not made by ncclDevCommCreate on this communicator (rank %d), or is destroyed already",
         fn, (const void*)devComm, comm->rank);
    return ncclInvalidArgument;
  }
  DeviceGuard device;
  UCHECK(device.use(comm->gpuDev));
  if (r.stopReaders) r.stopReaders();   // GIN, before the windows its proxy poller reads
  ncclResult_t res = deregisterWindow(windowComm(comm), r.window);
  ncclResult_t freed = ncclMemFree(r.memory);
  return res != ncclSuccess ? res : freed;
}
