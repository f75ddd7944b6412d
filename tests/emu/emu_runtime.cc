// Kernel runner of the CPU emulator: one OS thread per GPU thread, a block's
// shared memory and barriers in a context all its threads point to.
#include "emu_runtime.h"

#include <sched.h>

#include <condition_variable>
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
constexpr int kMaxThreads = dev::kThreadsPerBlock;

struct BlockContext {
  alignas(64) unsigned char shared[kSharedBytes];
  Barrier barriers[16];   // bar.sync ids 0..15
  Barrier waves[kMaxThreads / dev::kWarpSize];   // each wavefront's lockstep (emuWaveSync)
};

thread_local BlockContext* tBlock = nullptr;
thread_local unsigned tPolls = 0;

}  // namespace

void* emuBlockShared() { return tBlock->shared; }

void emuBarrier(int id, int nthreads) {
  // Memory effects before the barrier are visible after it: the mutex orders them.
  tBlock->barriers[id & 15].wait(nthreads);
}

void emuWaveSync() { tBlock->waves[threadIdx.x / kWarpSize].wait(kWarpSize); }

void emuPoll() {
  // Polling threads give the CPU to the threads they wait for (2 cores run
  // hundreds of emulated threads).
  if ((++tPolls & 3) == 0) sched_yield();
}

}  // namespace uniccl::dev

namespace uniccl::emu {

void runCpuKernel(const void* kernel, unsigned gridX, unsigned /*blockX*/, const void* argBytes) {
  using KernelFn = void (*)(dev::KernelArgs);
  const KernelFn fn = reinterpret_cast<KernelFn>(const_cast<void*>(kernel));
  dev::KernelArgs args;
  memcpy(&args, argBytes, sizeof(args));
  const unsigned nthreads = dev::kThreadsPerBlock;
  std::vector<std::unique_ptr<dev::BlockContext>> blocks(gridX);
  for (auto& b : blocks) {
    b = std::make_unique<dev::BlockContext>();
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

void installCpuKernelRunner() { setKernelRunner(&runCpuKernel); }

}  // namespace uniccl::emu
