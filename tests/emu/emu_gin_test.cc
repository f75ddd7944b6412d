// GIN (include/nccl_device/gin.h) over uniccl's proxy thread on emulated
// ranks (threads of one process, each rank an emulated GPU). Run with
// NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: every LSA team is one rank and
// GIN's links go through the socket transport, as between hosts.
//
// - Transfers: every rank puts an odd-sized block (some larger than one
//   64 KiB staging slot, up to ten slots) to every rank, itself
//   included, for several rounds, with SignalInc on a signal per source
//   rank and CounterInc; putValue with SignalAdd; signal alone; flush,
//   waitCounter, readCounter, waitSignal, waitSignalMeetShadow,
//   waitSignalFollowShadow, readSignal, resetSignal / resetCounter. After
//   each signal wait the kernel checks every byte the signal covers (a
//   signal before its payload fails it).
// - Abort: a kernel waits for a signal nobody sends; ncclCommAbort ends it.
// - Barriers: ncclBarrierSession over the world (the LSA barrier, then the
//   rail GIN barrier) and ncclGinBarrierSession with a handle from
//   ncclGinBarrierCreateRequirement, between rounds of putValue to every
//   rank: after a barrier every rank's value of the round is there.
// - Bad arguments: multimem refused, malformed counts, ranks that ask
//   for different GIN resources, a put outside its window (the communicator
//   is aborted with ncclInvalidUsage).
//
// - Many puts in flight: hundreds of puts and putValues per destination
//   back to back, a watcher checking each signal against the data below it.
//
//   emu_gin_test --ranks=N [--bench] [gtest flags]     (UNICCL_EMU_DEVICES >= N)
//   --bench also runs GinBench.AllToAll: GIN all-to-all against ncclAlltoAll, timed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/gpu.h"
#include "device/dev_types.h"
#include "emu_gpu.h"
#include "emu_runtime.h"
#include "nccl.h"
#include "nccl_device.h"

#ifndef UNICCL_DEVICE_API_EMU
#error "emu_gin_test is compiled with -DUNICCL_DEV_CPU"
#endif

namespace {

int gRanks = 2;

void mustSucceed(ncclResult_t res, const char* what) {
  if (res == ncclSuccess) return;
  fprintf(stderr, "FATAL: %s: %s (%s)\n", what, ncclGetErrorString(res), ncclGetLastError(nullptr));
  abort();
}

using Kernel = void (*)(uniccl::dev::KernelArgs);

template <typename T>
T* argsOf(const uniccl::dev::KernelArgs& ka) {
  T* p;
  memcpy(&p, &ka, sizeof(p));
  return p;
}

// Launches kernel on rank r's emulated GPU with args[r] for every rank; the streams are returned.
template <typename A>
std::vector<uniccl::gpu::Stream> launchAll(Kernel kernel, unsigned block, std::vector<A>& args) {
  std::vector<uniccl::gpu::Stream> streams(args.size());
  for (size_t r = 0; r < args.size(); r++) {
    mustSucceed(uniccl::gpu::setDevice((int)r), "setDevice");
    mustSucceed(uniccl::gpu::streamCreate(&streams[r]), "streamCreate");
    uniccl::dev::KernelArgs ka;
    memset(&ka, 0, sizeof(ka));
    A* p = &args[r];
    memcpy(&ka, &p, sizeof(p));
    void* argv[] = {&ka};
    uniccl::gpu::LaunchConfig cfg;
    cfg.gridX = 1;
    cfg.blockX = block;
    cfg.stream = streams[r];
    mustSucceed(uniccl::gpu::launchKernel((const void*)kernel, cfg, argv, nullptr), "launchKernel");
  }
  return streams;
}
void waitAll(std::vector<uniccl::gpu::Stream>& streams) {
  for (size_t r = 0; r < streams.size(); r++) {
    mustSucceed(uniccl::gpu::setDevice((int)r), "setDevice");
    mustSucceed(uniccl::gpu::streamSynchronize(streams[r]), "streamSynchronize");
    mustSucceed(uniccl::gpu::streamDestroy(streams[r]), "streamDestroy");
  }
}

struct Errors {
  std::atomic<long> checks{0};
  std::atomic<long> count{0};
  char first[4][200] = {};
  bool check(bool ok) {
    checks.fetch_add(1, std::memory_order_relaxed);
    return ok;
  }
  void add(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    long n = count.fetch_add(1);
    if (n < 4) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(first[n], sizeof(first[n]), fmt, ap);
      va_end(ap);
    }
  }
  void expectNone() {
    EXPECT_GT(checks.load(), 0);
    std::string s;
    for (int i = 0; i < 4 && i < count.load(); i++) s += std::string("\n  ") + first[i];
    EXPECT_EQ(count.load(), 0) << count.load() << " of " << checks.load() << " device-side checks failed" << s;
    printf("  %ld device-side checks, %ld failed\n", checks.load(), count.load());
  }
};

// Communicators, a window per rank, device communicators with GIN.
struct World {
  int n = 0;
  size_t winBytes = 0;
  std::vector<ncclComm_t> comms;
  std::vector<void*> mem;
  std::vector<ncclWindow_t> win;
  std::vector<ncclDevComm> dev;
  bool haveDev = false;

  void init(int nRanks, size_t bytes) {
    n = nRanks;
    winBytes = bytes;
    comms.assign(n, nullptr);
    std::vector<int> devs(n);
    for (int r = 0; r < n; r++) devs[r] = r;
    mustSucceed(ncclCommInitAll(comms.data(), n, devs.data()), "ncclCommInitAll");
    mem.assign(n, nullptr);
    win.assign(n, nullptr);
    for (int r = 0; r < n; r++) {
      mustSucceed(uniccl::gpu::setDevice(r), "setDevice");
      mustSucceed(ncclMemAlloc(&mem[r], bytes), "ncclMemAlloc");
      memset(mem[r], 0, bytes);
    }
    mustSucceed(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < n; r++)
      mustSucceed(ncclCommWindowRegister(comms[r], mem[r], bytes, &win[r], NCCL_WIN_DEFAULT), "ncclCommWindowRegister");
    mustSucceed(ncclGroupEnd(), "ncclGroupEnd (windows)");
  }
  // Every rank with reqs[r]; returns each rank's result.
  std::vector<ncclResult_t> createDev(std::vector<ncclDevCommRequirements>& reqs) {
    dev.assign(n, ncclDevComm{});
    std::vector<ncclResult_t> res(n, ncclSuccess);
    std::vector<std::thread> t;
    for (int r = 0; r < n; r++)
      t.emplace_back([&, r] {
        EXPECT_EQ(uniccl::gpu::setDevice(r), ncclSuccess);
        res[r] = ncclDevCommCreate(comms[r], &reqs[r], &dev[r]);
      });
    for (auto& x : t) x.join();
    haveDev = true;
    for (int r = 0; r < n; r++) haveDev = haveDev && res[r] == ncclSuccess;
    return res;
  }
  void destroy(bool abortComms = false) {
    if (comms.empty()) return;
    if (abortComms) {
      // Each rank aborts on its own thread, as separate processes would (one
      // rank's teardown may wait for its device's kernels, which end when
      // their own rank is aborted).
      std::vector<std::thread> t;
      std::vector<ncclResult_t> res(n, ncclSuccess);
      for (int r = 0; r < n; r++)
        t.emplace_back([&, r] {
          EXPECT_EQ(uniccl::gpu::setDevice(r), ncclSuccess);
          res[r] = ncclCommAbort(comms[r]);
        });
      for (auto& x : t) x.join();
      for (int r = 0; r < n; r++) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
    }
    for (int r = 0; r < n && !abortComms; r++) {
      mustSucceed(uniccl::gpu::setDevice(r), "setDevice");
      if (haveDev) {
        EXPECT_EQ(ncclDevCommDestroy(comms[r], &dev[r]), ncclSuccess);
      }
      EXPECT_EQ(ncclCommWindowDeregister(comms[r], win[r]), ncclSuccess);
    }
    for (int r = 0; r < n && !abortComms; r++) EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
    for (int r = 0; r < n; r++) {
      EXPECT_EQ(uniccl::gpu::setDevice(r), ncclSuccess);
      ncclMemFree(mem[r]);
    }
    comms.clear();
  }
  ~World() { destroy(); }
};

// ============================================================== transfers
constexpr int kRounds = 3;
constexpr size_t kSlot = 600 * 1024;   // a destination area per (round, source)

// Put from rank s to rank d in round k: odd sizes, some over one 64 KiB slot.
size_t putBytes(int s, int d, int k) {
  static const size_t sizes[] = {1, 777, 4099, 65473, 65536 - 64 + 1, 150001, 600001};
  return sizes[(s * 3 + d * 5 + k) % 7];
}
unsigned char pattern(int s, int d, int k, size_t i) { return (unsigned char)(s * 31 + d * 17 + k * 7 + i * 13 + 1); }

struct XferArgs {
  ncclDevComm comm;
  ncclWindow_t win;
  int nRanks, rank;
  unsigned char* local;   // the window's memory on this rank (the kernel's own pointer)
  size_t srcBase, dstBase, valBase;
  Errors* errors;
};

// Signals: [0, n) SignalInc per source rank and round; n: putValue's SignalAdd;
// n + 1: signal() alone. Counter 0: this rank's puts' sources consumed.
void xferKernel(uniccl::dev::KernelArgs ka) {
  XferArgs& a = *argsOf<XferArgs>(ka);
  ncclCoopCta cta;
  ncclGin gin(a.comm, 0);
  ncclTeam world = ncclTeamWorld(a.comm);
  const int n = a.nRanks, me = a.rank;
  const int tid = cta.thread_rank(), nt = cta.size();
  Errors& e = *a.errors;
  for (int k = 0; k < kRounds; k++) {
    // The source: this round's pattern for every destination, one after another.
    size_t off = 0;
    for (int d = 0; d < n; d++) {
      size_t b = putBytes(me, d, k);
      for (size_t i = tid; i < b; i += nt) a.local[a.srcBase + off + i] = pattern(me, d, k, i);
      off += b;
    }
    cta.sync();
    for (int i = 0; i < n; i++) {
      int d = (me + i) % n;   // staggered, and itself too
      size_t srcOff = 0;      // d's block in the source
      for (int x = 0; x < d; x++) srcOff += putBytes(me, x, k);
      gin.put(world, d, a.win, a.dstBase + ((size_t)k * n + me) * kSlot, a.win, a.srcBase + srcOff,
              putBytes(me, d, k), ncclGin_SignalInc{(ncclGinSignal_t)me}, ncclGin_CounterInc{0}, cta);
    }
    // Sources reusable after flush: every put of this round has been read.
    gin.flush(cta);
    if (tid == 0) {
      uint64_t c = gin.readCounter(0);
      if (!e.check(c == (uint64_t)(k + 1) * n)) e.add("rank %d round %d: counter %llu after flush, want %d", me, k,
                                                     (unsigned long long)c, (k + 1) * n);
    }
    gin.waitCounter(cta, 0, (uint64_t)(k + 1) * n);
    // Receive: each source's signal, then its bytes (they must have landed).
    for (int s = 0; s < n; s++) {
      // One thread first, checking the put's last bytes (its last slot) the
      // moment the signal shows: a signal ahead of its payload shows here.
      if (tid == 0) {
        gin.waitSignal(ncclCoopThread(), (ncclGinSignal_t)s, (uint64_t)(k + 1));
        size_t b = putBytes(s, me, k), from = b > 64 ? b - 64 : 0;
        const unsigned char* got = a.local + a.dstBase + ((size_t)k * n + s) * kSlot;
        long bad = 0;
        for (size_t i = from; i < b; i++) bad += got[i] != pattern(s, me, k, i);
        if (!e.check(bad == 0))
          e.add("rank %d round %d: the last bytes from rank %d (%ld of %zu wrong) were not there at its signal", me, k,
                s, bad, b - from);
      }
      gin.waitSignal(cta, (ncclGinSignal_t)s, (uint64_t)(k + 1));
      size_t b = putBytes(s, me, k);
      const unsigned char* got = a.local + a.dstBase + ((size_t)k * n + s) * kSlot;
      long bad = 0;
      size_t firstBad = 0;
      for (size_t i = tid; i < b; i += nt)
        if (got[i] != pattern(s, me, k, i) && bad++ == 0) firstBad = i;
      e.check(bad == 0);
      if (bad) e.add("rank %d round %d: %ld of the bytes from rank %d wrong after its signal (first at %zu of %zu)", me,
                     k, bad, s, firstBad, b);
      if (tid == 0) gin.increaseSignalShadow((ncclGinSignal_t)s, 1);
      cta.sync();
      gin.waitSignalMeetShadow(cta, (ncclGinSignal_t)s);
    }
  }
  // putValue + SignalAdd, then a signal alone (after the value, per peer).
  for (int i = 0; i < n; i++) {
    int d = (me + i) % n;
    uint64_t v = 0x1000000000ull * (uint64_t)(me + 1) + (uint64_t)d;
    gin.putValue(world, d, a.win, a.valBase + (size_t)me * 8, v, ncclGin_SignalAdd{(ncclGinSignal_t)n, (uint64_t)me + 1},
                 cta);
    gin.signal(world, d, ncclGin_SignalAdd{(ncclGinSignal_t)(n + 1), 1000}, cta);
  }
  const uint64_t sumAdd = (uint64_t)n * (n + 1) / 2;
  uint32_t before = 0, delta = 0;
  gin.waitSignalFollowShadow(cta, (ncclGinSignal_t)n, (uint32_t)sumAdd, &before, &delta);
  e.check(before == 0 && delta == sumAdd);
  if ((before != 0 || delta != sumAdd) && tid == 0)
    e.add("rank %d: waitSignalFollowShadow before %u delta %u, want 0 and %llu", me, before, delta,
                        (unsigned long long)sumAdd);
  gin.waitSignal(cta, (ncclGinSignal_t)(n + 1), 1000ull * n);
  if (tid == 0) {
    for (int s = 0; s < n; s++) {
      uint64_t v;
      memcpy(&v, a.local + a.valBase + (size_t)s * 8, 8);
      uint64_t want = 0x1000000000ull * (uint64_t)(s + 1) + (uint64_t)me;
      if (!e.check(v == want)) e.add("rank %d: putValue from %d gave %llx, want %llx", me, s, (unsigned long long)v,
                                     (unsigned long long)want);
    }
    uint64_t sig = gin.readSignal((ncclGinSignal_t)n), sig2 = gin.readSignal((ncclGinSignal_t)(n + 1), 8);
    if (!e.check(sig == sumAdd)) e.add("rank %d: readSignal %llu", me, (unsigned long long)sig);
    if (!e.check(sig2 == ((1000ull * n) & 0xff))) e.add("rank %d: readSignal (8 bits) %llu", me, (unsigned long long)sig2);
    for (int s = 0; s < n + 2; s++) gin.resetSignal((ncclGinSignal_t)s);
    gin.resetCounter(0);
    if (!e.check(gin.readSignal(0) == 0 && gin.readCounter(0) == 0 && *gin.getSignalShadowPtr(0) == 0))
      e.add("rank %d: reset left a value", me);
  }
  cta.sync();
}

ncclDevCommRequirements ginReqs(int signals, int counters) {
  ncclDevCommRequirements r;
  memset(&r, 0, sizeof(r));
  r.ginSignalCount = signals;
  r.ginCounterCount = counters;
  r.ginContextCount = 1;
  return r;
}

TEST(Gin, PutSignalCounterFlush) {
  const int n = gRanks;
  World w;
  const size_t srcBytes = (size_t)n * kSlot, dstBytes = (size_t)kRounds * n * kSlot;
  w.init(n, (srcBytes + dstBytes + 4096 + 4095) / 4096 * 4096 + 4096);
  std::vector<ncclDevCommRequirements> reqs(n, ginReqs(n + 2, 1));
  for (ncclResult_t r : w.createDev(reqs)) ASSERT_EQ(r, ncclSuccess);
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(w.dev[r].ginContextCount, 1);
    EXPECT_EQ(w.dev[r].ginSignalCount, n + 2);
    EXPECT_EQ(w.dev[r].ginCounterCount, 1);
    EXPECT_NE(w.dev[r].ginHandles[0], nullptr);
    EXPECT_EQ(w.dev[r].ginTypes[0], (uint8_t)NCCL_NET_DEVICE_GIN_PROXY);
  }
  Errors e;
  std::vector<XferArgs> args(n);
  for (int r = 0; r < n; r++)
    args[r] = XferArgs{w.dev[r], w.win[r], n, r, static_cast<unsigned char*>(w.mem[r]), 0, srcBytes,
                       srcBytes + dstBytes, &e};
  for (int launch = 0; launch < 2; launch++) {   // twice: the counters and signals were reset
    auto streams = launchAll(xferKernel, 64, args);
    waitAll(streams);
  }
  e.expectNone();
  for (int r = 0; r < n; r++) {
    int err = ncclSuccess;
    ncclResult_t res = ncclCommGetAsyncError(w.comms[r], (ncclResult_t*)&err);
    EXPECT_EQ(res, ncclSuccess);
    EXPECT_EQ(err, ncclSuccess) << "rank " << r;
  }
}

// ====================================================== puts in flight
// Many puts to every rank (itself included) posted back to back by one
// thread, more than a queue holds (256), sizes from 1 byte to several
// staging slots with putValues in between, each with SignalInc on the
// source's signal: the proxy has many of them in flight at once (staged,
// copied and sent in pieces). Another thread of the same kernel watches
// each source's signal while they arrive and, whenever it has grown to v,
// checks that puts 0..v-1 of that source have landed: a signal that
// overtook any earlier put's data (or its own) is seen. Then every byte.
constexpr int kFlightPuts = 296;

size_t flightBytes(int i) {
  static const size_t sizes[] = {1, 100, 4096, 8, 777, 3000, 65473, 12345};
  return sizes[i % 8];
}
bool flightIsValue(int i) { return i % 8 == 3; }   // the 8-byte entries go as putValue
size_t flightDstOff(int i) {   // put i's place in a source's destination area
  size_t off = 0;
  for (int x = 0; x < i; x++) off += (flightBytes(x) + 7) / 8 * 8;
  return off;
}
size_t flightSrcOff(int i) { return (size_t)(i * 4093) % 8192; }
unsigned char flightPattern(int s, size_t j) { return (unsigned char)(s * 29 + j * 13 + 1); }
uint64_t flightValue(int s, int d, int i) { return 0x5100000000000000ull | ((uint64_t)s << 40) | ((uint64_t)d << 24) | (uint64_t)i; }
constexpr size_t kFlightSrcBytes = 8192 + 65536 + 64;

struct FlightArgs {
  ncclDevComm comm;
  ncclWindow_t win;
  int nRanks, rank;
  unsigned char* local;
  size_t srcBase, dstBase, areaBytes;   // source s's puts land at dstBase + s * areaBytes
  Errors* errors;
};

// Whether put i from s (to me) is all there; *bad counts the wrong bytes seen.
bool flightLanded(const FlightArgs& a, int s, int i, size_t from, size_t step, long* bad) {
  const unsigned char* got = a.local + a.dstBase + (size_t)s * a.areaBytes + flightDstOff(i);
  if (flightIsValue(i)) {
    if (from > 0) return true;
    uint64_t v;
    memcpy(&v, got, 8);
    if (v != flightValue(s, a.rank, i)) (*bad)++;
    return v == flightValue(s, a.rank, i);
  }
  long before = *bad;
  for (size_t j = from; j < flightBytes(i); j += step)
    if (got[j] != flightPattern(s, flightSrcOff(i) + j)) (*bad)++;
  return *bad == before;
}

void flightKernel(uniccl::dev::KernelArgs ka) {
  FlightArgs& a = *argsOf<FlightArgs>(ka);
  ncclCoopCta cta;
  ncclGin gin(a.comm, 0);
  ncclTeam world = ncclTeamWorld(a.comm);
  const int n = a.nRanks, me = a.rank, tid = cta.thread_rank(), nt = cta.size();
  Errors& e = *a.errors;
  for (size_t j = tid; j < kFlightSrcBytes; j += nt) a.local[a.srcBase + j] = flightPattern(me, j);
  cta.sync();
  if (tid == 0) {
    // Every destination's i-th put before anyone's (i+1)-th: all queues busy at once.
    for (int i = 0; i < kFlightPuts; i++)
      for (int k = 0; k < n; k++) {
        const int d = (me + k) % n;
        const size_t dst = a.dstBase + (size_t)me * a.areaBytes + flightDstOff(i);
        if (flightIsValue(i))
          gin.putValue(world, d, a.win, dst, flightValue(me, d, i), ncclGin_SignalInc{(ncclGinSignal_t)me},
                       ncclCoopThread());
        else
          gin.put(world, d, a.win, dst, a.win, a.srcBase + flightSrcOff(i), flightBytes(i),
                  ncclGin_SignalInc{(ncclGinSignal_t)me}, ncclGin_CounterInc{0}, ncclCoopThread());
      }
    gin.flush(ncclCoopThread());
    int puts = 0;
    for (int i = 0; i < kFlightPuts; i++) puts += !flightIsValue(i);
    const uint64_t c = gin.readCounter(0);
    if (!e.check(c == (uint64_t)puts * n))
      e.add("rank %d: counter %llu after flush, want %d", me, (unsigned long long)c, puts * n);
  } else if (tid == nt / 2) {
    // The watcher: as each source's signal grows, everything below it must be there.
    int checked[8] = {};
    int done = 0;
    for (long polls = 0; done < n && polls < 20000000; polls++) {
      for (int s = 0; s < n; s++) {
        if (checked[s] == kFlightPuts) continue;
        const int v = (int)gin.readSignal((ncclGinSignal_t)s);
        for (; checked[s] < v && checked[s] < kFlightPuts; checked[s]++) {
          const int i = checked[s];
          long bad = 0;
          // The first byte and the last 64 (the put's last slot).
          flightLanded(a, s, i, 0, flightBytes(i), &bad);
          flightLanded(a, s, i, flightBytes(i) > 64 ? flightBytes(i) - 64 : 0, 1, &bad);
          if (!e.check(bad == 0))
            e.add("rank %d: signal from rank %d was %d, but its put %d (%zu bytes) had not landed (%ld bytes wrong)",
                  me, s, v, i, flightBytes(i), bad);
        }
        if (checked[s] == kFlightPuts) done++;
      }
      uniccl::devapi::pollPause();
    }
  }
  cta.sync();
  for (int s = 0; s < n; s++) {
    gin.waitSignal(cta, (ncclGinSignal_t)s, kFlightPuts);
    long bad = 0;
    for (int i = 0; i < kFlightPuts; i++) flightLanded(a, s, i, tid, nt, &bad);
    if (!e.check(bad == 0)) e.add("rank %d: %ld bytes from rank %d wrong after all its signals", me, bad, s);
  }
  cta.sync();
  if (tid == 0)
    for (int s = 0; s < n; s++)
      if (!e.check(gin.readSignal((ncclGinSignal_t)s) == (uint64_t)kFlightPuts))
        e.add("rank %d: signal %d is %llu, want %d", me, s, (unsigned long long)gin.readSignal((ncclGinSignal_t)s),
              kFlightPuts);
}

TEST(Gin, ManyPutsInFlightSignalsInOrder) {
  const int n = gRanks;
  World w;
  const size_t area = (flightDstOff(kFlightPuts) + 4095) / 4096 * 4096;
  const size_t srcBytes = (kFlightSrcBytes + 4095) / 4096 * 4096;
  w.init(n, srcBytes + (size_t)n * area);
  std::vector<ncclDevCommRequirements> reqs(n, ginReqs(n, 1));
  for (ncclResult_t r : w.createDev(reqs)) ASSERT_EQ(r, ncclSuccess);
  Errors e;
  std::vector<FlightArgs> args(n);
  for (int r = 0; r < n; r++)
    args[r] = FlightArgs{w.dev[r], w.win[r], n, r, static_cast<unsigned char*>(w.mem[r]), 0, srcBytes, area, &e};
  auto streams = launchAll(flightKernel, 64, args);
  waitAll(streams);
  e.expectNone();
  for (int r = 0; r < n; r++) {
    int err = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(w.comms[r], (ncclResult_t*)&err), ncclSuccess);
    EXPECT_EQ(err, ncclSuccess) << "rank " << r;
  }
}

// ============================================================ benchmark
// emu_gin_test --ranks=N --bench: an all-to-all through GIN (each rank puts
// its block for every rank, itself included, with SignalInc, flushes and
// waits for every source's signal; nccl-tests' `alltoall -D 3` pattern)
// against ncclAlltoAll over the same communicators and transport, per size.
// It prints times (not asserted: the emulator's speed is the CPU's) and
// checks the data of the last iteration.
bool gBench = false;

struct A2aArgs {
  ncclDevComm comm;
  ncclWindow_t win;
  int nRanks, rank, iters;
  size_t block, recvBase;
};

void ginA2aKernel(uniccl::dev::KernelArgs ka) {
  A2aArgs& a = *argsOf<A2aArgs>(ka);
  ncclCoopCta cta;
  ncclGin gin(a.comm, 0);
  ncclTeam world = ncclTeamWorld(a.comm);
  const int n = a.nRanks, me = a.rank;
  for (int it = 0; it < a.iters; it++) {
    for (int k = 0; k < n; k++) {
      const int d = (me + k) % n;
      gin.put(world, d, a.win, a.recvBase + (size_t)me * a.block, a.win, (size_t)d * a.block, a.block,
              ncclGin_SignalInc{0}, ncclGin_None{}, cta);
    }
    gin.flush(cta);
    gin.waitSignal(cta, 0, (uint64_t)(it + 1) * n);
    // The next iteration overwrites the same places: nobody may start it
    // before every rank has its data (the world's barrier, as nccl-tests).
    ncclBarrierSession<ncclCoopCta> bar(cta, ncclTeamTagWorld(), gin, 0);
    bar.sync(cta, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
  }
  if (cta.thread_rank() == 0) gin.resetSignal(0);
  cta.sync();
}

unsigned char a2aPattern(int s, int d, size_t j) { return (unsigned char)(s * 7 + d * 11 + j * 3 + 5); }

TEST(GinBench, AllToAll) {
  if (!gBench) GTEST_SKIP() << "a measurement: run with --bench";
  const int n = gRanks;
  const size_t maxBlock = size_t(4) << 20;
  World w;
  w.init(n, 2 * (size_t)n * maxBlock);
  std::vector<ncclDevCommRequirements> reqs(n, ginReqs(1, 0));
  for (auto& r : reqs) r.barrierCount = 1;
  for (ncclResult_t r : w.createDev(reqs)) ASSERT_EQ(r, ncclSuccess);
  using Clock = std::chrono::steady_clock;
  // ncclAlltoAll's streams live as long as the communicators' use of them.
  std::vector<uniccl::gpu::Stream> ss(n);
  for (int r = 0; r < n; r++) {
    mustSucceed(uniccl::gpu::setDevice(r), "setDevice");
    mustSucceed(uniccl::gpu::streamCreate(&ss[r]), "streamCreate");
  }
  printf("  %10s %6s %14s %14s %10s\n", "bytes/peer", "iters", "GIN us/iter", "A2A us/iter", "GIN/A2A");
  for (size_t block : {size_t(1) << 10, size_t(64) << 10, size_t(1) << 20, maxBlock}) {
    const int iters = block >= (size_t(1) << 20) ? 5 : 20;
    const size_t recvBase = (size_t)n * block;
    for (int r = 0; r < n; r++) {
      unsigned char* m = static_cast<unsigned char*>(w.mem[r]);
      for (int d = 0; d < n; d++)
        for (size_t j = 0; j < block; j++) m[(size_t)d * block + j] = a2aPattern(r, d, j);
      memset(m + recvBase, 0, (size_t)n * block);
    }
    auto check = [&](const char* what) {
      long bad = 0;
      for (int r = 0; r < n; r++)
        for (int s = 0; s < n; s++)
          for (size_t j = 0; j < block; j++)
            bad += static_cast<unsigned char*>(w.mem[r])[recvBase + (size_t)s * block + j] != a2aPattern(s, r, j);
      EXPECT_EQ(bad, 0) << what << " at " << block << " bytes per peer";
    };
    std::vector<A2aArgs> args(n);
    for (int r = 0; r < n; r++) args[r] = A2aArgs{w.dev[r], w.win[r], n, r, 1, block, recvBase};
    auto warm = launchAll(ginA2aKernel, 64, args);
    waitAll(warm);
    for (auto& x : args) x.iters = iters;
    auto t0 = Clock::now();
    auto streams = launchAll(ginA2aKernel, 64, args);
    waitAll(streams);
    const double ginUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
    check("GIN all-to-all");
    for (int r = 0; r < n; r++) memset(static_cast<char*>(w.mem[r]) + recvBase, 0, (size_t)n * block);
    // One thread per rank, as separate processes would call it.
    auto runA2a = [&](int times) {
      std::vector<std::thread> t;
      for (int r = 0; r < n; r++)
        t.emplace_back([&, r] {
          mustSucceed(uniccl::gpu::setDevice(r), "setDevice");
          for (int k = 0; k < times; k++)
            mustSucceed(ncclAlltoAll(w.mem[r], static_cast<char*>(w.mem[r]) + recvBase, block, ncclUint8, w.comms[r],
                                     static_cast<uniccl_stream_t>(ss[r])),
                        "ncclAlltoAll");
          mustSucceed(uniccl::gpu::streamSynchronize(ss[r]), "streamSynchronize");
        });
      for (auto& x : t) x.join();
    };
    runA2a(1);
    t0 = Clock::now();
    runA2a(iters);
    const double a2aUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
    check("ncclAlltoAll");
    printf("  %10zu %6d %14.1f %14.1f %10.2f\n", block, iters, ginUs, a2aUs, a2aUs / ginUs);
  }
  waitAll(ss);
}

// ================================================================ barriers
constexpr int kBarRounds = 16;

struct BarArgs {
  ncclDevComm comm;
  ncclWindow_t win;
  ncclGinBarrierHandle ginBar;
  int launch;
  unsigned char* local;
  Errors* errors;
};

uint64_t barValue(int launch, int round, int rank) { return ((uint64_t)(launch * 100 + round + 1) << 16) | (uint64_t)rank; }

void barrierKernel(uniccl::dev::KernelArgs ka) {
  BarArgs& a = *argsOf<BarArgs>(ka);
  ncclCoopCta cta;
  ncclGin gin(a.comm, 0);
  ncclTeam world = ncclTeamWorld(a.comm);
  const int n = a.comm.nRanks, me = a.comm.rank, tid = cta.thread_rank();
  Errors& e = *a.errors;
  for (int k = 0; k < kBarRounds; k++) {
    // This round's value into slot `me` of every other rank (one thread per
    // peer; a barrier orders puts to the peers it signals, not to this rank).
    for (int p = tid; p < n; p += cta.size()) {
      if (p != me)
        gin.putValue(world, p, a.win, (size_t)me * 8, barValue(a.launch, k, me), ncclGin_None{}, ncclCoopThread());
      else
        *(volatile uint64_t*)(a.local + (size_t)me * 8) = barValue(a.launch, k, me);   // window data, not a flag
    }
    {
      ncclBarrierSession<ncclCoopCta> bar(cta, ncclTeamTagWorld(), gin, (uint32_t)(k % 2));
      bar.sync(cta, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
    }
    for (int p = tid; p < n; p += cta.size()) {
      uint64_t v = *(volatile uint64_t*)(a.local + (size_t)p * 8);   // ordered by the world barrier
      if (!e.check(v == barValue(a.launch, k, p)))
        e.add("rank %d launch %d round %d: rank %d's value %llx after the world barrier, want %llx", me, a.launch, k, p,
              (unsigned long long)v, (unsigned long long)barValue(a.launch, k, p));
    }
    // Nobody writes the next round before every rank checked this one.
    ncclGinBarrierSession<ncclCoopCta> bar2(cta, gin, world, a.ginBar, (uint32_t)(k % 3));
    bar2.sync(cta, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
  }
}

TEST(Gin, Barriers) {
  const int n = gRanks;
  World w;
  w.init(n, 65536);
  std::vector<ncclDevCommRequirements> reqs(n, ginReqs(0, 0));
  std::vector<ncclGinBarrierHandle> handles(n);
  std::vector<ncclDevResourceRequirements> res(n);
  for (int r = 0; r < n; r++) {
    ASSERT_EQ(ncclGinBarrierCreateRequirement(w.comms[r], ncclTeamWorld(w.comms[r]), 3, &handles[r], &res[r]),
              ncclSuccess);
    reqs[r].barrierCount = 2;   // world barriers: LSA + rail GIN (every LSA team is one rank here)
    reqs[r].resourceRequirementsList = &res[r];
  }
  for (ncclResult_t r : w.createDev(reqs)) ASSERT_EQ(r, ncclSuccess);
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(handles[r].signal0, handles[0].signal0);
    EXPECT_EQ(handles[r].bufHandle, handles[0].bufHandle);
    EXPECT_EQ(w.dev[r].ginSignalCount, (n > 1 ? 2 : 0) + 3) << "rail barriers' signals + the requirement's";
  }
  Errors e;
  const int launches = 2;
  for (int l = 0; l < launches; l++) {
    std::vector<BarArgs> args(n);
    for (int r = 0; r < n; r++)
      args[r] = BarArgs{w.dev[r], w.win[r], handles[r], l, static_cast<unsigned char*>(w.mem[r]), &e};
    auto streams = launchAll(barrierKernel, 64, args);
    waitAll(streams);
  }
  e.expectNone();
  // The epochs were persisted: barrier index i of the explicit GIN barrier
  // ran (rounds with k % 3 == i) * launches times, n - 1 signals each.
  for (int r = 0; r < n; r++) {
    const ncclWindow_vidmem& rw = w.dev[r].resourceWindow_inlined;
    const uint32_t* words = (const uint32_t*)(rw.lsaFlatBase + (size_t)rw.lsaRank * ((size_t)rw.stride4G << 32) +
                                              (size_t)handles[r].bufHandle * 128);
    for (int i = 0; i < 3; i++) {
      int uses = 0;
      for (int k = 0; k < kBarRounds; k++) uses += k % 3 == i;
      EXPECT_EQ(words[i * NCCL_GIN_MAX_CONTEXTS], (uint32_t)(uses * launches * (n - 1))) << "rank " << r << " barrier " << i;
    }
  }
}

// ================================================================== abort
struct WaitArgs {
  ncclDevComm comm;
  std::atomic<int>* ended;
};
void waitForeverKernel(uniccl::dev::KernelArgs ka) {
  WaitArgs& a = *argsOf<WaitArgs>(ka);
  ncclGin gin(a.comm, 0);
  gin.waitSignal(ncclCoopCta(), 0, 1);   // nobody signals
  if (ncclCoopCta().thread_rank() == 0) a.ended->fetch_add(1);
}

TEST(Gin, AbortEndsWaitingKernel) {
  const int n = gRanks;
  World w;
  w.init(n, 65536);
  std::vector<ncclDevCommRequirements> reqs(n, ginReqs(1, 0));
  for (ncclResult_t r : w.createDev(reqs)) ASSERT_EQ(r, ncclSuccess);
  std::atomic<int> ended{0};
  std::vector<WaitArgs> args(n, WaitArgs{ncclDevComm{}, &ended});
  for (int r = 0; r < n; r++) args[r].comm = w.dev[r];
  auto streams = launchAll(waitForeverKernel, 32, args);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(ended.load(), 0) << "a kernel left its wait without a signal";
  auto t0 = std::chrono::steady_clock::now();
  w.destroy(/*abortComms=*/true);
  waitAll(streams);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(ended.load(), n);
  EXPECT_LT(s, 10.0);
  printf("  ncclCommAbort ended %d waiting kernels in %.3f s\n", n, s);
}

// ========================================================== bad arguments
TEST(Gin, Refusals) {
  const int n = gRanks;
  World w;
  w.init(n, 65536);
  {
    std::vector<ncclDevCommRequirements> reqs(n, ginReqs(1, 1));
    for (auto& r : reqs) r.lsaMultimem = true;   // multimem stays refused, GIN or not
    for (ncclResult_t r : w.createDev(reqs)) EXPECT_EQ(r, ncclInvalidUsage);
  }
  {
    std::vector<ncclDevCommRequirements> reqs(n, ginReqs(-1, 0));
    for (ncclResult_t r : w.createDev(reqs)) EXPECT_EQ(r, ncclInvalidArgument);
  }
  {
    std::vector<ncclDevCommRequirements> reqs(n, ginReqs(70000, 0));
    for (ncclResult_t r : w.createDev(reqs)) EXPECT_EQ(r, ncclInvalidArgument);
  }
  if (n > 1) {
    std::vector<ncclDevCommRequirements> reqs(n, ginReqs(4, 0));
    reqs[n - 1].ginSignalCount = 5;   // ranks disagree
    for (ncclResult_t r : w.createDev(reqs)) EXPECT_EQ(r, ncclInvalidUsage);
  }
  w.haveDev = false;
  // Resource requirements get their ids after the requirements' own.
  {
    std::vector<ncclDevCommRequirements> reqs(n, ginReqs(3, 2));
    std::vector<ncclDevResourceRequirements> res(n);
    std::vector<ncclGinSignal_t> sig(n, 99);
    std::vector<ncclGinCounter_t> cnt(n, 99);
    for (int r = 0; r < n; r++) {
      memset(&res[r], 0, sizeof(res[r]));
      res[r].ginSignalCount = 2;
      res[r].ginCounterCount = 1;
      res[r].outGinSignalStart = &sig[r];
      res[r].outGinCounterStart = &cnt[r];
      reqs[r].resourceRequirementsList = &res[r];
    }
    for (ncclResult_t r : w.createDev(reqs)) ASSERT_EQ(r, ncclSuccess);
    for (int r = 0; r < n; r++) {
      EXPECT_EQ(sig[r], 3u);
      EXPECT_EQ(cnt[r], 2u);
      EXPECT_EQ(w.dev[r].ginSignalCount, 5);
      EXPECT_EQ(w.dev[r].ginCounterCount, 3);
      EXPECT_EQ(ncclDevCommDestroy(w.comms[r], &w.dev[r]), ncclSuccess);
      EXPECT_EQ(ncclDevCommDestroy(w.comms[r], &w.dev[r]), ncclInvalidArgument);
    }
    w.haveDev = false;
  }
}

struct BadPutArgs {
  ncclDevComm comm;
  ncclWindow_t win;
  size_t bytes;
};
void badPutKernel(uniccl::dev::KernelArgs ka) {
  BadPutArgs& a = *argsOf<BadPutArgs>(ka);
  ncclGin gin(a.comm, 0);
  if (a.comm.rank == 0 && ncclCoopCta().thread_rank() == 0) gin.put(ncclTeamWorld(a.comm), a.comm.nRanks - 1, a.win, 4096, a.win, 0, a.bytes);
}

TEST(Gin, PutOutsideWindowAbortsComm) {
  const int n = gRanks;
  World w;
  w.init(n, 65536);
  std::vector<ncclDevCommRequirements> reqs(n, ginReqs(1, 0));
  for (ncclResult_t r : w.createDev(reqs)) ASSERT_EQ(r, ncclSuccess);
  std::vector<BadPutArgs> args(n);
  for (int r = 0; r < n; r++) args[r] = BadPutArgs{w.dev[r], w.win[r], 65536};   // 4096 + 65536 > the window
  auto streams = launchAll(badPutKernel, 32, args);
  waitAll(streams);
  ncclResult_t err = ncclSuccess;
  for (int i = 0; i < 1000; i++) {
    ncclCommGetAsyncError(w.comms[n - 1], &err);   // the destination rank finds the bad put
    if (err != ncclSuccess && err != ncclInProgress) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(err, ncclInvalidUsage);
  w.destroy(/*abortComms=*/true);
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], "--ranks=", 8) == 0) gRanks = atoi(argv[i] + 8);
    else if (strcmp(argv[i], "--bench") == 0) gBench = true;
  int devices = 0;
  if (gRanks < 1 || gRanks > 8 || uniccl::gpu::getDeviceCount(&devices) != ncclSuccess || devices < gRanks) {
    fprintf(stderr, "--ranks 1..8 and at least that many emulated GPUs (UNICCL_EMU_DEVICES)\n");
    return 2;
  }
  uniccl::emu::installSizedCpuKernelRunner();
  printf("%d ranks\n", gRanks);
  return RUN_ALL_TESTS();
}
