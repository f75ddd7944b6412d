// The device portability header: the only file under src/device that names a
// vendor. Everything the kernels need from the hardware (scoped atomics,
// fences, cache-bypassing and 16-byte loads/stores, sub-group barriers,
// sleep, timer) is a small inline function here with one CUDA and one HIP
// body, so the algorithms above it are single-source. The system-scope
// accesses, fences and polling pause whose semantics the Device API shares
// come from its public include/nccl_device/impl/sync.h (devapi::); what is
// here is the kernels' own (docs/architecture.md, "Device portability").
//
// Included by host-only code too (the test harness reuses the float
// conversions): without a device compiler only UNICCL_HD is defined.
// With -DUNICCL_DEV_CPU and no device compiler, port_cpu.h provides the
// same functions for the CPU emulator (each GPU thread a fiber, each block an OS thread).
#pragma once

#include <cstdint>

#include "device/dev_types.h"   // plain constants and structs (the LL128 line shape)

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define UNICCL_DEVICE_COMPILER 1
#endif

#if !defined(UNICCL_DEVICE_COMPILER) && defined(UNICCL_DEV_CPU)
// The kernels as plain C++ for the CPU emulator (tests/emu).
#include "device/port_cpu.h"
#elif !defined(UNICCL_DEVICE_COMPILER)
#define UNICCL_HD inline
#else

#if defined(__HIPCC__) || defined(__HIP__)
#define UNICCL_DEV_HIP 1
#include <hip/hip_runtime.h>
#include <hip/hip_version.h>
#else
#define UNICCL_DEV_CUDA 1
#include <cuda_runtime.h>
#endif
#include "nccl_device/impl/sync.h"

// -Damd_sync=true (CUDA builds only): the kernels run the AMD path's
// synchronization on an NVIDIA GPU, so that the HIP algorithms meet real
// concurrency (docs/amd.md, "AMD synchronization on NVIDIA GPUs"). Each
// function below with a HIP body that can be mapped onto CUDA with the same
// semantics takes the mapped body under UNICCL_AMD_SYNC_CUDA: the sub-group
// barrier is sub_barrier.h's software algorithm on block-scope atomics (one
// arrival per 32-lane warp, __syncwarp as the wavefront's meeting point), LL
// lines are stored and polled as two 8-byte halves, counters are polled
// relaxed with one acquire fence after the spin and posted as a release
// fence then a relaxed store, Simple slots are read with plain streaming
// loads, work items as two 8-byte loads, spins sleep, KernelCh stamps are
// two stores, and narrow floats convert in software. Scopes stay system
// where peers or the host read (peer buffers are ordinary memory on CUDA,
// not AMD's uncached kind), workgroup scope maps to CTA scope.
#if defined(UNICCL_AMD_SYNC)
#if !defined(UNICCL_DEV_CUDA)
#error "device/port.h: UNICCL_AMD_SYNC (meson -Damd_sync=true) is for CUDA builds: HIP runs these paths natively"
#endif
#define UNICCL_AMD_SYNC_CUDA 1
#endif

// The encoding of ncclFloat8e4m3 / ncclFloat8e5m2 in this pass's device code
// (device/small_float.h): UNICCL_FP8_FNUZ set means AMD's FNUZ formats
// (e4m3fnuz: bias 8, max 240; e5m2fnuz: bias 16, max 57344; no infinity, no
// negative zero, 0x80 the only NaN), unset OCP's e4m3fn / e5m2 (NVIDIA's,
// NCCL's). Per target, as librccl.so.1 encodes them (docs/amd.md): OCP where
// RCCL uses ROCm's OCP fp8 types (ROCm 6.3+ on gfx950, gfx1200, gfx1201,
// gfx1250), FNUZ everywhere else: its hardware conversions on gfx942, its
// software FNUZ conversions on targets without fp8 hardware (gfx908, gfx90a,
// gfx940/941, gfx10, gfx11) and on every target before ROCm 6.3. CUDA: OCP.
// hipcc's host pass compiles no kernel: OCP there (host code that converts
// fp8 for an AMD GPU must ask which format that GPU's kernels use).
#if defined(UNICCL_FP8_FNUZ)
#error "device/port.h: UNICCL_FP8_FNUZ is chosen per target here, not on the command line"
#endif
#if defined(UNICCL_DEV_HIP) && defined(__HIP_DEVICE_COMPILE__)
#if !(HIP_VERSION >= 60300000 && (defined(__gfx950__) || defined(__gfx1200__) || defined(__gfx1201__) || \
                                  defined(__gfx1250__)))
#define UNICCL_FP8_FNUZ 1
#endif
#endif

#define UNICCL_HD __host__ __device__ __forceinline__
#define UDEV __device__ __forceinline__
// Algorithm bodies: kept out of line so each gets its own register allocation.
#define UDEV_NOINLINE __device__ __noinline__

namespace uniccl::dev {

#if defined(UNICCL_DEV_HIP) && defined(__HIP_DEVICE_COMPILE__)
// The wavefront of the target this pass compiles for: 64 on GCN/CDNA
// (gfx9), 32 on RDNA (gfx10, gfx11, gfx12) builds. hipcc compiles device
// code once per --offload-arch, so each target's kernels get their own
// value. It must be a constant (array sizes, shifts), so it comes from the
// target family the compiler names (__GFX9__ .. __GFX12__, defined by every
// clang uniccl builds with) and RDNA's default wave32: uniccl's build never
// passes -mwavefrontsize64. __AMDGCN_WAVEFRONT_SIZE, deprecated from ROCm
// 6.3, serves only a family not listed here (port_check.in checks the two
// agree where the compiler still defines it).
#if defined(__GFX9__)
constexpr int kWarpSize = 64;
#elif defined(__GFX10__) || defined(__GFX11__) || defined(__GFX12__)
constexpr int kWarpSize = 32;
#elif defined(__AMDGCN_WAVEFRONT_SIZE)
constexpr int kWarpSize = __AMDGCN_WAVEFRONT_SIZE;
#else
#error "device/port.h: unknown AMD target family: its wavefront size is not known here"
#endif
#elif defined(UNICCL_DEV_HIP)
// hipcc's host pass: no device code runs there, and nothing shared with the
// device depends on this value (kernel names, argument layouts).
constexpr int kWarpSize = 64;
#else
constexpr int kWarpSize = 32;
#endif

// 16 bytes moved as one unit (uint4 layout on both vendors).
struct alignas(16) Pack16 {
  uint32_t x, y, z, w;
};

// ------------------------------------------------------- 64-bit counters
// Connection counters (tail, head) and their slots live in polled memory
// (gpu::deviceAllocPolled: uncached on AMD) or coherent host memory. The
// consumer must see the data the producer wrote before the counter moved.
//
// CUDA: every poll is an ld.acquire.sys, every post an st.release.sys.
// HIP (after RCCL's protocol code): the poll is a relaxed system-scope load
// (glc / sc0 sc1: served by coherent memory, and, being atomic, never
// hoisted out of the spin loop), followed once by an agent-scope acquire
// (acquireAfterPoll: invalidates this CU's L1; the slots are uncached, so
// no L2 invalidate is needed). A post is a release fence then a relaxed
// system-scope store: agent scope on GFX9 (CDNA), which is a wait for this
// thread's stores and, on gfx94x, an agent-scope L2 writeback of
// non-coherent lines only, never the full system-scope L2 writeback of
// gfx90a's __threadfence_system; system scope elsewhere (RDNA, where it is
// the same wait). port_check.py reads the generated code for these bits.
UDEV uint64_t pollCounter(const uint64_t* p) {
#if defined(UNICCL_DEV_HIP)
  return devapi::loadSys<__ATOMIC_RELAXED>(p);
#elif defined(UNICCL_AMD_SYNC_CUDA)
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#endif
}

// After a pollCounter spin saw the value it waited for: later loads of the
// data it guards see that data. Nothing on CUDA (the polls were acquires).
// amd_sync: the polls were relaxed, so this fence is what orders the reads
// (system scope: a CUDA peer's counter is ordinary memory of another GPU).
UDEV void acquireAfterPoll() {
#if defined(UNICCL_DEV_HIP)
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "agent");
#elif defined(UNICCL_AMD_SYNC_CUDA)
  devapi::fenceAcquireSys();
#endif
}

// Publishes a counter: this thread's earlier stores (and, after a barrier,
// the group's) are visible to whoever sees the new value.
UDEV void postCounter(uint64_t* p, uint64_t v) {
#if defined(UNICCL_DEV_HIP)
#if defined(__GFX9__)
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "agent");
#else
  devapi::fenceReleaseSys();
#endif
  devapi::storeSys<__ATOMIC_RELAXED>(p, v);
#elif defined(UNICCL_AMD_SYNC_CUDA)
  devapi::fenceReleaseSys();
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#endif
}

// The same pair for a counter that guards data in memory a peer's GPU may
// cache: symmetric windows are ordinary VMM memory, coarse-grained on HIP,
// which gfx90a and gfx94x keep in L2 for remote readers too (the AMDGPU
// memory model's non-coherent MTYPE). HIP: release and acquire at system
// scope on every target, whose L2 writeback (release) and invalidate
// (acquire) make the window data of either side current. The acquire is
// one more load of the counter p the spin polled, with acquire order: the
// AMDGPU backend lowers an acquire fence with a release's L2 writeback in
// front of the invalidate, an acquire load with the invalidate alone (the
// counter has one writer, each post a release, so the load synchronizes
// with the post the spin saw or a later one). CUDA, amd_sync: postCounter
// / acquireAfterPoll, already at system scope.
UDEV void postCounterSystem(uint64_t* p, uint64_t v) {
#if defined(UNICCL_DEV_HIP)
  devapi::fenceReleaseSys();
  devapi::storeSys<__ATOMIC_RELAXED>(p, v);
#else
  postCounter(p, v);
#endif
}
UDEV void acquireAfterPollSystem(const uint64_t* p) {
#if defined(UNICCL_DEV_HIP)
  (void)devapi::loadSys<__ATOMIC_ACQUIRE>(p);
#else
  (void)p;
  acquireAfterPoll();
#endif
}

// A counter store that orders nothing (the LL receiver's head: the lines
// carry their own flags and the slot's loads completed before the group's
// barrier), but still reaches polled memory with the coherence bits.
UDEV void postCounterRelaxed(uint64_t* p, uint64_t v) {
#if defined(UNICCL_DEV_HIP)
  devapi::storeSys<__ATOMIC_RELAXED>(p, v);
#elif defined(UNICCL_AMD_SYNC_CUDA)
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  *reinterpret_cast<volatile uint64_t*>(p) = v;
#endif
}

// Orders every store of this thread (and, after a barrier, of the threads
// that synchronized with it) before later stores, as seen by peers and host:
// a seq_cst fence at system scope (fence.sc.sys; AMDGPU's default scope).
UDEV void fenceSystem() { devapi::fenceSeqCstSys(); }

UDEV void fenceBlock() { __threadfence_block(); }

// The host-mapped abort flag: a plain volatile read (goes over PCIe, so
// callers only look every ~1000 spins).
UDEV uint32_t loadVolatile32(const volatile uint32_t* p) { return *p; }

// A plain store that is not cached or merged away (a conn FIFO slot's size in
// host-mapped memory); the caller's system fence orders it.
UDEV void storeVolatile64(int64_t* p, int64_t v) { *reinterpret_cast<volatile int64_t*>(p) = v; }

// A (counter, value) pair in host-mapped memory, 16-byte aligned, that the
// host reads after it sees the counter (KernelCh stamps). CUDA: one 16-byte
// store, a single write to host memory, so no fence is needed and the
// stamping thread never waits for its earlier stores to reach the system (a
// fence per stamp made KernelCh profiling cost 40% of a 1 MiB AllReduce on
// 2x H200). HIP: the value, then the counter with a system-scope release.
UDEV void storeStampPair(uint64_t* p, uint64_t counter, uint64_t value) {
#if defined(UNICCL_DEV_HIP)
  devapi::storeSys<__ATOMIC_RELAXED>(p + 1, value);
  devapi::storeSys<__ATOMIC_RELEASE>(p, counter);
#elif defined(UNICCL_AMD_SYNC_CUDA)
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p + 1), "l"(value) : "memory");
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(counter) : "memory");
#else
  asm volatile("st.volatile.global.v2.u64 [%0], {%1,%2};" ::"l"(p), "l"(counter), "l"(value) : "memory");
#endif
}

// A progress word in host-mapped memory (launch progress for the watchdog):
// posted, unordered, read by a host thread that only needs it eventually.
UDEV void storeVolatileU64(uint64_t* p, uint64_t v) { *reinterpret_cast<volatile uint64_t*>(p) = v; }

// ------------------------------------------------- receive-slot loads
// Slots are rewritten by a peer every kSteps steps: never serve them from L1.
// CUDA: ld.global.cg (L2 only). HIP: the poller's system-scope acquire load
// invalidates the CU's vector L1 (buffer_wbinvl1_vol) before the barrier that
// releases the readers, and all waves of a block share that L1, so plain
// loads are fresh; we still mark them volatile-free but non-temporal.
// amd_sync: plain streaming loads (ld.global.cs, L1 allowed), fresh only
// through the poller's acquire fence and the group's barrier, as on HIP.
#if defined(UNICCL_AMD_SYNC_CUDA)
#define UNICCL_LDCG_OP "ld.global.cs"
#else
#define UNICCL_LDCG_OP "ld.global.cg"
#endif
template <typename T>
UDEV T loadCG(const T* p) {
#if defined(UNICCL_DEV_HIP)
  return __builtin_nontemporal_load(p);
#else
  if constexpr (sizeof(T) == 1) {
    uint16_t v;
    asm volatile(UNICCL_LDCG_OP ".u8 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
    uint8_t b = (uint8_t)v;
    return *reinterpret_cast<T*>(&b);
  } else if constexpr (sizeof(T) == 2) {
    uint16_t v;
    asm volatile(UNICCL_LDCG_OP ".u16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
    return *reinterpret_cast<T*>(&v);
  } else if constexpr (sizeof(T) == 4) {
    uint32_t v;
    asm volatile(UNICCL_LDCG_OP ".u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return *reinterpret_cast<T*>(&v);
  } else {
    static_assert(sizeof(T) == 8, "loadCG: 1, 2, 4 or 8 bytes (Pack16 has its own)");
    uint64_t v;
    asm volatile(UNICCL_LDCG_OP ".u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return *reinterpret_cast<T*>(&v);
  }
#endif
}

template <>
UDEV Pack16 loadCG<Pack16>(const Pack16* p) {
  Pack16 v;
#if defined(UNICCL_DEV_HIP)
  v.x = __builtin_nontemporal_load(&p->x);
  v.y = __builtin_nontemporal_load(&p->y);
  v.z = __builtin_nontemporal_load(&p->z);
  v.w = __builtin_nontemporal_load(&p->w);
#else
  asm volatile(UNICCL_LDCG_OP ".v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
#endif
  return v;
}

// Ordinary 16-byte global load/store of user buffers (vectorized).
UDEV Pack16 load16(const Pack16* p) {
#if defined(UNICCL_DEV_HIP)
  return *p;
#else
  Pack16 v;
  asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
#endif
}
UDEV void store16(Pack16* p, const Pack16& v) {
#if defined(UNICCL_DEV_HIP)
  *p = v;
#else
  asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
#endif
}

// --------------------------------------------------------- LL lines
// A line is {data0, flag0, data1, flag1}. Each 8-byte half carries its own
// flag, so a reader that sees both flags right has both halves even where a
// 16-byte store is not single-copy atomic (HIP stores the halves separately).
UDEV void storeLLLine(Pack16* p, uint32_t d0, uint32_t d1, uint32_t flag) {
#if defined(UNICCL_DEV_HIP)
  uint64_t* q = reinterpret_cast<uint64_t*>(p);
  __builtin_nontemporal_store((uint64_t)d0 | ((uint64_t)flag << 32), q);
  __builtin_nontemporal_store((uint64_t)d1 | ((uint64_t)flag << 32), q + 1);
#elif defined(UNICCL_AMD_SYNC_CUDA)
  // The halves as two 8-byte stores, as HIP writes them: a reader can see
  // one half new and the other old (the torn line the flags are there for).
  asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"((uint64_t)d0 | ((uint64_t)flag << 32))
               : "memory");
  asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(reinterpret_cast<uint64_t*>(p) + 1),
               "l"((uint64_t)d1 | ((uint64_t)flag << 32))
               : "memory");
#else
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(d0), "r"(flag), "r"(d1),
               "r"(flag)
               : "memory");
#endif
}

// Polls an LL line a peer rewrites. CUDA: one volatile 16-byte load. HIP:
// two relaxed system-scope 8-byte loads (each half carries its flag). RCCL
// uses __builtin_nontemporal_load here; clang 15 hoists those out of a spin
// loop (checked: the loop then never sees the flag), an atomic load it
// cannot, with the same coherent access (glc / sc0 sc1).
UDEV Pack16 loadLLLine(const Pack16* p) {
#if defined(UNICCL_DEV_HIP)
  const uint64_t* q = reinterpret_cast<const uint64_t*>(p);
  const uint64_t a = devapi::loadSys<__ATOMIC_RELAXED>(q);
  const uint64_t b = devapi::loadSys<__ATOMIC_RELAXED>(q + 1);
  return Pack16{(uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b, (uint32_t)(b >> 32)};
#elif defined(UNICCL_AMD_SYNC_CUDA)
  const uint64_t* q = reinterpret_cast<const uint64_t*>(p);
  uint64_t a, b;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(a) : "l"(q) : "memory");
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(b) : "l"(q + 1) : "memory");
  return Pack16{(uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b, (uint32_t)(b >> 32)};
#else
  Pack16 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
#endif
}

// ------------------------------------------------------- LL128 lines
// A line is 128 bytes, 16-byte aligned words 0..15 with the flag in word 15,
// stored by the 8 lanes (one aligned group of kLL128LanesPerLine) of one
// warp, 16 bytes each (words 2s, 2s+1 for lane s of the group), in one store
// instruction. NVIDIA GPUs (sm_70+) deliver such a warp store to a peer over
// NVLink as one 128-byte unit, and a warp's load of the line is served as
// one unit too: a reader whose flag lane sees the flag in the same load has
// every lane's data (NCCL's LL128 rests on this). Only the flag lane looks
// at the flag; the warp votes (ll128PollAgain) and reloads as a whole while
// any line lacks it, so the data always comes from the load that showed the
// flag. HIP: no such guarantee on the targets uniccl builds for (RCCL turns
// LL128 on only for gfx90a/gfx942 with its own checks): the bodies below
// compile, and the host never selects LL128 there (gpu::DeviceProps::
// lineStoreAtomic128 is 0 on HIP; docs/amd.md).
//
// Every lane of the warp calls these together (the caller's loops are warp
// uniform); `line` is the line's first word, `sub` the lane's place in it.
//
// kCollKernelsHaveLL128: whether the collective kernels carry LL128 code.
// Not on HIP, where the host never selects it: its instantiations for every
// collective, op and algorithm of a datatype would only cost compile time
// (the CI's HIP build is its longest phase). The p2p kernel keeps LL128 on
// every target, so CI still compiles these bodies for the AMD targets.
#if defined(UNICCL_DEV_HIP)
constexpr bool kCollKernelsHaveLL128 = false;
#else
constexpr bool kCollKernelsHaveLL128 = true;
#endif
UDEV void storeLL128(uint64_t* line, int sub, uint64_t v0, uint64_t v1) {
#if defined(UNICCL_DEV_HIP)
  __builtin_nontemporal_store(v0, line + 2 * sub);
  __builtin_nontemporal_store(v1, line + 2 * sub + 1);
#else
  asm volatile("st.volatile.global.v2.u64 [%0], {%1,%2};" ::"l"(line + 2 * sub), "l"(v0), "l"(v1) : "memory");
#endif
}

// Loads this lane's 16 bytes of a line. False: this lane is its line's flag
// lane and the flag is not `flag` yet (the warp must load again).
UDEV bool loadLL128(const uint64_t* line, int sub, uint64_t flag, uint64_t* v0, uint64_t* v1) {
#if defined(UNICCL_DEV_HIP)
  const uint64_t* q = line + 2 * sub;
  *v0 = devapi::loadSys<__ATOMIC_RELAXED>(q);
  *v1 = devapi::loadSys<__ATOMIC_RELAXED>(q + 1);
#else
  asm volatile("ld.volatile.global.v2.u64 {%0,%1}, [%2];" : "=l"(*v0), "=l"(*v1) : "l"(line + 2 * sub) : "memory");
#endif
  return sub != kLL128LanesPerLine - 1 || *v1 == flag;
}

// The poll loop's vote: true in every lane while any lane of the warp must
// load its line again.
UDEV bool ll128PollAgain(bool again) {
#if defined(UNICCL_DEV_HIP)
  return __any(again) != 0;
#else
  return __any_sync(0xffffffffu, again) != 0;
#endif
}

// The warp's lanes meet, so that the 8 lanes of each line issue the line's
// store together (after the data-dependent branches of the copy loop).
UDEV void ll128Converge() {
#if defined(UNICCL_DEV_HIP)
  __builtin_amdgcn_wave_barrier();   // a wavefront runs in lockstep: only the compiler is held
#else
  __syncwarp();
#endif
}

// A vote of the lanes that share a line (here: the whole warp): true in all
// of them when any passes true (the poll loop's abort, so that a line's
// lanes leave together).
UDEV bool ll128LineAny(bool b) {
#if defined(UNICCL_DEV_HIP)
  return __any(b) != 0;
#else
  return __any_sync(0xffffffffu, b) != 0;
#endif
}

// Work items, which may sit in host memory the host rewrites.
UDEV Pack16 loadVolatile16(const Pack16* p) {
  Pack16 v;
#if defined(UNICCL_DEV_HIP)
  const volatile uint64_t* q = reinterpret_cast<const volatile uint64_t*>(p);
  uint64_t a = q[0], b = q[1];
  v.x = (uint32_t)a; v.y = (uint32_t)(a >> 32); v.z = (uint32_t)b; v.w = (uint32_t)(b >> 32);
#elif defined(UNICCL_AMD_SYNC_CUDA)
  uint64_t a, b;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(a) : "l"(p) : "memory");
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(b) : "l"(reinterpret_cast<const uint64_t*>(p) + 1)
               : "memory");
  v.x = (uint32_t)a; v.y = (uint32_t)(a >> 32); v.z = (uint32_t)b; v.w = (uint32_t)(b >> 32);
#else
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
#endif
  return v;
}

// Shared memory of a block: one object of type T per block (and per T).
template <typename T>
UDEV T& blockShared() {
  __shared__ T s;
  return s;
}

// --------------------------------------------------------- barriers
// Whole block.
UDEV void barrierBlock() { __syncthreads(); }

#if defined(UNICCL_DEV_HIP)
// Workgroup-scope atomics on shared memory and the wavefront's meeting point:
// what device/sub_barrier.h builds the sub-group barrier from.
UDEV unsigned wgLoadAcquire(const unsigned* p) {
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_WORKGROUP);
}
UDEV unsigned wgFetchAddAcqRel(unsigned* p, unsigned v) {
  return __hip_atomic_fetch_add(p, v, __ATOMIC_ACQ_REL, __HIP_MEMORY_SCOPE_WORKGROUP);
}
UDEV void wgStoreRelaxed(unsigned* p, unsigned v) {
  __hip_atomic_store(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
}
UDEV void wgStoreRelease(unsigned* p, unsigned v) {
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_WORKGROUP);
}
// Lanes of a wavefront run in lockstep: this only keeps the compiler from
// moving memory accesses across the reconvergence point.
UDEV void waveSync() { __builtin_amdgcn_wave_barrier(); }
UDEV void sleepBrief();
}  // namespace uniccl::dev
#include "device/sub_barrier.h"
namespace uniccl::dev {
#elif defined(UNICCL_AMD_SYNC_CUDA)
// amd_sync: the same primitives on CUDA. Workgroup scope is CTA scope
// (generic addressing: the state lives in shared memory); a wavefront is a
// 32-lane warp, whose lanes are scheduled independently (sm_70+), so
// __syncwarp is a real meeting point, as the emulator's waveSync is.
UDEV unsigned wgLoadAcquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.cta.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
UDEV unsigned wgFetchAddAcqRel(unsigned* p, unsigned v) {
  unsigned old;
  asm volatile("atom.acq_rel.cta.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
UDEV void wgStoreRelaxed(unsigned* p, unsigned v) {
  asm volatile("st.relaxed.cta.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
UDEV void wgStoreRelease(unsigned* p, unsigned v) {
  asm volatile("st.release.cta.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
UDEV void waveSync() { __syncwarp(); }
UDEV void sleepBrief();
}  // namespace uniccl::dev
#include "device/sub_barrier.h"
namespace uniccl::dev {
#else
// CUDA has named barriers (bar.sync id, n): the state is unused there.
struct SubBarrierState {
  unsigned arrived;
  unsigned generation;
};
#endif

// Barrier of `nthreads` threads (a multiple of the warp size, whole warps)
// identified by `id` (1..15; 0 is the block barrier). Orders shared and
// global memory accesses of the participants like __syncthreads does.
UDEV void barrierSub(int id, int nthreads, SubBarrierState* st) {
#if defined(UNICCL_DEV_HIP) || defined(UNICCL_AMD_SYNC_CUDA)
  (void)id;
  barrierSubWaves(nthreads, st);
#else
  (void)st;
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(nthreads) : "memory");
#endif
}

// ------------------------------------------- programmatic dependent launch
// A kernel launched programmatically (CUDA PDL, sm_90+) may start while the
// previous kernel of its stream still runs. waitPriorGrids() returns once
// that kernel has ended and its memory is visible: nothing it (or any earlier
// work) wrote may be read before. releaseDependentGrids() lets the next
// programmatic launch start early. Both do nothing on a plain launch, on
// older GPUs and on HIP (which has no such launch).
UDEV void waitPriorGrids() {
#if defined(UNICCL_DEV_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
UDEV void releaseDependentGrids() {
#if defined(UNICCL_DEV_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ------------------------------------------------------- sleep / timer
// One iteration of a spin on polled memory (a counter, an LL flag). HIP: a
// short s_sleep as RCCL does in every wait, so a spinning wavefront leaves
// its SIMD's issue slots to the others (the copy loops, the peer's blocks
// on a shared GPU). CUDA: nothing (NVIDIA's spins stay as they were);
// amd_sync: a nanosleep of about s_sleep 1. The Device API's spins pause
// the same way.
UDEV void spinPause() { devapi::pollPause(); }

UDEV void sleepBrief() {
#if defined(UNICCL_DEV_HIP)
  __builtin_amdgcn_s_sleep(2);
#else
  __nanosleep(100);
#endif
}

// A steady timer: nanoseconds on CUDA (%globaltimer); on HIP the constant-
// rate wall clock (100 MHz on gfx9/10/11), whose rate the host reads
// (gpu::DeviceProps::timerRateKHz) to turn ticks into nanoseconds. gfx11
// has no s_memrealtime: there the counter comes back through a message.
UDEV uint64_t globalTimer() {
#if defined(UNICCL_DEV_HIP)
#if __has_builtin(__builtin_readsteadycounter)
  return __builtin_readsteadycounter();   // clang 19+: the right instruction per target
#elif defined(__GFX11__)
  uint64_t t;
  asm volatile("s_sendmsg_rtn_b64 %0, sendmsg(MSG_RTN_GET_REALTIME)\n\ts_waitcnt lgkmcnt(0)" : "=s"(t));
  return t;
#else
  return __builtin_amdgcn_s_memrealtime();
#endif
#else
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}

// ------------------------------------------- hardware float conversions
// Where the GPU converts narrow floats itself (sm_89+: fp8 with satfinite,
// fp16/bf16 round-to-nearest-even), small_float.h uses it: the same results
// as its bit-manipulation path, far less code (and compile time) per kernel.
// amd_sync: the software conversions HIP uses.
#if defined(UNICCL_DEV_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(UNICCL_AMD_SYNC_CUDA)
#define UNICCL_HW_FLOAT_CVT 1
UDEV uint16_t hwFloatToHalf(float f) {
  uint16_t r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
UDEV float hwHalfToFloat(uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
UDEV uint16_t hwFloatToBf16(float f) {
  uint16_t r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
UDEV uint8_t hwFloatToE4m3(float f) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(f));
  return (uint8_t)r;
}
UDEV uint8_t hwFloatToE5m2(float f) {
  uint16_t r;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(f));
  return (uint8_t)r;
}
UDEV float hwE4m3ToFloat(uint8_t c) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"((uint16_t)c));
  return hwHalfToFloat((uint16_t)h2);
}
UDEV float hwE5m2ToFloat(uint8_t c) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h2) : "h"((uint16_t)c));
  return hwHalfToFloat((uint16_t)h2);
}
#endif

}  // namespace uniccl::dev

#endif  // UNICCL_DEVICE_COMPILER
