// Kernel runner of the CPU emulator: one OS thread per GPU thread, a block's
// shared memory and barriers in a context all its threads point to.
#include "emu_runtime.h"

#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "device/dev_types.h"
#include "device/port.h"
#include "emu_gpu.h"

namespace uniccl::dev {

thread_local EmuDim3 threadIdx{0, 0, 0};
thread_local EmuDim3 blockIdx{0, 0, 0};
thread_local EmuDim3 blockDim{0, 0, 0};

namespace {

// A reusable barrier for `n` threads (generation counting, blocking).
struct Barrier {
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  void wait(int n) {
    std::unique_lock<std::mutex> lk(mu);
    const uint64_t gen = generation;
    if (++arrived == n) {
      arrived = 0;
      generation++;
      cv.notify_all();
      return;
    }
    cv.wait(lk, [&] { return generation != gen; });
  }
};

constexpr size_t kSharedBytes = 16 << 10;   // BlockShared is well under this
// Blocks of the sizes launches ask for (runSizedCpuKernel: kernels of Device
// API tests): whole wavefronts, at most this many OS threads.
constexpr unsigned kMaxBlockThreads = 1024;

struct BlockContext {
  explicit BlockContext(unsigned nthreads)
      : waves(new Barrier[nthreads / kWarpSize]), lanes(new Barrier[nthreads]),
        votes(new std::atomic<unsigned>[3 * (size_t)nthreads]) {
    for (unsigned i = 0; i < 3 * nthreads; i++) votes[i].store(0, std::memory_order_relaxed);
  }
  alignas(64) unsigned char shared[kSharedBytes];
  Barrier barriers[16];   // bar.sync ids 0..15
  std::unique_ptr<Barrier[]> waves;   // each wavefront's lockstep (emuWaveSync)
  // Aligned groups of 2, 4, ... kWarpSize / 2 lanes (emuLaneSync): the groups
  // of 2^k lanes from index nthreads - 2 * nthreads / 2^k (fewer than nthreads in all).
  std::unique_ptr<Barrier[]> lanes;
  // emuLaneAny's vote words, three per lane group (indexed as `lanes`).
  std::unique_ptr<std::atomic<unsigned>[]> votes;
};

thread_local BlockContext* tBlock = nullptr;
thread_local unsigned tPolls = 0;
thread_local unsigned tVotes = 0;   // emuLaneAny calls of this thread (its lanes make as many)

}  // namespace

void* emuBlockShared() { return tBlock->shared; }

void emuBarrier(int id, int nthreads) {
  // Memory effects before the barrier are visible after it: the mutex orders them.
  tBlock->barriers[id & 15].wait(nthreads);
}

void emuWaveSync() { tBlock->waves[threadIdx.x / kWarpSize].wait(kWarpSize); }

// The aligned group of n lanes (a power of two up to the wavefront) that
// holds this thread meets, as the lanes of a GPU's tile do in lockstep.
void emuLaneSync(int n) {
  if (n <= 1) return;
  if (n >= kWarpSize) return emuWaveSync();
  const unsigned nthreads = blockDim.x;
  const unsigned base = nthreads - 2 * nthreads / (unsigned)n;
  tBlock->lanes[base + threadIdx.x / (unsigned)n].wait(n);
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
  const unsigned k = tVotes++ % 3;
  std::atomic<unsigned>* w = &tBlock->votes[3 * (size_t)g];
  if (b) w[k].fetch_or(1, std::memory_order_relaxed);
  tBlock->lanes[g].wait(n);
  const bool any = w[k].load(std::memory_order_relaxed) != 0;
  if (threadIdx.x % (unsigned)n == 0) w[(k + 2) % 3].store(0, std::memory_order_relaxed);
  return any;
}

void emuPoll() {
  // Polling threads give the CPU to the threads they wait for (2 cores run
  // hundreds of emulated threads).
  if ((++tPolls & 3) == 0) sched_yield();
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
}

namespace uniccl::emu {

namespace {

void runBlocks(const void* kernel, unsigned gridX, unsigned nthreads, const void* argBytes) {
  using KernelFn = void (*)(dev::KernelArgs);
  const KernelFn fn = reinterpret_cast<KernelFn>(const_cast<void*>(kernel));
  dev::KernelArgs args;
  memcpy(&args, argBytes, sizeof(args));
  std::vector<std::unique_ptr<dev::BlockContext>> blocks(gridX);
  for (auto& b : blocks) {
    b = std::make_unique<dev::BlockContext>(nthreads);
    memset(b->shared, 0, sizeof(b->shared));
  }
  std::vector<std::thread> threads;
  threads.reserve((size_t)gridX * nthreads);
  for (unsigned b = 0; b < gridX; b++) {
    for (unsigned t = 0; t < nthreads; t++) {
      dev::BlockContext* ctx = blocks[b].get();
      threads.emplace_back([=] {
        dev::threadIdx = {t, 0, 0};
        dev::blockIdx = {b, 0, 0};
        dev::blockDim = {nthreads, 1, 1};
        dev::tBlock = ctx;
        fn(args);
      });
    }
  }
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
