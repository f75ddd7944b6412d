// Kernel runner of the CPU emulator: each block on an OS thread of its own,
// its emulated GPU threads fibers on it (emu_fiber.h) that switch where a
// GPU thread would wait: at barriers and in polling loops. A block's shared
// memory, barriers and votes live in a context its fibers point to; as they
// all run on one OS thread, none of it needs a lock.
#include "emu_runtime.h"

#include <sched.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "device/dev_types.h"
#include "device/port.h"
#include "emu_fiber.h"
#include "emu_gpu.h"

namespace uniccl::dev {

thread_local EmuDim3 threadIdx{0, 0, 0};
thread_local EmuDim3 blockIdx{0, 0, 0};
thread_local EmuDim3 blockDim{0, 0, 0};

namespace {

using KernelFn = void (*)(KernelArgs);

// A barrier of `n` fibers of one block (generation counting).
struct Barrier {
  int arrived = 0;
  uint64_t generation = 0;
};

constexpr size_t kSharedBytes = 16 << 10;   // BlockShared is well under this
// Blocks of the sizes launches ask for (runSizedCpuKernel: kernels of Device
// API tests): whole wavefronts, at most this many emulated threads.
constexpr unsigned kMaxBlockThreads = 1024;

struct BlockContext;

// One emulated GPU thread.
struct EmuThread {
  BlockContext* block = nullptr;
  std::unique_ptr<emu::Fiber> fiber;
  unsigned votes = 0;   // emuLaneAny calls of this thread (its lanes make as many)
  // Blocked in a barrier until *waitWord != waitValue (null: runnable).
  const uint64_t* waitWord = nullptr;
  uint64_t waitValue = 0;
  bool polled = false;   // it gave way in a polling loop (no progress of its own)
  bool done = false;
};

struct BlockContext {
  explicit BlockContext(unsigned nthreads)
      : waves(new Barrier[nthreads / kWarpSize]), lanes(new Barrier[nthreads]),
        votes(new std::atomic<unsigned>[3 * (size_t)nthreads]), threads(nthreads) {
    for (unsigned i = 0; i < 3 * nthreads; i++) votes[i].store(0, std::memory_order_relaxed);
    memset(shared, 0, sizeof(shared));
  }
  alignas(64) unsigned char shared[kSharedBytes];
  Barrier barriers[16];   // bar.sync ids 0..15
  std::unique_ptr<Barrier[]> waves;   // each wavefront's lockstep (emuWaveSync)
  // Aligned groups of 2, 4, ... kWarpSize / 2 lanes (emuLaneSync): the groups
  // of 2^k lanes from index nthreads - 2 * nthreads / 2^k (fewer than nthreads in all).
  std::unique_ptr<Barrier[]> lanes;
  // emuLaneAny's vote words, three per lane group (indexed as `lanes`). Atomic
  // although one OS thread runs the block: the kernels' code is compiled
  // as for threads that run at once.
  std::unique_ptr<std::atomic<unsigned>[]> votes;
  std::vector<EmuThread> threads;
  emu::Fiber* scheduler = nullptr;   // the OS thread's own context
  KernelFn fn = nullptr;
  KernelArgs args;
};

thread_local BlockContext* tBlock = nullptr;
thread_local EmuThread* tThread = nullptr;

// Back to the block's scheduler; it resumes this fiber when its turn (and,
// when blocked, its barrier) comes.
void giveWay() { emu::Fiber::switchTo(tThread->fiber.get(), tBlock->scheduler); }

void barrierWait(Barrier& b, int n) {
  const uint64_t gen = b.generation;
  if (++b.arrived == n) {
    b.arrived = 0;
    b.generation++;
    return;
  }
  tThread->waitWord = &b.generation;
  tThread->waitValue = gen;
  giveWay();
}

void threadMain(void* p) {
  EmuThread* t = static_cast<EmuThread*>(p);
  t->block->fn(t->block->args);
  t->done = true;
  emu::Fiber::finishTo(t->fiber.get(), t->block->scheduler);
}

// Runs every thread of `b` round-robin on the calling OS thread until all
// ended. A round in which every runnable fiber only polled hands the CPU
// to other OS threads (other blocks, other ranks, proxies, stream workers),
// which are what the pollers wait for.
void runBlock(BlockContext* b, unsigned blockIndex, unsigned nthreads) {
  tBlock = b;
  blockIdx = {blockIndex, 0, 0};
  blockDim = {nthreads, 1, 1};
  b->scheduler = emu::Fiber::forThisThread();
  for (EmuThread& t : b->threads) {
    t.block = b;
    t.fiber = std::make_unique<emu::Fiber>(&threadMain, &t);
  }
  unsigned alive = nthreads;
  while (alive > 0) {
    bool progress = false;
    for (unsigned i = 0; i < nthreads; i++) {
      EmuThread& t = b->threads[i];
      if (t.done) continue;
      if (t.waitWord) {
        if (*t.waitWord == t.waitValue) continue;
        t.waitWord = nullptr;
      }
      tThread = &t;
      threadIdx = {i, 0, 0};
      t.polled = false;
      emu::Fiber::switchTo(b->scheduler, t.fiber.get());
      if (t.done) alive--;
      if (!t.polled) progress = true;
    }
    if (!progress) sched_yield();
  }
  tThread = nullptr;
  tBlock = nullptr;
  for (EmuThread& t : b->threads) t.fiber.reset();
}

}  // namespace

void* emuBlockShared() { return tBlock->shared; }

// Memory effects before the barrier are visible after it: the block's
// fibers run on one OS thread, and a switch is an opaque call.
void emuBarrier(int id, int nthreads) { barrierWait(tBlock->barriers[id & 15], nthreads); }

void emuWaveSync() { barrierWait(tBlock->waves[threadIdx.x / kWarpSize], kWarpSize); }

// The aligned group of n lanes (a power of two up to the wavefront) that
// holds this thread meets, as the lanes of a GPU's tile do in lockstep.
void emuLaneSync(int n) {
  if (n <= 1) return;
  if (n >= kWarpSize) return emuWaveSync();
  const unsigned nthreads = blockDim.x;
  const unsigned base = nthreads - 2 * nthreads / (unsigned)n;
  barrierWait(tBlock->lanes[base + threadIdx.x / (unsigned)n], n);
}

// Any of the aligned group of n lanes (a power of two below the wavefront)
// passes true. Call k uses vote word k % 3: set, meet, read; after the
// meeting, the group's first lane clears the word of call k - 1, which
// every lane read before it came to this meeting and nobody sets again
// before call k + 2, past the next meeting.
bool emuLaneAny(int n, bool b) {
  const unsigned nthreads = blockDim.x;
  const unsigned base = nthreads - 2 * nthreads / (unsigned)n;
  const unsigned g = base + threadIdx.x / (unsigned)n;
  const unsigned k = tThread->votes++ % 3;
  std::atomic<unsigned>* w = &tBlock->votes[3 * (size_t)g];
  if (b) w[k].fetch_or(1, std::memory_order_relaxed);
  barrierWait(tBlock->lanes[g], n);
  const bool any = w[k].load(std::memory_order_relaxed) != 0;
  if (threadIdx.x % (unsigned)n == 0) w[(k + 2) % 3].store(0, std::memory_order_relaxed);
  return any;
}

// A polling loop's pause: the next fiber of the block runs (the producer
// may be one of them); outside a kernel, the OS thread gives way.
void emuPoll() {
  if (tThread == nullptr) {
    sched_yield();
    return;
  }
  tThread->polled = true;
  giveWay();
}

// UNICCL_EMU_CHECK_POLLED=1: device/port_cpu.h's polled-memory check.
bool gEmuCheckPolled = [] {
  const char* v = std::getenv("UNICCL_EMU_CHECK_POLLED");
  return v != nullptr && std::strcmp(v, "1") == 0;
}();

// Polls return to the same word: the allocation last found polled is
// remembered per thread.
void emuCheckPolled(const void* p, const char* what) {
  thread_local uintptr_t okLo = 0, okHi = 0;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a >= okLo && a < okHi) return;
  uintptr_t lo = 0, hi = 0;
  const char* kind = nullptr;
  if (emu::polledRange(p, &lo, &hi, &kind)) {
    okLo = lo;
    okHi = hi;
    return;
  }
  std::fprintf(stderr, "[emu] polled-memory check: %s at %p lies in %s, not in polled memory "
               "(gpu::deviceAllocPolled, hostAllocMapped, registered host memory or polled virtual memory)\n",
               what, p, kind);
  std::abort();
}

}  // namespace uniccl::dev

// What include/nccl_device/impl/port.h calls in the emulator build of the
// Device API's device functions (public headers cannot include src/).
extern "C" {
unsigned uniccl_emu_thread_index(void) { return uniccl::dev::threadIdx.x; }
unsigned uniccl_emu_block_threads(void) { return uniccl::dev::blockDim.x; }
unsigned uniccl_emu_block_index(void) { return uniccl::dev::blockIdx.x; }   // for test kernels
unsigned uniccl_emu_wave_size(void) { return uniccl::dev::kWarpSize; }
void uniccl_emu_barrier(int id, int nThreads) { uniccl::dev::emuBarrier(id, nThreads); }
void uniccl_emu_lane_sync(int nLanes) { uniccl::dev::emuLaneSync(nLanes); }
void uniccl_emu_poll(void) { uniccl::dev::emuPoll(); }
void uniccl_emu_check_polled(const void* p, const char* what) {
  if (uniccl::dev::gEmuCheckPolled) uniccl::dev::emuCheckPolled(p, what);
}
}

namespace uniccl::emu {

namespace {

void runBlocks(const void* kernel, unsigned gridX, unsigned nthreads, const void* argBytes) {
  std::vector<std::unique_ptr<dev::BlockContext>> blocks(gridX);
  for (auto& b : blocks) {
    b = std::make_unique<dev::BlockContext>(nthreads);
    b->fn = reinterpret_cast<dev::KernelFn>(const_cast<void*>(kernel));
    memcpy(&b->args, argBytes, sizeof(b->args));
  }
  // Block 0 on the calling thread (the stream's worker), the others on threads of their own.
  std::vector<std::thread> threads;
  threads.reserve(gridX);
  for (unsigned b = 1; b < gridX; b++)
    threads.emplace_back([&blocks, b, nthreads] { dev::runBlock(blocks[b].get(), b, nthreads); });
  if (gridX > 0) dev::runBlock(blocks[0].get(), 0, nthreads);
  for (std::thread& th : threads) th.join();
}

}  // namespace

void runCpuKernel(const void* kernel, unsigned gridX, unsigned /*blockX*/, const void* argBytes) {
  runBlocks(kernel, gridX, dev::kThreadsPerBlock, argBytes);
}

void runSizedCpuKernel(const void* kernel, unsigned gridX, unsigned blockX, const void* argBytes) {
  if (blockX == 0 || blockX % dev::kWarpSize != 0 || blockX > dev::kMaxBlockThreads) {
    fprintf(stderr, "emu runSizedCpuKernel: a block of %u threads (the emulator runs whole %d-lane wavefronts, "
            "at most %u threads)\n", blockX, dev::kWarpSize, dev::kMaxBlockThreads);
    abort();
  }
  runBlocks(kernel, gridX, blockX, argBytes);
}

void installCpuKernelRunner() { setKernelRunner(&runCpuKernel); }
void installSizedCpuKernelRunner() { setKernelRunner(&runSizedCpuKernel); }

}  // namespace uniccl::emu
