// The Device API's device-side functions (include/nccl_device/*.h, compiled
// for the CPU emulator with -DUNICCL_DEV_CPU) on emulated ranks: every rank
// is an emulated GPU in this process whose kernel runs through the emulated
// runtime (one OS thread per GPU thread), all ranks' kernels at once.
//
// Device communicators are built by hand (buildDevComms): each window of an
// LSA team is one flat address range of lsaSize slots 4 GiB apart (stride4G
// = 1, NCCL's layout), of which only the first bytes of each slot are
// mapped; resource buffers are placed from the requirement builders' sizes,
// with canary bytes around them that the device code must leave alone.
// With --real they come from the library instead (createDevComms):
// ncclCommInitAll over the emulated devices, a user window from ncclMemAlloc
// + ncclCommWindowRegister and the device communicators from
// ncclDevCommCreate (each in a group), LSA teams of 4 on 8 ranks through
// NCCL_LSA_TEAM_SIZE. The same kernels and checks run on both (DevComms);
// with --real the expected pointers come from the windows' flat layout,
// every rank must get the same handles, the resource window must start
// zeroed and its bytes outside the reserved buffers stay zero (in place of
// canaries), and after destroying, deregistering and freeing everything the
// emulator's usage counters are back where they started.
//
// Checked: window, resource and ncclSymPtr pointers address the right slot
// (and a store lands in the right rank's memory); the cooperative groups'
// ranks, sizes and syncs; LSA barriers under contention (several blocks,
// warps, spans and single threads of one rank each on their own barrier, many rounds of
// stores to peers before arrive and loads after wait, one rank late on
// purpose each round, sessions repeated within a kernel and across
// launches: the persisted epochs are checked); the LL all-to-all with
// elements of 1, 8, 12 and 20 bytes and odd counts (send, bcast, recv,
// recvUnrolled, recvReduce), across the 32-bit epoch wrap with stale
// lines planted where a bank must have been cleared.
//
//   emu_device_api_test --ranks=N [--real] [gtest flags]    (UNICCL_EMU_DEVICES >= N)
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/gpu.h"
#include "device/dev_types.h"
#include "emu_gpu.h"
#include "emu_runtime.h"
#include "nccl.h"
#include "nccl_device.h"

#ifndef UNICCL_DEVICE_API_EMU
#error "emu_device_api_test is compiled with -DUNICCL_DEV_CPU (the emulator's device code)"
#endif

extern "C" unsigned uniccl_emu_block_index(void);   // blockIdx.x (tests/emu/emu_runtime.cc)

namespace {

int gRanks = 2;

constexpr size_t k4G = size_t(1) << 32;

// ----------------------------------------------------------- flat windows
// lsaSize slots of 4 GiB of address space; the first `bytes` of each mapped.
struct FlatRegion {
  char* base = nullptr;
  int slots = 0;
  size_t bytes = 0;
  FlatRegion(int nSlots, size_t nBytes) : slots(nSlots), bytes((nBytes + 4095) & ~size_t(4095)) {
    void* va = mmap(nullptr, slots * k4G, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (va == MAP_FAILED) {
      perror("mmap (reserve)");
      abort();
    }
    base = static_cast<char*>(va);
    for (int i = 0; i < slots; i++) {
      void* p = mmap(slot(i), bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      if (p != slot(i)) {
        perror("mmap (slot)");
        abort();
      }
    }
  }
  ~FlatRegion() { munmap(base, slots * k4G); }
  char* slot(int i) const { return base + i * k4G; }
  FlatRegion(const FlatRegion&) = delete;
  FlatRegion& operator=(const FlatRegion&) = delete;
};

// ------------------------------------------------------ device communicators
constexpr unsigned char kCanary = 0xA5;

bool gReal = false;   // --real: communicators, windows and device communicators from the library

// What the kernels and checks use, however it was made: every rank's device
// communicator and user window, where each rank sees each LSA peer's slot of
// the user and resource windows, and the resource buffers the requirements
// reserved. Outside those buffers (up to resourceBytes) every byte of a
// rank's resource slot holds `fill` and must keep it.
struct DevComms {
  int nRanks = 0, lsaSize = 0;
  size_t windowBytes = 0;
  std::vector<ncclDevComm> comms;
  std::vector<ncclWindow_t> userWin;
  std::vector<char*> userBuf;   // the memory of rank r's user window, as rank r's own pointer to it
  std::vector<std::pair<size_t, size_t>> reserved;   // [begin, end) of each resource buffer in a rank's slot
  size_t resourceBytes = 0;
  unsigned char fill = kCanary;

  // Hand-built (buildDevComms): flat regions per LSA team, and what points to them.
  std::vector<std::unique_ptr<FlatRegion>> resources, windows;
  std::vector<ncclWindow_vidmem> resourceWinMem, userWinMem;
  std::vector<ncclDevCommWindowTable> tables;

  // From the library (createDevComms): torn down by the destructor.
  std::vector<ncclComm_t> nccl;
  std::vector<void*> mem;
  uniccl::emu::Usage usageBefore{};

  // Rank `rank`'s view of LSA peer p's slot.
  char* windowSlotAt(int rank, int p) const {
    if (nccl.empty()) return windows[rank / lsaSize]->slot(p);
    return userWin[rank]->lsaFlatBase + (size_t)p * ((size_t)userWin[rank]->stride4G << 32);
  }
  char* resourceSlotAt(int rank, int p) const {
    if (nccl.empty()) return resources[rank / lsaSize]->slot(p);
    const ncclWindow_vidmem& w = comms[rank].resourceWindow_inlined;
    return w.lsaFlatBase + (size_t)p * ((size_t)w.stride4G << 32);
  }
  char* resourceSlot(int rank) const { return resourceSlotAt(rank, rank % lsaSize); }

  DevComms() = default;
  DevComms(const DevComms&) = delete;
  DevComms& operator=(const DevComms&) = delete;
  ~DevComms();
};

// Stands in for ncclDevCommCreate (createDevComms below uses the real one):
// every rank's ncclDevComm for nRanks ranks in LSA teams of
// lsaSize consecutive ranks, with reqs' LSA barriers (lsaBarrierCount, in
// comm.lsaBarrier) and resource buffers (resourceRequirementsList, handles
// written through outBufferHandle) placed in a resource window, plus one user
// window of windowBytes per rank (ncclWindow_t userWin[r], also in the
// window table). Buffers are 128-byte aligned, zeroed, and fenced by at
// least 128 canary bytes on each side.
std::unique_ptr<DevComms> buildDevComms(int nRanks, int lsaSize, const ncclDevCommRequirements& reqs,
                                        size_t windowBytes) {
  auto d = std::make_unique<DevComms>();
  d->nRanks = nRanks;
  d->lsaSize = lsaSize;
  d->windowBytes = windowBytes;
  ncclTeam lsaTeam{lsaSize, 0, 1};

  std::vector<ncclDevResourceRequirements> all;
  ncclLsaBarrierHandle lsaBarrier{};
  if (reqs.lsaBarrierCount > 0) {
    ncclDevResourceRequirements r;
    EXPECT_EQ(ncclLsaBarrierCreateRequirement(lsaTeam, reqs.lsaBarrierCount, &lsaBarrier, &r), ncclSuccess);
    all.push_back(r);
  }
  for (ncclDevResourceRequirements* r = reqs.resourceRequirementsList; r != nullptr; r = r->next) all.push_back(*r);
  size_t offset = 128;   // canary before the first buffer
  for (ncclDevResourceRequirements& r : all) {
    size_t align = r.bufferAlign < 128 ? 128 : r.bufferAlign;
    offset = (offset + align - 1) / align * align;
    if (r.outBufferHandle) *r.outBufferHandle = (ncclDevResourceHandle)(offset / 128);
    d->reserved.emplace_back(offset, offset + r.bufferSize);
    offset += r.bufferSize + 128;   // canary after each
  }
  d->resourceBytes = offset;
  d->fill = kCanary;

  for (int t = 0; t < nRanks / lsaSize; t++) {
    d->resources.push_back(std::make_unique<FlatRegion>(lsaSize, d->resourceBytes));
    d->windows.push_back(std::make_unique<FlatRegion>(lsaSize, windowBytes));
  }
  d->resourceWinMem.resize(nRanks);
  d->userWinMem.resize(nRanks);
  d->userWin.resize(nRanks);
  d->userBuf.resize(nRanks);
  d->tables.resize(nRanks);
  d->comms.resize(nRanks);
  for (int r = 0; r < nRanks; r++) {
    char* res = d->resourceSlot(r);
    memset(res, kCanary, d->resourceBytes);
    for (auto& b : d->reserved) memset(res + b.first, 0, b.second - b.first);

    ncclWindow_vidmem w{};
    w.lsaFlatBase = d->resources[r / lsaSize]->base;
    w.lsaRank = r % lsaSize;
    w.worldRank = r;
    w.stride4G = 1;
    d->resourceWinMem[r] = w;
    w.lsaFlatBase = d->windows[r / lsaSize]->base;
    d->userWinMem[r] = w;
    d->userWin[r] = &d->userWinMem[r];
    d->userBuf[r] = d->windowSlotAt(r, r % lsaSize);

    ncclDevCommWindowTable& tab = d->tables[r];
    memset(&tab, 0, sizeof(tab));
    tab.entries[0].base = (uintptr_t)d->userBuf[r];
    tab.entries[0].size = windowBytes;
    tab.entries[0].window = d->userWin[r];

    ncclDevComm c{};
    c.rank = r;
    c.nRanks = nRanks;
    c.nRanks_rcp32 = UINT32_MAX / (uint32_t)nRanks + ((nRanks & (nRanks - 1)) == 0);
    c.lsaRank = r % lsaSize;
    c.lsaSize = lsaSize;
    c.lsaSize_rcp32 = UINT32_MAX / (uint32_t)lsaSize + ((lsaSize & (lsaSize - 1)) == 0);
    c.windowTable = &d->tables[r];
    c.resourceWindow = &d->resourceWinMem[r];
    c.resourceWindow_inlined = d->resourceWinMem[r];
    c.lsaBarrier = lsaBarrier;
    d->comms[r] = c;
  }
  return d;
}

// Library calls while building: a failure ends the test program (nothing
// after it could run on what was not made).
void mustSucceed(ncclResult_t res, const char* what) {
  if (res == ncclSuccess) return;
  fprintf(stderr, "FATAL: %s: %s (%s)\n", what, ncclGetErrorString(res), ncclGetLastError(nullptr));
  abort();
}

// The same from the library (--real): ncclCommInitAll over emulated devices
// 0..nRanks-1, a user window of windowBytes per rank from ncclMemAlloc and
// ncclCommWindowRegister (in a group), and the device communicators from
// ncclDevCommCreate (in a group) with reqs; LSA teams of lsaSize through
// NCCL_LSA_TEAM_SIZE. Each rank gets its own copy of the requirements list
// (the handles it writes are compared across ranks, then written through
// reqs' outBufferHandle). The library's resource window has no canaries:
// it is zeroed whole pages, so the fill checked outside the buffers is 0,
// up to the end of the page holding the last one; that every byte the
// requirements reserve starts zeroed is checked here.
std::unique_ptr<DevComms> createDevComms(int nRanks, int lsaSize, const ncclDevCommRequirements& reqs,
                                         size_t windowBytes) {
  auto d = std::make_unique<DevComms>();
  d->nRanks = nRanks;
  d->lsaSize = lsaSize;
  d->windowBytes = windowBytes;
  d->usageBefore = uniccl::emu::usage();
  // Set before anything is made: a window's LSA team is the one of its
  // registration, and must be the device communicator's.
  if (lsaSize != nRanks) setenv("NCCL_LSA_TEAM_SIZE", std::to_string(lsaSize).c_str(), 1);
  d->nccl.assign(nRanks, nullptr);
  std::vector<int> devs(nRanks);
  for (int r = 0; r < nRanks; r++) devs[r] = r;
  mustSucceed(ncclCommInitAll(d->nccl.data(), nRanks, devs.data()), "ncclCommInitAll");

  d->mem.assign(nRanks, nullptr);
  d->userWin.assign(nRanks, nullptr);
  d->userBuf.resize(nRanks);
  for (int r = 0; r < nRanks; r++) {
    mustSucceed(uniccl::gpu::setDevice(r), "setDevice");
    mustSucceed(ncclMemAlloc(&d->mem[r], windowBytes), "ncclMemAlloc");
    memset(d->mem[r], 0, windowBytes);   // emulated device memory is host memory
    d->userBuf[r] = static_cast<char*>(d->mem[r]);
  }
  mustSucceed(ncclGroupStart(), "ncclGroupStart");
  for (int r = 0; r < nRanks; r++)
    mustSucceed(ncclCommWindowRegister(d->nccl[r], d->mem[r], windowBytes, &d->userWin[r], NCCL_WIN_COLL_SYMMETRIC),
                "ncclCommWindowRegister");
  mustSucceed(ncclGroupEnd(), "ncclGroupEnd (windows)");

  std::vector<ncclDevResourceRequirements*> orig;
  for (ncclDevResourceRequirements* r = reqs.resourceRequirementsList; r != nullptr; r = r->next) orig.push_back(r);
  const size_t n = orig.size();
  std::vector<std::vector<ncclDevResourceRequirements>> lists(nRanks, std::vector<ncclDevResourceRequirements>(n));
  std::vector<std::vector<ncclDevResourceHandle>> handles(nRanks, std::vector<ncclDevResourceHandle>(n, UINT32_MAX));
  std::vector<ncclDevCommRequirements> rankReqs(nRanks, reqs);
  for (int r = 0; r < nRanks; r++) {
    for (size_t i = 0; i < n; i++) {
      lists[r][i] = *orig[i];
      lists[r][i].next = i + 1 < n ? &lists[r][i + 1] : nullptr;
      lists[r][i].outBufferHandle = &handles[r][i];
    }
    rankReqs[r].resourceRequirementsList = n > 0 ? &lists[r][0] : nullptr;
  }
  d->comms.resize(nRanks);
  mustSucceed(ncclGroupStart(), "ncclGroupStart");
  for (int r = 0; r < nRanks; r++)
    mustSucceed(ncclDevCommCreate(d->nccl[r], &rankReqs[r], &d->comms[r]), "ncclDevCommCreate");
  mustSucceed(ncclGroupEnd(), "ncclGroupEnd (device communicators)");
  unsetenv("NCCL_LSA_TEAM_SIZE");

  for (size_t i = 0; i < n; i++) {
    for (int r = 1; r < nRanks; r++) EXPECT_EQ(handles[r][i], handles[0][i]) << "requirement " << i << ", rank " << r;
    if (orig[i]->outBufferHandle != nullptr) *orig[i]->outBufferHandle = handles[0][i];
  }
  const ncclLsaBarrierHandle& bar = d->comms[0].lsaBarrier;
  EXPECT_EQ(bar.nBarriers, reqs.lsaBarrierCount);
  if (bar.nBarriers > 0) {
    ncclLsaBarrierHandle h;
    ncclDevResourceRequirements rr;
    EXPECT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam{lsaSize, 0, 1}, bar.nBarriers, &h, &rr), ncclSuccess);
    d->reserved.emplace_back((size_t)bar.bufHandle * 128, (size_t)bar.bufHandle * 128 + rr.bufferSize);
  }
  for (size_t i = 0; i < n; i++)
    d->reserved.emplace_back((size_t)handles[0][i] * 128, (size_t)handles[0][i] * 128 + orig[i]->bufferSize);
  std::sort(d->reserved.begin(), d->reserved.end());
  size_t end = 0;
  for (auto& b : d->reserved) {
    EXPECT_GE(b.first, end) << "resource buffers overlap";
    end = std::max(end, b.second);
  }
  d->resourceBytes = (end + 4095) / 4096 * 4096;
  d->fill = 0;

  for (int r = 0; r < nRanks; r++) {
    SCOPED_TRACE("rank " + std::to_string(r) + " from ncclDevCommCreate");
    const ncclDevComm& c = d->comms[r];
    EXPECT_EQ(c.rank, r);
    EXPECT_EQ(c.nRanks, nRanks);
    EXPECT_EQ(c.lsaRank, r % lsaSize);
    EXPECT_EQ(c.lsaSize, lsaSize);
    EXPECT_EQ(c.lsaBarrier.bufHandle, bar.bufHandle);
    EXPECT_EQ(c.lsaBarrier.nBarriers, bar.nBarriers);
    EXPECT_EQ(d->userWin[r]->lsaRank, r % lsaSize);
    EXPECT_EQ(d->userWin[r]->worldRank, r);
    // Every byte of the resource slot (buffers and the gaps between them) starts zeroed.
    const unsigned char* res = (const unsigned char*)d->resourceSlot(r);
    size_t nonzero = 0;
    for (size_t i = 0; i < d->resourceBytes; i++) nonzero += res[i] != 0;
    EXPECT_EQ(nonzero, 0u) << "resource bytes not zeroed by ncclDevCommCreate";
  }
  return d;
}

DevComms::~DevComms() {
  if (nccl.empty()) return;
  for (int r = 0; r < nRanks; r++) {
    EXPECT_EQ(ncclDevCommDestroy(nccl[r], &comms[r]), ncclSuccess) << "rank " << r;
    EXPECT_EQ(ncclCommWindowDeregister(nccl[r], userWin[r]), ncclSuccess) << "rank " << r;
  }
  for (int r = 0; r < nRanks; r++) {
    EXPECT_EQ(uniccl::gpu::setDevice(r), ncclSuccess);
    EXPECT_EQ(ncclMemFree(mem[r]), ncclSuccess) << "rank " << r;
  }
  for (int r = 0; r < nRanks; r++) EXPECT_EQ(ncclCommDestroy(nccl[r]), ncclSuccess) << "rank " << r;
  // The emulated runtime's live objects are back where they were.
  const uniccl::emu::Usage u = uniccl::emu::usage(), b = usageBefore;
  EXPECT_EQ(u.deviceAllocs, b.deviceAllocs);
  EXPECT_EQ(u.deviceBytes, b.deviceBytes);
  EXPECT_EQ(u.hostAllocs, b.hostAllocs);
  EXPECT_EQ(u.registrations, b.registrations);
  EXPECT_EQ(u.streams, b.streams);
  EXPECT_EQ(u.events, b.events);
  EXPECT_EQ(u.ipcOpens, b.ipcOpens);
  EXPECT_EQ(u.physAllocs, b.physAllocs);
  EXPECT_EQ(u.physBytes, b.physBytes);
  EXPECT_EQ(u.mappings, b.mappings);
  EXPECT_EQ(u.reservations, b.reservations);
}

// The device communicators the tests run on: hand-built, or the library's with --real.
std::unique_ptr<DevComms> makeDevComms(int nRanks, int lsaSize, const ncclDevCommRequirements& reqs,
                                       size_t windowBytes) {
  return gReal ? createDevComms(nRanks, lsaSize, reqs, windowBytes) : buildDevComms(nRanks, lsaSize, reqs, windowBytes);
}

// Bytes outside every reserved buffer that changed: the device code wrote
// where no requirement reserved memory.
size_t canaryDamage(const DevComms& d) {
  size_t bad = 0;
  for (int r = 0; r < d.nRanks; r++) {
    const unsigned char* res = (const unsigned char*)d.resourceSlot(r);
    size_t at = 0;
    for (auto& b : d.reserved) {
      for (; at < b.first; at++) bad += res[at] != d.fill;
      at = b.second;
    }
    for (; at < d.resourceBytes; at++) bad += res[at] != d.fill;
  }
  return bad;
}

// ------------------------------------------------------------- launching
// An emulated launch passes one dev::KernelArgs by value; these kernels
// find their arguments through a pointer stored at its start.
using Kernel = void (*)(uniccl::dev::KernelArgs);

template <typename T>
T* argsOf(const uniccl::dev::KernelArgs& ka) {
  T* p;
  memcpy(&p, &ka, sizeof(p));
  return p;
}

// Launches kernel on every rank's emulated GPU (rank r = device r), rank r
// with args[r], all at once, and waits for all of them.
template <typename A>
void launchAll(Kernel kernel, unsigned grid, unsigned block, std::vector<A>& args) {
  std::vector<uniccl::gpu::Stream> streams(args.size());
  for (size_t r = 0; r < args.size(); r++) {
    ASSERT_EQ(uniccl::gpu::setDevice((int)r), ncclSuccess);
    ASSERT_EQ(uniccl::gpu::streamCreate(&streams[r]), ncclSuccess);
    uniccl::dev::KernelArgs ka;
    memset(&ka, 0, sizeof(ka));
    A* p = &args[r];
    memcpy(&ka, &p, sizeof(p));
    void* argv[] = {&ka};
    uniccl::gpu::LaunchConfig cfg;
    cfg.gridX = grid;
    cfg.blockX = block;
    cfg.stream = streams[r];
    ASSERT_EQ(uniccl::gpu::launchKernel((const void*)kernel, cfg, argv, nullptr), ncclSuccess);
  }
  for (size_t r = 0; r < args.size(); r++) {
    ASSERT_EQ(uniccl::gpu::setDevice((int)r), ncclSuccess);
    ASSERT_EQ(uniccl::gpu::streamSynchronize(streams[r]), ncclSuccess);
    ASSERT_EQ(uniccl::gpu::streamDestroy(streams[r]), ncclSuccess);
  }
}

int waveSize() { return (int)uniccl_emu_wave_size(); }

// Device-side checks: counted; failures counted, the first few described.
struct Errors {
  std::atomic<long> checks{0};
  std::atomic<int> count{0};
  bool check(bool ok) {
    checks.fetch_add(1, std::memory_order_relaxed);
    return ok;
  }
  char first[4][160] = {};
  void add(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
};
void Errors::add(const char* fmt, ...) {
  int n = count.fetch_add(1);
  if (n < 4) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(first[n], sizeof(first[n]), fmt, ap);
    va_end(ap);
  }
}
std::string describe(const Errors& e) {
  std::string s = std::to_string(e.count.load()) + " of " + std::to_string(e.checks.load()) + " device-side checks failed";
  for (int i = 0; i < 4 && i < e.count.load(); i++) s += std::string("\n  ") + e.first[i];
  return s;
}

void expectNoFailures(const Errors& e) {
  EXPECT_GT(e.checks.load(), 0);
  EXPECT_EQ(e.count.load(), 0) << describe(e);
  printf("  %ld device-side checks, %d failed\n", e.checks.load(), e.count.load());
}

// LSA team configurations for nRanks: one team of all, and for 8 ranks two of 4.
std::vector<int> lsaSizes() {
  std::vector<int> v{gRanks};
  if (gRanks == 8) v.push_back(4);
  return v;
}

// =================================================================== pointers
struct PtrArgs {
  const ncclDevComm* comm;
  ncclWindow_t win;
  ncclDevResourceHandle res;
  // Out: pointers computed on the device, per peer (LSA rank or world rank).
  void* local;
  void* lsa[8];
  void* peerWorld[8];   // ncclGetPeerPointer(w, off, worldRank)
  void* peerLsaTeam[8];
  void* resLocal;
  void* resLsa[8];
  void* resPeer[8];
  void* symLocal;
  void* symPeer[8];
  void* resBuf;
  char* userBuf;        // the window's memory as this rank's pointer (what the window table lists)
  size_t windowBytes;
  ncclWindow_t found, pastEnd, notFound;
};

constexpr size_t kPtrOffset = 4096 + 24;

void ptrKernel(uniccl::dev::KernelArgs ka) {
  PtrArgs* a = argsOf<PtrArgs>(ka);
  const ncclDevComm& comm = *a->comm;
  ncclCoopCta cta;
  ncclTeam lsa = ncclTeamLsa(comm);
  if (cta.thread_rank() == 0) {
    a->local = ncclGetLocalPointer(a->win, kPtrOffset);
    a->resLocal = ncclGetResourceBufferLocalPointer(comm, a->res);
    ncclSymPtr<uint64_t> sym(a->win, 8);
    sym += 2;   // 24 bytes in
    a->symLocal = sym.localPtr();
    a->resBuf = ncclGetResourceBuffer(comm, a->res).lsaPtr(comm.lsaRank);
    for (int p = 0; p < lsa.nRanks; p++) {
      int world = ncclTeamRankToWorld(comm, lsa, p);
      a->lsa[p] = ncclGetLsaPointer(a->win, kPtrOffset, p);
      a->peerWorld[p] = ncclGetPeerPointer(a->win, kPtrOffset, world);
      a->peerLsaTeam[p] = ncclGetPeerPointer(a->win, kPtrOffset, lsa, p);
      a->resLsa[p] = ncclGetResourceBufferLsaPointer(comm, a->res, p);
      a->resPeer[p] = ncclGetResourceBufferPeerPointer(comm, a->res, lsa, p);
      a->symPeer[p] = (sym - 1).peerPtr(lsa, p);   // 16 bytes in
    }
    a->found = ncclFindWindow(cta, comm, a->userBuf + 100);
    a->pastEnd = ncclFindWindow(cta, comm, a->userBuf + a->windowBytes);
    a->notFound = ncclFindWindow(cta, comm, (const void*)a);   // host memory, in no window
  }
  cta.sync();
  // Every thread stores one word into each LSA peer's window (by world
  // rank): at [rank][thread] of the peer's table of senders.
  for (int p = 0; p < lsa.nRanks; p++) {
    int world = ncclTeamRankToWorld(comm, lsa, p);
    uint32_t* dst = (uint32_t*)ncclGetPeerPointer(a->win, 0, world);
    dst[comm.rank * 64 + cta.thread_rank()] = 0x1000000u * (comm.rank + 1) + 0x100u * (world + 1) + cta.thread_rank();
  }
}

TEST(DeviceApiPointers, WindowsResourcesSymPtrAndStores) {
  for (int lsaSize : lsaSizes()) {
    SCOPED_TRACE("LSA teams of " + std::to_string(lsaSize));
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    ncclDevResourceHandle res = 0;
    ncclDevResourceRequirements rr{};
    rr.bufferSize = 1000;
    rr.bufferAlign = 256;
    rr.outBufferHandle = &res;
    reqs.resourceRequirementsList = &rr;
    reqs.lsaBarrierCount = 3;   // so that `res` is not the first buffer
    auto d = makeDevComms(gRanks, lsaSize, reqs, 1 << 20);
    std::vector<PtrArgs> args(gRanks);
    for (int r = 0; r < gRanks; r++) {
      args[r] = PtrArgs{};
      args[r].comm = &d->comms[r];
      args[r].win = d->userWin[r];
      args[r].userBuf = d->userBuf[r];
      args[r].windowBytes = d->windowBytes;
      args[r].res = res;
    }
    ASSERT_NE(res, 0u);
    launchAll(ptrKernel, 1, (unsigned)waveSize(), args);
    for (int r = 0; r < gRanks; r++) {
      SCOPED_TRACE("rank " + std::to_string(r));
      const PtrArgs& a = args[r];
      const int team0 = r - r % lsaSize, me = r % lsaSize;
      const size_t resOff = (size_t)res * 128;
      EXPECT_EQ(a.local, d->windowSlotAt(r, me) + kPtrOffset);
      EXPECT_EQ(a.resLocal, d->resourceSlotAt(r, me) + resOff);
      EXPECT_EQ(a.symLocal, d->windowSlotAt(r, me) + 24);
      EXPECT_EQ(a.resBuf, a.resLocal);
      for (int p = 0; p < lsaSize; p++) {
        EXPECT_EQ(a.lsa[p], d->windowSlotAt(r, p) + kPtrOffset) << "LSA peer " << p;
        EXPECT_EQ(a.peerWorld[p], a.lsa[p]) << "world peer " << team0 + p;
        EXPECT_EQ(a.peerLsaTeam[p], a.lsa[p]) << p;
        EXPECT_EQ(a.resLsa[p], d->resourceSlotAt(r, p) + resOff) << p;
        EXPECT_EQ(a.resPeer[p], a.resLsa[p]) << p;
        EXPECT_EQ(a.symPeer[p], d->windowSlotAt(r, p) + 16) << p;
      }
      EXPECT_EQ(a.found, d->userWin[r]);
      EXPECT_NE(a.pastEnd, d->userWin[r]);
      EXPECT_EQ(a.notFound, nullptr);
      // What the LSA peers stored here, each in its own row.
      const uint32_t* got = (const uint32_t*)d->userBuf[r];   // the rank's own memory
      for (int s = team0; s < team0 + lsaSize; s++)
        for (int t = 0; t < waveSize(); t++)
          ASSERT_EQ(got[s * 64 + t], 0x1000000u * (s + 1) + 0x100u * (r + 1) + t) << "from rank " << s << " thread " << t;
    }
    EXPECT_EQ(canaryDamage(*d), 0u);
  }
}

// ======================================================== cooperative groups
struct CoopArgs {
  int* out;        // [block][thread][field]
  int* scratch;    // [block][thread]
  Errors* errors;
};
enum CoopField {
  kCta, kCtaSize, kWarp, kWarpSize, kThread, kThreadSize, kTile8, kTile8Size, kTile32, kSpan, kSpanSize, kNumFields
};
constexpr int kCoopRounds = 20;

// Every group member writes its slot, the group syncs, each member reads its
// next neighbour's (in group rank order), the group syncs again.
template <typename Coop>
void exchange(Coop coop, int* scratch, int base, int tid, Errors* e, const char* what) {
  for (int k = 0; k < kCoopRounds; k++) {
    __atomic_store_n(&scratch[tid], k * 10000 + tid, __ATOMIC_RELAXED);
    coop.sync();
    int next = base + (coop.thread_rank() + 1) % coop.size();
    int got = __atomic_load_n(&scratch[next], __ATOMIC_RELAXED);
    if (!e->check(got == k * 10000 + next))
      e->add("%s: thread %d round %d read %d from thread %d", what, tid, k, got, next);
    coop.sync();
  }
}

void coopKernel(uniccl::dev::KernelArgs ka) {
  CoopArgs* a = argsOf<CoopArgs>(ka);
  ncclCoopCta cta;
  const int tid = cta.thread_rank(), nThreads = cta.size(), block = (int)uniccl_emu_block_index();
  int* out = a->out + ((size_t)block * nThreads + tid) * kNumFields;
  int* scratch = a->scratch + (size_t)block * nThreads;
  ncclCoopWarp warp;
  ncclCoopThread thread;
  ncclCoopTile<8> tile8;
  ncclCoopTile<32> tile32;
  out[kCta] = cta.thread_rank();
  out[kCtaSize] = cta.num_threads();
  out[kWarp] = warp.thread_rank();
  out[kWarpSize] = warp.size();
  out[kThread] = thread.thread_rank();
  out[kThreadSize] = thread.num_threads();
  out[kTile8] = tile8.thread_rank();
  out[kTile8Size] = tile8.size() + 100 * tile8.num_threads();
  out[kTile32] = tile32.thread_rank();
  // Spans: warp 0 alone (id 2), the other warps together (id 5).
  const int w = tid / warp.size();
  ncclCoopWarpSpan span = w == 0 ? ncclCoopWarpSpan(0, 1, 2) : ncclCoopWarpSpan(1, nThreads / warp.size() - 1, 5);
  out[kSpan] = span.thread_rank();
  out[kSpanSize] = span.num_threads();
  static_assert(ncclCoopIsThread(ncclCoopThread()) && !ncclCoopIsThread(ncclCoopCta()), "");
  static_assert(ncclCoopWithinWarp(ncclCoopTile<8>()) && !ncclCoopWithinWarp(ncclCoopCta()), "");

  exchange(cta, scratch, 0, tid, a->errors, "cta");
  exchange(warp, scratch, tid - warp.thread_rank(), tid, a->errors, "warp");
  exchange(tile8, scratch, tid - tile8.thread_rank(), tid, a->errors, "tile8");
  exchange(tile32, scratch, tid - tile32.thread_rank(), tid, a->errors, "tile32");
  exchange(span, scratch, tid - span.thread_rank(), tid, a->errors, "span");
}

TEST(DeviceApiCoop, RanksSizesAndSyncs) {
  const int wave = waveSize();
  const int nThreads = 3 * wave, nBlocks = 2;
  std::vector<int> out((size_t)nBlocks * nThreads * kNumFields, -1), scratch((size_t)nBlocks * nThreads, -1);
  Errors errors;
  std::vector<CoopArgs> args{CoopArgs{out.data(), scratch.data(), &errors}};
  launchAll(coopKernel, nBlocks, nThreads, args);
  expectNoFailures(errors);
  for (int b = 0; b < nBlocks; b++) {
    for (int t = 0; t < nThreads; t++) {
      const int* o = &out[((size_t)b * nThreads + t) * kNumFields];
      SCOPED_TRACE("block " + std::to_string(b) + " thread " + std::to_string(t));
      EXPECT_EQ(o[kCta], t);
      EXPECT_EQ(o[kCtaSize], nThreads);
      EXPECT_EQ(o[kWarp], t % wave);
      EXPECT_EQ(o[kWarpSize], wave);
      EXPECT_EQ(o[kThread], 0);
      EXPECT_EQ(o[kThreadSize], 1);
      EXPECT_EQ(o[kTile8], t % 8);
      EXPECT_EQ(o[kTile8Size], 808);
      EXPECT_EQ(o[kTile32], t % 32);
      EXPECT_EQ(o[kSpan], t < wave ? t : t - wave);
      EXPECT_EQ(o[kSpanSize], t < wave ? wave : 2 * wave);
    }
  }
}

// ============================================================== LSA barrier
// Each round every group stores a value for round k into each LSA peer's
// window (row [k % 2][barrier][from]), one rank late on purpose, then
// passes the barrier; after it, reads what every peer stored for round k.
// Two buffers by round parity: a peer passes round k + 1's barrier only
// after every rank finished reading round k.
enum BarMode { kBarCta, kBarWarp, kBarSpan, kBarThread, kNumBarModes };
const char* const kBarModeName[] = {"cta", "warp", "span", "thread"};

struct BarArgs {
  const ncclDevComm* comm;
  ncclWindow_t win;
  ncclLsaBarrierHandle warpBarriers;   // a second barrier resource (explicit handle)
  BarMode mode;
  int rounds, sessions, launch;
  Errors* errors;
};

constexpr int kMaxBarriers = 32;

uint64_t barValue(int round, int from, int barrier, int launch) {
  return ((uint64_t)(launch * 1000 + round + 1) << 32) | ((uint64_t)from << 16) | (uint64_t)barrier;
}

template <typename Coop>
void barrierRounds(Coop coop, const BarArgs& a, int barrier, int round0, int nRounds,
                   ncclLsaBarrierSession<Coop>& bar) {
  const ncclDevComm& comm = *a.comm;
  ncclTeam lsa = ncclTeamLsa(comm);
  for (int k = round0; k < round0 + nRounds; k++) {
    // One rank writes late (after its peers already wait).
    if (comm.rank == k % comm.nRanks && barrier == k % 3) usleep(300);
    for (int p = coop.thread_rank(); p < lsa.nRanks; p += coop.size()) {
      uint64_t* row = (uint64_t*)ncclGetPeerPointer(a.win, 0, lsa, p) + ((k % 2) * kMaxBarriers + barrier) * 8;
      __atomic_store_n(&row[lsa.rank], barValue(k, lsa.rank, barrier, a.launch), __ATOMIC_RELAXED);
    }
    if (k % 3 == 0) {
      bar.sync(coop, cuda::memory_order_acq_rel);
    } else if (k % 3 == 1) {
      bar.arrive(coop, cuda::memory_order_release);
      bar.wait(coop, cuda::memory_order_acquire);
    } else {
      bar.sync(coop, cuda::memory_order_seq_cst);
    }
    const uint64_t* mine = (const uint64_t*)ncclGetLocalPointer(a.win, 0) + ((k % 2) * kMaxBarriers + barrier) * 8;
    for (int p = coop.thread_rank(); p < lsa.nRanks; p += coop.size()) {
      uint64_t got = __atomic_load_n(&mine[p], __ATOMIC_RELAXED), want = barValue(k, p, barrier, a.launch);
      if (!a.errors->check(got == want))
        a.errors->add("rank %d %s barrier %d round %d: from LSA rank %d read %#llx, want %#llx", comm.rank,
                      kBarModeName[a.mode], barrier, k, p, (unsigned long long)got, (unsigned long long)want);
    }
  }
}

void barrierKernel(uniccl::dev::KernelArgs ka) {
  const BarArgs& a = *argsOf<BarArgs>(ka);
  const ncclDevComm& comm = *a.comm;
  const int block = (int)uniccl_emu_block_index();
  ncclCoopCta cta;
  const int perRound = a.rounds / a.sessions;
  for (int s = 0; s < a.sessions; s++) {
    if (a.mode == kBarCta) {
      // The device communicator's own LSA barriers, through ncclBarrierSession.
      ncclBarrierSession<ncclCoopCta> bar(cta, ncclTeamTagLsa(), comm, block);
      barrierRounds(cta, a, block, s * perRound, perRound, bar.lsaBarrier());
      if (s + 1 == a.sessions) bar.sync(cta, cuda::memory_order_relaxed, ncclGinFenceLevel::Relaxed);
    } else if (a.mode == kBarWarp) {
      ncclCoopWarp warp;
      const int warps = cta.size() / warp.size(), index = block * warps + cta.thread_rank() / warp.size();
      ncclLsaBarrierSession<ncclCoopWarp> bar(warp, comm, ncclTeamLsa(comm), a.warpBarriers, index);
      barrierRounds(warp, a, index, s * perRound, perRound, bar);
    } else if (a.mode == kBarSpan) {
      // The whole block as one span (id 7).
      ncclCoopWarpSpan span(0, cta.size() / ncclCoopWarp().size(), 7);
      ncclLsaBarrierSession<ncclCoopWarpSpan> bar(span, comm, ncclTeamTagLsa(), block);
      barrierRounds(span, a, block, s * perRound, perRound, bar);
    } else {
      // Lane 0 of each warp alone, on the warps' barriers.
      ncclCoopWarp warp;
      if (warp.thread_rank() != 0) continue;
      const int warps = cta.size() / warp.size(), index = block * warps + cta.thread_rank() / warp.size();
      ncclLsaBarrierSession<ncclCoopThread> bar(ncclCoopThread(), comm, ncclTeamLsa(comm), a.warpBarriers, index);
      barrierRounds(ncclCoopThread(), a, index, s * perRound, perRound, bar);
    }
  }
}

TEST(DeviceApiLsaBarrier, StoresBeforeArriveAreSeenAfterWait) {
  const int wave = waveSize();
  const int nBlocks = gRanks <= 3 ? 3 : 2, warpsPerBlock = 2, nThreads = warpsPerBlock * wave;
  const int rounds = 24, sessions = 3, launches = 2;
  for (int lsaSize : lsaSizes()) {
    for (int mode = 0; mode < kNumBarModes; mode++) {
      SCOPED_TRACE(std::string("mode ") + kBarModeName[mode] + ", LSA teams of " + std::to_string(lsaSize));
      ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
      reqs.lsaBarrierCount = nBlocks;
      ncclLsaBarrierHandle warpBarriers{};
      ncclDevResourceRequirements rr{};
      ASSERT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam{lsaSize, 0, 1}, nBlocks * warpsPerBlock, &warpBarriers, &rr),
                ncclSuccess);
      reqs.resourceRequirementsList = &rr;
      auto d = makeDevComms(gRanks, lsaSize, reqs, 2 * kMaxBarriers * 8 * sizeof(uint64_t));
      Errors errors;
      for (int l = 0; l < launches; l++) {
        std::vector<BarArgs> args(gRanks);
        for (int r = 0; r < gRanks; r++)
          args[r] = BarArgs{&d->comms[r], d->userWin[r], warpBarriers, (BarMode)mode, rounds, sessions, l, &errors};
        launchAll(barrierKernel, nBlocks, nThreads, args);
      }
      expectNoFailures(errors);
      // The persisted state, in NCCL's layout: each barrier completed every
      // round of every launch (+1: the Cta mode's final sync).
      const bool warpMode = mode == kBarWarp || mode == kBarThread;
      const ncclLsaBarrierHandle h = warpMode ? warpBarriers : d->comms[0].lsaBarrier;
      const uint32_t want = rounds * launches + (mode == kBarCta ? launches : 0);
      for (int r = 0; r < gRanks; r++) {
        const uint32_t* words = (const uint32_t*)(d->resourceSlot(r) + (size_t)h.bufHandle * 128);
        for (int i = 0; i < h.nBarriers; i++) {
          EXPECT_EQ(words[h.nBarriers + i], want) << "rank " << r << " barrier " << i << " epoch";
          for (int p = 0; p < lsaSize; p++) {
            if (p == r % lsaSize) continue;
            EXPECT_EQ(words[3 * h.nBarriers + i * lsaSize + p], want) << "inbox of " << p;
          }
        }
      }
      EXPECT_EQ(canaryDamage(*d), 0u);
    }
  }
}

// =========================================================== LL all-to-all
template <int N>
struct Bytes {
  uint8_t b[N];
};

template <typename T>
T llValue(uint32_t epoch, int from, int to, int i) {
  T v;
  uint8_t* p = (uint8_t*)&v;
  for (size_t j = 0; j < sizeof(T); j++) p[j] = (uint8_t)(epoch * 31 + from * 7 + to * 3 + i * 5 + j * 11 + 1);
  return v;
}
template <typename T>
uint64_t llSum(const T& v) {
  uint64_t s = 0;
  for (size_t j = 0; j < sizeof(T); j++) s += ((const uint8_t*)&v)[j];
  return s;
}

struct LLArgs {
  const ncclDevComm* comm;
  ncclLLA2AHandle handle;
  int count;             // elements from each rank to each rank per epoch
  int epochs, launch;
  bool wrapTest;         // the epoch starts near 2^32: second half of the slots after the wrap, senders late
  Errors* errors;
};

template <typename T>
void llKernelT(uniccl::dev::KernelArgs ka) {
  const LLArgs& a = *argsOf<LLArgs>(ka);
  const ncclDevComm& comm = *a.comm;
  ncclCoopCta cta;
  ncclTeam lsa = ncclTeamLsa(comm);
  const int block = (int)uniccl_emu_block_index(), n = lsa.nRanks, count = a.count;
  const int maxElts = (a.wrapTest ? 2 : 1) * n * count;
  ncclLLA2ASession<ncclCoopCta> ll(cta, comm, lsa, a.handle, block, maxElts);
  for (int e = 0; e < a.epochs; e++) {
    const uint32_t tag = (uint32_t)(a.launch * 100 + e) * 16 + block;
    const bool wrapped = a.wrapTest && e >= 4;   // the session started 4 epochs before the wrap
    const int base = wrapped ? n * count : 0;
    if (wrapped && lsa.rank != 0) usleep(5000);   // LSA rank 0 polls before they sent
    const bool useBcast = e % 3 == 2;
    if (useBcast) {
      // Everyone gets the same `count` values from each rank.
      for (int i = cta.thread_rank(); i < count; i += cta.size())
        ll.bcast(base + lsa.rank * count + i, llValue<T>(tag, lsa.rank, -1, i));
    } else {
      for (int j = cta.thread_rank(); j < n * count; j += cta.size()) {
        int to = j / count, i = j % count;
        ll.send(to, base + lsa.rank * count + i, llValue<T>(tag, lsa.rank, to, i));
      }
    }
    const int to = useBcast ? -1 : lsa.rank;
    for (int j = cta.thread_rank(); j < n * count; j += cta.size()) {
      int from = j / count, i = j % count;
      T got = ll.template recv<T>(base + from * count + i), want = llValue<T>(tag, from, to, i);
      if (!a.errors->check(memcmp(&got, &want, sizeof(T)) == 0))
        a.errors->add("rank %d block %d epoch %d: element %d from LSA rank %d (%zu bytes) wrong", comm.rank, block, e,
                      i, from, sizeof(T));
    }
    // Element i from every rank (slots base + i, stride count), reduced.
    for (int i = cta.thread_rank(); i < count; i += cta.size()) {
      uint64_t got = ll.template recvReduce<3, T>(base + i, n, count, [](T v) { return llSum(v); },
                                                  [](uint64_t x, uint64_t y) { return x + y; });
      uint64_t want = 0;
      for (int from = 0; from < n; from++) want += llSum(llValue<T>(tag, from, to, i));
      if (!a.errors->check(got == want))
        a.errors->add("rank %d block %d epoch %d: recvReduce of element %d = %llu, want %llu", comm.rank, block, e, i,
                      (unsigned long long)got, (unsigned long long)want);
      T two[2];
      ll.template recvUnrolled<1, 2>(base + i, n < 2 ? n : 2, count, two);
      for (int u = 0; u < (n < 2 ? n : 2); u++) {
        T want2 = llValue<T>(tag, u, to, i);
        if (!a.errors->check(memcmp(&two[u], &want2, sizeof(T)) == 0))
          a.errors->add("rank %d block %d epoch %d: recvUnrolled of element %d from %d wrong", comm.rank, block, e, i,
                        u);
      }
    }
    ll.endEpoch(cta);
  }
}

template <typename T>
void runLL(int lsaSize, int count, bool wrapTest) {
  SCOPED_TRACE(std::to_string(sizeof(T)) + "-byte elements, " + std::to_string(count) + " per peer, LSA teams of " +
               std::to_string(lsaSize) + (wrapTest ? ", across the epoch wrap" : ""));
  const int wave = waveSize();
  const int nBlocks = 2, nThreads = gRanks <= 3 ? 2 * wave : wave;
  const int maxElts = (wrapTest ? 2 : 1) * lsaSize * count;
  const int nSlots = ncclLLA2ACalcSlots(maxElts, (int)sizeof(T));
  ASSERT_GT(nSlots, 0);
  ncclLLA2AHandle handle{};
  ncclDevResourceRequirements rr{};
  ASSERT_EQ(ncclLLA2ACreateRequirement(nBlocks, nSlots, &handle, &rr), ncclSuccess);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.resourceRequirementsList = &rr;
  auto d = makeDevComms(gRanks, lsaSize, reqs, 4096);
  const size_t blockLines = 1 + 2 * (size_t)nSlots;
  if (wrapTest) {
    // Epochs 2^32-4 .. 2^32-1, then 2, 3: plant lines flagged 2 (bank 0)
    // and 3 (bank 1) with wrong data; only the clearing before the wrap
    // keeps receivers from taking them.
    for (int r = 0; r < gRanks; r++) {
      uint32_t* lines = (uint32_t*)(d->resourceSlot(r) + (size_t)handle.bufHandle * 128);
      for (int b = 0; b < nBlocks; b++) {
        uint32_t* blk = lines + 4 * b * blockLines;
        blk[0] = 0xfffffffcu - 2;   // the control line: epoch - 2
        for (size_t s = 0; s < 2 * (size_t)nSlots; s++) {
          uint32_t flag = s < (size_t)nSlots ? 2 : 3;
          uint32_t* l = blk + 4 * (1 + s);
          l[0] = 0xdead0000u + (uint32_t)s;
          l[1] = flag;
          l[2] = 0xbeef0000u + (uint32_t)s;
          l[3] = flag;
        }
      }
    }
  }
  Errors errors;
  const int epochs = wrapTest ? 6 : 5, launches = wrapTest ? 1 : 2;
  for (int l = 0; l < launches; l++) {
    std::vector<LLArgs> args(gRanks);
    for (int r = 0; r < gRanks; r++) args[r] = LLArgs{&d->comms[r], handle, count, epochs, l, wrapTest, &errors};
    launchAll(llKernelT<T>, nBlocks, nThreads, args);
  }
  expectNoFailures(errors);
  // The persisted epoch (control line x = epoch - 2).
  const uint32_t want = wrapTest ? 4 - 2 : (uint32_t)(2 + epochs * launches) - 2;
  for (int r = 0; r < gRanks; r++)
    for (int b = 0; b < nBlocks; b++)
      EXPECT_EQ(*(uint32_t*)(d->resourceSlot(r) + (size_t)handle.bufHandle * 128 + 16 * b * blockLines), want)
          << "rank " << r << " block " << b;
  EXPECT_EQ(canaryDamage(*d), 0u);
}

TEST(DeviceApiLLA2A, OddSizesAndCounts) {
  for (int lsaSize : lsaSizes()) {
    runLL<Bytes<12>>(lsaSize, 7, false);
    runLL<Bytes<1>>(lsaSize, 13, false);
    runLL<uint64_t>(lsaSize, 5, false);
    runLL<Bytes<20>>(lsaSize, 3, false);
  }
}

TEST(DeviceApiLLA2A, EpochWrapClearsTheBanks) { runLL<Bytes<12>>(gRanks, 3, true); }

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], "--ranks=", 8) == 0) gRanks = atoi(argv[i] + 8);
    else if (strcmp(argv[i], "--real") == 0) gReal = true;
  if (gRanks < 1 || gRanks > 8) {
    fprintf(stderr, "--ranks: 1 to 8\n");
    return 2;
  }
  int devices = 0;
  if (uniccl::gpu::getDeviceCount(&devices) != ncclSuccess || devices < gRanks) {
    fprintf(stderr, "need %d emulated GPUs (UNICCL_EMU_DEVICES), have %d\n", gRanks, devices);
    return 2;
  }
  uniccl::emu::installSizedCpuKernelRunner();
  printf("%d ranks, %d-lane wavefronts, %s device communicators\n", gRanks, (int)uniccl_emu_wave_size(),
         gReal ? "the library's (ncclDevCommCreate)" : "hand-built");
  return RUN_ALL_TESTS();
}
