// The CPU port of port.h: the kernels compiled as plain C++ (-DUNICCL_DEV_CPU)
// where every GPU thread of a block is a fiber, a user-level thread that
// runs until it waits (a barrier, a polling load) and then lets the next
// one of its block run; each block runs on an OS thread of its own, so
// blocks, ranks and host threads run at once as on a GPU. The emulator in
// tests/emu runs them under an emulated GPU backend, so the whole library
// (bootstrap, transports, proxy and network, planner, kernels) is tested end
// to end on machines without a GPU. It proves the algorithms' logic (step
// and slot arithmetic, protocols, counters, aborts), not GPU memory-ordering
// subtleties: x86 is stronger than either GPU.
//
// Included only by port.h. The thread and block context (threadIdx,
// blockIdx, the block's shared memory and barriers) is set by the emulator's
// kernel runner (tests/emu/emu_runtime.cc). The accesses of words other
// agents read or write (counters, flags, LL lines, stamps) are the Device
// API's emulator primitives (include/nccl_device/impl/sync.h, devapi::),
// with this port's own polled-memory check and polling yields around them.
#pragma once

#include <sched.h>
#include <time.h>

#include <cstdint>

#include "nccl_device/impl/sync.h"

#define UNICCL_DEVICE_COMPILER 1
#define UNICCL_DEV_CPU_PORT 1
#define UNICCL_HD inline
#define UDEV inline
#define UDEV_NOINLINE __attribute__((noinline))
#define __global__
#define __launch_bounds__(threads, blocks)

namespace uniccl::dev {

// The emulated wavefront: 32 lanes by default, 64 in the wave64 build of
// the emulated kernels (tests/emu). Sub-group barriers run HIP's algorithm
// (device/sub_barrier.h) at either width.
#ifndef UNICCL_EMU_WAVE
#define UNICCL_EMU_WAVE 32
#endif
constexpr int kWarpSize = UNICCL_EMU_WAVE;

// The emulated fp8 encoding: OCP (e4m3fn / e5m2, NVIDIA's) by default, AMD's
// FNUZ formats in the FNUZ build of the emulated kernels (tests/emu:
// -DUNICCL_EMU_FP8_FNUZ), as MI300 runs them (device/port.h says which
// targets use which; device/small_float.h converts).
#if defined(UNICCL_EMU_FP8_FNUZ)
#define UNICCL_FP8_FNUZ 1
#endif

struct EmuDim3 {
  unsigned x, y, z;
};
// Set by the kernel runner for each emulated thread.
extern thread_local EmuDim3 threadIdx;
extern thread_local EmuDim3 blockIdx;
extern thread_local EmuDim3 blockDim;

// The runner's per-block services.
void* emuBlockShared();                 // this block's shared memory (zeroed at launch)
void emuBarrier(int id, int nthreads);  // named barrier: id 0 = the whole block
void emuWaveSync();                     // the lanes of this thread's wavefront meet
void emuLaneSync(int n);                // the aligned group of n lanes (a power of two) meets
void emuPoll();                         // a polling loop's pause: lets producers run on few cores

// The polled-memory check (tests/emu: UNICCL_EMU_CHECK_POLLED=1, set before
// the process starts): every access below to memory that another agent
// writes or reads while kernels run (counters, LL and LL128 lines, the
// abort flag, work items, conn FIFOs, watchdog words, profiler stamps) must
// lie in polled memory, as the GPU backends allocate it
// (gpu::deviceAllocPolled, hostAllocMapped, registered host memory, polled
// virtual memory); emuCheckPolled aborts the process otherwise, naming the
// access. Off: one predictable branch per access. Not loadCG: it also
// reads data a peer stored into a registered buffer (direct receives),
// which is ordered by counters, not polled; transport-polled-memory checks
// the receive slots.
extern bool gEmuCheckPolled;
void emuCheckPolled(const void* p, const char* what);
inline void polledAccess(const void* p, const char* what) {
  if (__builtin_expect(gEmuCheckPolled, 0)) emuCheckPolled(p, what);
}

// 16 bytes moved as one unit.
struct alignas(16) Pack16 {
  uint32_t x, y, z, w;
};

// Shared memory of a block: one object of type T per block.
template <typename T>
UDEV T& blockShared() {
  return *static_cast<T*>(emuBlockShared());
}

UDEV uint64_t pollCounter(const uint64_t* p) {
  polledAccess(p, "pollCounter (a counter)");
  emuPoll();
  return devapi::loadSys<__ATOMIC_ACQUIRE>(p);
}
UDEV void acquireAfterPoll() { devapi::fenceAcquireSys(); }
UDEV void postCounter(uint64_t* p, uint64_t v) {
  polledAccess(p, "postCounter (a counter)");
  devapi::storeSys<__ATOMIC_RELEASE>(p, v);
}
UDEV void postCounterRelaxed(uint64_t* p, uint64_t v) {
  polledAccess(p, "postCounterRelaxed (a counter)");
  devapi::storeSys<__ATOMIC_RELAXED>(p, v);
}
// One coherent memory: the system-scope pair is the same pair (port.h).
UDEV void postCounterSystem(uint64_t* p, uint64_t v) { postCounter(p, v); }
UDEV void acquireAfterPollSystem(const uint64_t*) { acquireAfterPoll(); }
UDEV void fenceSystem() { devapi::fenceSeqCstSys(); }
UDEV void fenceBlock() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
UDEV uint32_t loadVolatile32(const volatile uint32_t* p) {
  polledAccess(const_cast<const uint32_t*>(p), "loadVolatile32 (the abort flag)");
  return devapi::loadSys<__ATOMIC_ACQUIRE>(const_cast<const uint32_t*>(p));
}
UDEV void storeVolatile64(int64_t* p, int64_t v) {
  polledAccess(p, "storeVolatile64 (a conn FIFO entry)");
  devapi::storeSys<__ATOMIC_RELAXED>(p, v);
}
UDEV void storeVolatileU64(uint64_t* p, uint64_t v) {
  polledAccess(p, "storeVolatileU64 (a watchdog progress word)");
  devapi::storeSys<__ATOMIC_RELAXED>(p, v);
}
UDEV void storeStampPair(uint64_t* p, uint64_t counter, uint64_t value) {
  polledAccess(p, "storeStampPair (a profiler stamp)");
  devapi::storeSys<__ATOMIC_RELAXED>(p + 1, value);
  devapi::storeSys<__ATOMIC_RELEASE>(p, counter);
}

// Receive slots are rewritten by the peer: read them with relaxed atomics
// (the acquire on the counter ordered them) so that the compiler cannot
// cache or tear them.
template <typename T>
UDEV T loadCG(const T* p) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "loadCG size");
  if constexpr (sizeof(T) == 1) {
    uint8_t v = __atomic_load_n(reinterpret_cast<const uint8_t*>(p), __ATOMIC_RELAXED);
    return *reinterpret_cast<T*>(&v);
  } else if constexpr (sizeof(T) == 2) {
    uint16_t v = __atomic_load_n(reinterpret_cast<const uint16_t*>(p), __ATOMIC_RELAXED);
    return *reinterpret_cast<T*>(&v);
  } else if constexpr (sizeof(T) == 4) {
    uint32_t v = __atomic_load_n(reinterpret_cast<const uint32_t*>(p), __ATOMIC_RELAXED);
    return *reinterpret_cast<T*>(&v);
  } else {
    uint64_t v = __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_RELAXED);
    return *reinterpret_cast<T*>(&v);
  }
}
template <>
inline Pack16 loadCG<Pack16>(const Pack16* p) {
  const uint64_t* q = reinterpret_cast<const uint64_t*>(p);
  const uint64_t a = __atomic_load_n(q, __ATOMIC_RELAXED), b = __atomic_load_n(q + 1, __ATOMIC_RELAXED);
  return Pack16{(uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b, (uint32_t)(b >> 32)};
}

UDEV Pack16 load16(const Pack16* p) { return *p; }
UDEV void store16(Pack16* p, const Pack16& v) {
  uint64_t* q = reinterpret_cast<uint64_t*>(p);
  __atomic_store_n(q, (uint64_t)v.x | ((uint64_t)v.y << 32), __ATOMIC_RELAXED);
  __atomic_store_n(q + 1, (uint64_t)v.z | ((uint64_t)v.w << 32), __ATOMIC_RELAXED);
}

// LL: each 8-byte half (data, flag) is one single-copy-atomic store, as on HIP.
UDEV void storeLLLine(Pack16* p, uint32_t d0, uint32_t d1, uint32_t flag) {
  polledAccess(p, "storeLLLine (an LL line)");
  uint64_t* q = reinterpret_cast<uint64_t*>(p);
  devapi::storeSys<__ATOMIC_RELAXED>(q, (uint64_t)d0 | ((uint64_t)flag << 32));
  devapi::storeSys<__ATOMIC_RELAXED>(q + 1, (uint64_t)d1 | ((uint64_t)flag << 32));
}
// A work item: two relaxed 8-byte loads (the slots' loadCG).
UDEV Pack16 loadVolatile16(const Pack16* p) {
  polledAccess(p, "loadVolatile16 (a work item)");
  emuPoll();
  return loadCG(p);
}
UDEV Pack16 loadLLLine(const Pack16* p) {
  polledAccess(p, "loadLLLine (an LL line)");
  emuPoll();
  const uint64_t* q = reinterpret_cast<const uint64_t*>(p);
  const uint64_t a = devapi::loadSys<__ATOMIC_RELAXED>(q), b = devapi::loadSys<__ATOMIC_RELAXED>(q + 1);
  return Pack16{(uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b, (uint32_t)(b >> 32)};
}

// LL128 (device/port.h says what the GPU guarantees: a warp's 128-byte
// line store lands as one unit, and a reader that sees a line's flag sees
// its data). The emulated lanes run one after another, switching where
// they wait, so the line is made whole by ordering instead: the 8 lanes
// of the line store their words, meet (emuLaneSync: their stores happen
// before what follows), and
// the flag lane then stores the flag with release. Every lane reads its
// line's flag itself, with acquire, and only then its own words: a lane
// that sees the flag sees the whole line, never a line torn between two
// steps, which is exactly the GPU's guarantee as the algorithm uses it
// (on the GPU only the flag lane reads the flag and the warp votes; here
// each lane is its own flag lane, so the poll vote is the lane's own).
// The lanes of a line call storeLL128 together (a line is stored by all or
// none of them: the caller's lines are uniform per group of 8 lanes).
// The emulator runs LL128 in the collective kernels (device/port.h's
// kCollKernelsHaveLL128), also in its 64-lane (AMD-shaped) mode.
constexpr bool kCollKernelsHaveLL128 = true;
UDEV void storeLL128(uint64_t* line, int sub, uint64_t v0, uint64_t v1) {
  polledAccess(line, "storeLL128 (an LL128 line)");
  uint64_t* q = line + 2 * sub;
  if (sub != kLL128LanesPerLine - 1) {
    devapi::storeSys<__ATOMIC_RELAXED>(q, v0);
    devapi::storeSys<__ATOMIC_RELAXED>(q + 1, v1);
    emuLaneSync(kLL128LanesPerLine);
  } else {
    emuLaneSync(kLL128LanesPerLine);
    devapi::storeSys<__ATOMIC_RELAXED>(q, v0);
    devapi::storeSys<__ATOMIC_RELEASE>(q + 1, v1);   // the flag, last
  }
}
UDEV bool loadLL128(const uint64_t* line, int sub, uint64_t flag, uint64_t* v0, uint64_t* v1) {
  polledAccess(line, "loadLL128 (an LL128 line)");
  emuPoll();
  if (devapi::loadSys<__ATOMIC_ACQUIRE>(line + kLL128LineWords - 1) != flag) return false;
  const uint64_t* q = line + 2 * sub;
  *v0 = devapi::loadSys<__ATOMIC_RELAXED>(q);
  *v1 = devapi::loadSys<__ATOMIC_RELAXED>(q + 1);
  return true;
}
UDEV bool ll128PollAgain(bool again) { return again; }
UDEV void ll128Converge() {}   // storeLL128's lane meeting orders the line
// The lanes of one line vote (tests/emu/emu_runtime.cc): a line's lanes poll
// on their own here, so one may see an abort while another sees the flag;
// the vote makes them leave together, never leaving a lane alone in
// storeLL128's meeting.
bool emuLaneAny(int n, bool b);
UDEV bool ll128LineAny(bool b) { return emuLaneAny(kLL128LanesPerLine, b); }

UDEV void barrierBlock() { emuBarrier(0, (int)blockDim.x); }

// HIP's sub-group barrier (device/sub_barrier.h) over host atomics; the
// lockstep of a wavefront's lanes is a barrier of its kWarpSize threads.
UDEV unsigned wgLoadAcquire(const unsigned* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
UDEV unsigned wgFetchAddAcqRel(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
UDEV void wgStoreRelaxed(unsigned* p, unsigned v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
UDEV void wgStoreRelease(unsigned* p, unsigned v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
UDEV void waveSync() { emuWaveSync(); }
UDEV void sleepBrief();
}  // namespace uniccl::dev
#include "device/sub_barrier.h"
namespace uniccl::dev {
UDEV void barrierSub(int /*id*/, int nthreads, SubBarrierState* st) { barrierSubWaves(nthreads, st); }

// Emulated launches run one after the other: nothing to wait for.
UDEV void waitPriorGrids() {}
UDEV void releaseDependentGrids() {}

UDEV void sleepBrief() { emuPoll(); }   // the next emulated thread runs
UDEV void spinPause() {}   // the polling loads yield already (emuPoll)

UDEV uint64_t globalTimer() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

}  // namespace uniccl::dev
