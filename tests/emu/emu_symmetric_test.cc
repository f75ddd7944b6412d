// Symmetric memory windows and device communicators on real communicators
// (ncclCommInitAll over the emulated GPUs, whose memory is host memory: the
// test reads and writes through the flat mappings directly).
//
// For 2, 3 and 8 ranks: windows registered in a group (one thread drives
// every rank) and from one thread per rank; every rank's flat range shows
// every LSA peer's buffer at lsaFlatBase + p * stride, and a store through a
// peer's slot lands in the peer's buffer; the device window table lists the
// windows; device communicators place the LSA barriers and the requested
// buffers without overlap in a zeroed resource window; bad input fails on
// every rank with the reason (unaligned, not mappable, GIN, multimem,
// foreign windows, double destroy); register/deregister cycles leave
// nothing behind.
//
// --no-uncached (under UNICCL_EMU_ROCM older than 7.2, emu_rocm.h): the
// runtime has no uncached virtual memory, which is checked first. Windows
// still register (the symmetric collectives' barrier is not made: a WARN),
// and ncclDevCommCreate fails on every rank with ncclInvalidUsage and a
// message that says why, without crashing and without leaking.
//
//   emu_symmetric_test [--ranks=N] [--cycles=N] [--no-uncached]   (default: 2, 3 and 8 ranks; 1000 cycles)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/gpu.h"
#include "emu_gpu.h"
#include "nccl.h"
#include "nccl_device.h"
#include "test_check.h"

namespace gpu = uniccl::gpu;

namespace {

struct Comms {
  std::vector<ncclComm_t> c;
  explicit Comms(int n) : c(n, nullptr) {}
  ~Comms() {
    for (ncclComm_t x : c)
      if (x != nullptr) ncclCommDestroy(x);
  }
  int size() const { return (int)c.size(); }
  bool init() {
    std::vector<int> devs(size());
    for (int i = 0; i < size(); i++) devs[i] = i;
    NCCL_OK(ncclCommInitAll(c.data(), size(), devs.data()));
    return true;
  }
};

// f(rank) on every rank at once, one thread each, with the rank's device
// current (collective calls outside a group wait for every rank).
std::vector<ncclResult_t> onEveryRank(int n, const std::function<ncclResult_t(int)>& f) {
  std::vector<ncclResult_t> res(n, ncclInternalError);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++)
    threads.emplace_back([&, r] {
      CHECK(gpu::setDevice(r) == ncclSuccess, "the rank's device");
      res[r] = f(r);
    });
  for (auto& t : threads) t.join();
  return res;
}

bool allAre(const std::vector<ncclResult_t>& res, ncclResult_t want) {
  for (ncclResult_t r : res)
    if (r != want) return false;
  return true;
}

size_t bytesOf(int rank) { return 4096 * (size_t)(3 + rank % 2); }   // ranks register different sizes
uint32_t word(int rank, size_t i) { return 0x5a000000u | (uint32_t)rank << 16 | (uint32_t)(i & 0xffff); }

struct Buffers {
  std::vector<void*> p;
  ~Buffers() {
    for (size_t r = 0; r < p.size(); r++) {
      CHECK(gpu::setDevice((int)r) == ncclSuccess, "the rank's device");
      ncclMemFree(p[r]);
    }
  }
  bool alloc(int n) {
    p.assign(n, nullptr);
    for (int r = 0; r < n; r++) {
      CHECK(gpu::setDevice(r) == ncclSuccess, "the rank's device");
      NCCL_OK(ncclMemAlloc(&p[r], bytesOf(r) + 8192));
      uint32_t* w = static_cast<uint32_t*>(p[r]);
      for (size_t i = 0; i < bytesOf(r) / 4; i++) w[i] = word(r, i);
    }
    return true;
  }
};

const ncclWindow_vidmem& view(ncclWindow_t w) { return *w; }   // emulated device memory is host memory

char* slot(const ncclWindow_vidmem& w, int peer) {
  return w.lsaFlatBase + (size_t)peer * ((size_t)w.stride4G << 32);
}

// Every rank sees every peer's words through its own flat range, and a
// store through a peer's slot lands in the peer's buffer.
void checkFlat(const Comms& comms, const Buffers& bufs, const std::vector<ncclWindow_t>& win) {
  const int n = comms.size();
  for (int r = 0; r < n; r++) {
    const ncclWindow_vidmem& w = view(win[r]);
    CHECK(w.winHost != nullptr, "rank %d", r);
    CHECK(w.worldRank == r, "rank %d: worldRank %d", r, w.worldRank);
    CHECK(w.lsaRank == r, "rank %d: lsaRank %d (one LSA team of all)", r, w.lsaRank);
    CHECK(w.stride4G >= 1, "rank %d: stride4G %u", r, w.stride4G);
    CHECK(w.mcOffset4K == 0 && w.ginOffset4K == 0, "rank %d", r);
    for (int p = 0; p < n; p++) {
      const uint32_t* peer = reinterpret_cast<const uint32_t*>(slot(w, p));
      size_t bad = 0;
      for (size_t i = 0; i < bytesOf(p) / 4; i++) bad += peer[i] != word(p, i);
      CHECK(bad == 0, "rank %d reads peer %d through its flat range: %zu of %zu words differ", r, p, bad,
            bytesOf(p) / 4);
    }
  }
  // Rank r writes word 7 of its right neighbour's buffer through its slot.
  for (int r = 0; r < n; r++) {
    int p = (r + 1) % n;
    reinterpret_cast<uint32_t*>(slot(view(win[r]), p))[7] = 0xc0de0000u + r;
  }
  for (int p = 0; p < n; p++) {
    int writer = (p + n - 1) % n;
    uint32_t got = static_cast<uint32_t*>(bufs.p[p])[7];
    CHECK(got == 0xc0de0000u + writer, "rank %d's buffer word 7 = %#x, want rank %d's store", p, got, writer);
    static_cast<uint32_t*>(bufs.p[p])[7] = word(p, 7);
  }
}

// The comm's device window table lists (buffer, size, window) for each rank.
void checkTable(const ncclDevComm& dc, void* buf, size_t bytes, ncclWindow_t win, int rank) {
  bool found = false;
  for (const ncclDevCommWindowTable* t = dc.windowTable; t != nullptr && !found; t = t->next)
    for (const ncclDevCommWindowTableEntry& e : t->entries)
      if (e.window == win) {
        found = true;
        CHECK(e.base == (uintptr_t)buf && e.size == bytes, "rank %d: table entry (%#lx, %lu), want (%p, %zu)", rank,
              (unsigned long)e.base, (unsigned long)e.size, buf, bytes);
      }
  CHECK(found, "rank %d: window %p is not in the device window table", rank, (void*)win);
}

bool windowsInGroup(int n) {
  Comms comms(n);
  if (!comms.init()) return false;
  Buffers bufs;
  if (!bufs.alloc(n)) return false;
  std::vector<ncclWindow_t> win(n, nullptr);
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; r++) NCCL_OK(ncclCommWindowRegister(comms.c[r], bufs.p[r], bytesOf(r), &win[r], NCCL_WIN_COLL_SYMMETRIC));
  for (int r = 0; r < n; r++) CHECK(win[r] == nullptr, "rank %d: window written before ncclGroupEnd", r);
  NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < n; r++) CHECK(win[r] != nullptr, "rank %d: no window after ncclGroupEnd", r);
  checkFlat(comms, bufs, win);

  // Device communicators: LSA barriers plus two requested buffers.
  std::vector<ncclDevComm> dc(n);
  std::vector<ncclDevResourceHandle_t> h1(n, 0xffffffffu), h2(n, 0xffffffffu);
  std::vector<ncclLLA2AHandle_t> a2a(n);
  std::vector<ncclDevResourceRequirements_t> userReq(n), a2aReq(n);
  std::vector<ncclDevCommRequirements> reqs(n);
  for (int r = 0; r < n; r++) {
    NCCL_OK(ncclLLA2ACreateRequirement(2, 5, &a2a[r], &a2aReq[r]));
    memset(&userReq[r], 0, sizeof(userReq[r]));
    userReq[r].bufferSize = 1000;
    userReq[r].bufferAlign = 512;
    userReq[r].outBufferHandle = &h1[r];
    userReq[r].next = &a2aReq[r];
    reqs[r] = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs[r].lsaBarrierCount = 3;
    reqs[r].resourceRequirementsList = &userReq[r];
  }
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; r++) NCCL_OK(ncclDevCommCreate(comms.c[r], &reqs[r], &dc[r]));
  NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < n; r++) {
    const ncclDevComm& d = dc[r];
    CHECK(d.rank == r && d.nRanks == n && d.lsaRank == r && d.lsaSize == n, "rank %d: %d/%d lsa %d/%d", r, d.rank,
          d.nRanks, d.lsaRank, d.lsaSize);
    CHECK(d.nRanks_rcp32 == 0xffffffffu / n + ((n & (n - 1)) == 0), "rank %d: nRanks_rcp32 %u", r, d.nRanks_rcp32);
    CHECK(d.lsaBarrier.nBarriers == 3, "rank %d: %d LSA barriers", r, d.lsaBarrier.nBarriers);
    CHECK(d.resourceWindow != nullptr && d.resourceWindow_inlined.lsaFlatBase == view(d.resourceWindow).lsaFlatBase,
          "rank %d: resource window and its inlined copy differ", r);
    // Placed without overlap: barrier, user buffer (512-aligned), LL all-to-all (16-aligned).
    size_t barrierBytes = 3 * (3 + (size_t)n) * 4;
    size_t b0 = (size_t)d.lsaBarrier.bufHandle * 128, u0 = (size_t)h1[r] * 128, a0 = (size_t)a2a[r].bufHandle * 128;
    CHECK(u0 % 512 == 0, "rank %d: user buffer at %zu", r, u0);
    CHECK(b0 + barrierBytes <= u0 && u0 + 1000 <= a0, "rank %d: barrier %zu, user %zu, a2a %zu", r, b0, u0, a0);
    const char* local = slot(d.resourceWindow_inlined, d.lsaRank);
    size_t nonzero = 0;
    for (size_t i = 0; i < a0 + a2aReq[r].bufferSize; i++) nonzero += local[i] != 0;
    CHECK(nonzero == 0, "rank %d: %zu resource bytes are not zero", r, nonzero);
    checkTable(d, bufs.p[r], bytesOf(r), win[r], r);
  }
  (void)h2;
  // Destroy twice: the second is refused.
  for (int r = 0; r < n; r++) NCCL_OK(ncclDevCommDestroy(comms.c[r], &dc[r]));
  for (int r = 0; r < n; r++) CHECK(ncclDevCommDestroy(comms.c[r], &dc[r]) == ncclInvalidArgument, "rank %d", r);
  // Another comm's window is not this comm's.
  if (n > 1) CHECK(ncclCommWindowDeregister(comms.c[0], win[1]) == ncclInvalidArgument, "foreign window accepted");
  for (int r = 0; r < n; r++) NCCL_OK(ncclCommWindowDeregister(comms.c[r], win[r]));
  for (int r = 0; r < n; r++) CHECK(ncclCommWindowDeregister(comms.c[r], win[r]) == ncclInvalidArgument, "rank %d", r);
  // A bad call in the group fails the group end on every rank, without waiting.
  std::vector<ncclWindow_t> bad(n, nullptr);
  ncclGroupStart();
  for (int r = 0; r < n; r++)
    ncclCommWindowRegister(comms.c[r], static_cast<char*>(bufs.p[r]) + (r == n - 1 ? 128 : 0), 4096, &bad[r], 0);
  ncclResult_t res = ncclGroupEnd();
  CHECK(res == ncclInvalidArgument, "group with an unaligned buffer on rank %d: %s", n - 1, ncclGetErrorString(res));
  for (int r = 0; r < n; r++) CHECK(bad[r] == nullptr, "rank %d: a window from a failed group", r);
  printf("%d ranks: windows in a group, device communicators: ok\n", n);
  return true;
}

bool windowsPerThread(int n) {
  Comms comms(n);
  if (!comms.init()) return false;
  Buffers bufs;
  if (!bufs.alloc(n)) return false;
  std::vector<ncclWindow_t> win(n, nullptr);
  auto res = onEveryRank(n, [&](int r) { return ncclCommWindowRegister(comms.c[r], bufs.p[r], bytesOf(r), &win[r], 0); });
  CHECK(allAre(res, ncclSuccess), "register from threads");
  if (!allAre(res, ncclSuccess)) return false;
  checkFlat(comms, bufs, win);

  // One rank's bad call fails every rank at once (nobody waits for it):
  // an unaligned buffer, memory peers cannot map, a NULL window pointer.
  auto failsEverywhere = [&](const char* what, int bad, const std::function<ncclResult_t(int, ncclWindow_t*)>& call) {
    auto res = onEveryRank(n, [&](int r) {
      ncclWindow_t w = nullptr;
      ncclResult_t got = call(r, &w);
      if (got == ncclSuccess) ncclCommWindowDeregister(comms.c[r], w);
      return got;
    });
    for (int r = 0; r < n; r++)
      CHECK(res[r] == ncclInvalidArgument, "%s on rank %d: rank %d returned %s", what, bad, r, ncclGetErrorString(res[r]));
  };
  failsEverywhere("unaligned buffer", 0, [&](int r, ncclWindow_t* w) {
    return ncclCommWindowRegister(comms.c[r], static_cast<char*>(bufs.p[r]) + (r == 0 ? 64 : 0), 4096, w, 0);
  });
  // Aligned as windows must be, so that what is refused is the memory kind
  // (ROCm: asked of uniccl's own allocations only, never of the runtime).
  void* plain = nullptr;
  CHECK(gpu::setDevice(n - 1) == ncclSuccess, "the rank's device");
  NCCL_OK(gpu::deviceAlloc(&plain, 8192 + NCCL_WIN_REQUIRED_ALIGNMENT));
  void* plainAligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(plain) + NCCL_WIN_REQUIRED_ALIGNMENT - 1) &
                                               ~(uintptr_t)(NCCL_WIN_REQUIRED_ALIGNMENT - 1));
  failsEverywhere("ordinary device memory", n - 1, [&](int r, ncclWindow_t* w) {
    return ncclCommWindowRegister(comms.c[r], r == n - 1 ? plainAligned : bufs.p[r], 4096, w, 0);
  });
  CHECK(gpu::setDevice(n - 1) == ncclSuccess, "the rank's device");
  (void)gpu::deviceFree(plain);
  failsEverywhere("more bytes than the allocation", n / 2, [&](int r, ncclWindow_t* w) {
    return ncclCommWindowRegister(comms.c[r], bufs.p[r], r == n / 2 ? (size_t)1 << 30 : 4096, w, 0);
  });
  failsEverywhere("different flags", n - 1, [&](int r, ncclWindow_t* w) {
    return ncclCommWindowRegister(comms.c[r], bufs.p[r], 4096, w, r == n - 1 ? NCCL_WIN_COLL_SYMMETRIC : 0);
  });
  failsEverywhere("NULL window pointer", 0, [&](int r, ncclWindow_t* w) {
    return ncclCommWindowRegister(comms.c[r], bufs.p[r], 4096, r == 0 ? nullptr : w, 0);
  });
  // Requirements the ranks disagree on (GIN on one rank only) fail on every rank too.
  auto res2 = onEveryRank(n, [&](int r) {
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    if (r == 0) reqs.ginSignalCount = 1;
    ncclDevComm dc;
    ncclResult_t got = ncclDevCommCreate(comms.c[r], &reqs, &dc);
    if (got == ncclSuccess) ncclDevCommDestroy(comms.c[r], &dc);
    return got;
  });
  CHECK(allAre(res2, ncclInvalidUsage), "GIN signals on rank 0: not refused everywhere");
  res2 = onEveryRank(n, [&](int r) {
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaMultimem = true;
    ncclDevComm dc;
    return ncclDevCommCreate(comms.c[r], &reqs, &dc);
  });
  CHECK(allAre(res2, ncclInvalidUsage), "lsaMultimem: not refused everywhere");
  printf("%d ranks: windows from one thread per rank: ok\n", n);
  for (int r = 0; r < n; r++) NCCL_OK(ncclCommWindowDeregister(comms.c[r], win[r]));
  return true;
}

// Register, create a device communicator, destroy, deregister, `count`
// times: the emulated runtime's live objects end where they started.
bool cycles(int n, int count) {
  Comms comms(n);
  if (!comms.init()) return false;
  Buffers bufs;
  if (!bufs.alloc(n)) return false;
  // The comm's device window table is made by the first registration and
  // kept until the comm goes: counted from after the first cycle.
  uniccl::emu::Usage before{};
  std::vector<ncclWindow_t> win(n);
  std::vector<ncclDevComm> dc(n);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1;
  for (int i = 0; i < count; i++) {
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < n; r++) NCCL_OK(ncclCommWindowRegister(comms.c[r], bufs.p[r], 4096, &win[r], 0));
    if (i % 10 == 0)
      for (int r = 0; r < n; r++) NCCL_OK(ncclDevCommCreate(comms.c[r], &reqs, &dc[r]));
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < n; r++) {
      if (i % 10 == 0) NCCL_OK(ncclDevCommDestroy(comms.c[r], &dc[r]));
      NCCL_OK(ncclCommWindowDeregister(comms.c[r], win[r]));
    }
    if (i == 0) before = uniccl::emu::usage();
  }
  uniccl::emu::Usage after = uniccl::emu::usage();
  CHECK(after.deviceAllocs == before.deviceAllocs && after.deviceBytes == before.deviceBytes,
        "%d cycles left %zd allocations (%zd bytes)", count, (ssize_t)(after.deviceAllocs - before.deviceAllocs),
        (ssize_t)(after.deviceBytes - before.deviceBytes));
  printf("%d ranks: %d register/deregister cycles (a device communicator every 10th): ok\n", n, count);
  return true;
}

// The runtime has no uncached VMM memory (ROCm before 7.2): what the
// library still does and what it refuses.
bool withoutUncachedMemory(int n, int count) {
  gpu::VmmInfo vmm{};
  NCCL_OK(gpu::vmmQuery(0, &vmm));
  CHECK(vmm.supported && !vmm.polled, "--no-uncached: the runtime offers uncached VMM memory (UNICCL_EMU_ROCM unset or "
        "7.2+?)");
  if (!vmm.supported || vmm.polled) return false;
  Comms comms(n);
  if (!comms.init()) return false;
  Buffers bufs;
  if (!bufs.alloc(n)) return false;
  const uniccl::emu::Usage before = uniccl::emu::usage();
  for (int i = 0; i < count; i++) {
    std::vector<ncclWindow_t> win(n, nullptr);
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < n; r++)
      NCCL_OK(ncclCommWindowRegister(comms.c[r], bufs.p[r], bytesOf(r), &win[r], NCCL_WIN_COLL_SYMMETRIC));
    NCCL_OK(ncclGroupEnd());
    if (i == 0) checkFlat(comms, bufs, win);
    std::vector<std::string> why(n);
    auto res = onEveryRank(n, [&](int r) {
      ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
      reqs.lsaBarrierCount = 1;
      ncclDevComm dc;
      ncclResult_t got = ncclDevCommCreate(comms.c[r], &reqs, &dc);
      why[r] = ncclGetLastError(comms.c[r]);
      if (got == ncclSuccess) ncclDevCommDestroy(comms.c[r], &dc);
      return got;
    });
    CHECK(allAre(res, ncclInvalidUsage), "ncclDevCommCreate without uncached memory: not refused on every rank");
    for (int r = 0; r < n; r++)
      CHECK(why[r].find("virtual memory") != std::string::npos, "rank %d: the refusal does not say why: '%s'", r,
            why[r].c_str());
    for (int r = 0; r < n; r++) NCCL_OK(ncclCommWindowDeregister(comms.c[r], win[r]));
  }
  const uniccl::emu::Usage after = uniccl::emu::usage();
  CHECK(after.physAllocs == before.physAllocs && after.mappings == before.mappings &&
            after.reservations == before.reservations,
        "%d refused cycles left %zd physical allocations, %zd mappings, %zd reservations", count,
        (ssize_t)(after.physAllocs - before.physAllocs), (ssize_t)(after.mappings - before.mappings),
        (ssize_t)(after.reservations - before.reservations));
  printf("%d ranks without uncached memory: windows register, device communicators refused everywhere (%d times): "
         "ok\n", n, count);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ranks = {2, 3, 8};
  int count = 1000;
  bool noUncached = false;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--ranks=", 8) == 0) ranks = {atoi(argv[i] + 8)};
    if (strncmp(argv[i], "--cycles=", 9) == 0) count = atoi(argv[i] + 9);
    if (strcmp(argv[i], "--no-uncached") == 0) noUncached = true;
  }
  if (noUncached) {
    for (int n : ranks) withoutUncachedMemory(n, count);
    printf("%s\n", testcheck::failures() ? "FAILED" : "ok");
    return testcheck::failures() ? 1 : 0;
  }
  for (int n : ranks) {
    windowsInGroup(n);
    windowsPerThread(n);
  }
  cycles(2, count);
  printf("%s\n", testcheck::failures() ? "FAILED" : "ok");
  return testcheck::failures() ? 1 : 0;
}
