/*
 * uniccl's Device API: the portability block of the device-side functions.
 * With impl/sync.h, the only file under include/ that names a vendor's
 * intrinsics; the pointer functions, cooperative groups and sessions are
 * written once over the functions below (namespace uniccl::devapi, not part
 * of the API).
 *
 * Three targets (include/nccl_device/utility.h picks one):
 *   CUDA  nvcc; memory orders are libcu++'s cuda::memory_order (NCCL's
 *         headers include <cuda/atomic> too, so NCCL code compiles as is).
 *   HIP   hipcc; a "warp" is the hardware wavefront (64 lanes on CDNA,
 *         32 on RDNA), decided per --offload-arch.
 *   EMU   uniccl's CPU emulator (-DUNICCL_DEV_CPU, tests/emu): every GPU
 *         thread is a fiber of its block's host thread; the thread context,
 *         barriers and polling pause come from the emulator's kernel runner
 *         through the extern "C" functions declared below and in impl/sync.h
 *         (tests/emu/emu_runtime.cc defines them). Its wavefront is the
 *         runner's (32, or 64 in the wave64 build), so it runs the HIP shape
 *         of the code at both widths.
 * HIP and the emulator have no libcu++: they get uniccl's own memory-order
 * enum, also reachable as cuda::memory_order / cuda::memory_order_relaxed
 * ... so that code written for NCCL compiles unchanged. (Where a program
 * also includes libhipcxx's <cuda/atomic>, include that first.)
 *
 * AMD sync (CUDA, UNICCL_AMD_SYNC: uniccl's own -Damd_sync=true test build,
 * docs/amd.md): the CUDA bodies run the HIP bodies' synchronization on an
 * NVIDIA GPU, so that the GPU tests meet it under real concurrency: flags
 * polled relaxed with one fence after the spin and posted as a fence then a
 * relaxed store, LL lines and GIN descriptors stored and loaded as 8-byte
 * halves, sleeping spins. Scopes stay system (a CUDA peer's memory is
 * ordinary memory of another GPU). Never defined in a user's build.
 *
 * The system-scope accesses, fences and the polling pause are impl/sync.h's,
 * which uniccl's own kernels build on too; what is here is the Device API's
 * alone (docs/architecture.md, "Device portability").
 *
 * Memory model of the sessions: peers are other GPUs, so every flag access
 * is at system scope. A release store publishes the storing thread's
 * earlier accesses and, after a barrier of its group, the group's; an
 * acquire (or a relaxed poll followed by an acquire fence) makes them
 * visible to the poller and, after its group's barrier, to the group.
 */
#ifndef UNICCL_NCCL_DEVICE_IMPL_PORT_H
#define UNICCL_NCCL_DEVICE_IMPL_PORT_H
#include "../utility.h"
#include "sync.h"

#if UNICCL_DEVICE_API

#if defined(UNICCL_DEVICE_API_CUDA)
#include <cuda/atomic>
#endif

#if defined(UNICCL_DEVICE_API_EMU)
/* The emulator's kernel runner (tests/emu/emu_runtime.cc). */
extern "C" {
unsigned uniccl_emu_thread_index(void);     /* threadIdx.x */
unsigned uniccl_emu_block_threads(void);    /* blockDim.x */
unsigned uniccl_emu_wave_size(void);        /* lanes of an emulated wavefront */
void uniccl_emu_barrier(int id, int nThreads); /* named barrier; id 0 with blockDim.x threads: __syncthreads */
void uniccl_emu_lane_sync(int nLanes);      /* the aligned group of nLanes lanes (a power of two) meets */
/* p is a word another agent accesses while the kernel runs: with the
 * emulator's polled-memory check on, it must lie in polled memory. */
void uniccl_emu_check_polled(const void* p, const char* what);
}
#endif

namespace uniccl {
namespace devapi {

/* ------------------------------------------------------------ memory orders */
#if defined(UNICCL_DEVICE_API_CUDA)
typedef cuda::memory_order memory_order;
constexpr memory_order orderRelaxed = cuda::memory_order_relaxed;
constexpr memory_order orderConsume = cuda::memory_order_consume;
constexpr memory_order orderAcquire = cuda::memory_order_acquire;
constexpr memory_order orderRelease = cuda::memory_order_release;
constexpr memory_order orderAcqRel = cuda::memory_order_acq_rel;
constexpr memory_order orderSeqCst = cuda::memory_order_seq_cst;
#else
/* The names and meaning of C++'s std::memory_order. */
enum memory_order {
  memory_order_relaxed,
  memory_order_consume,
  memory_order_acquire,
  memory_order_release,
  memory_order_acq_rel,
  memory_order_seq_cst
};
constexpr memory_order orderRelaxed = memory_order_relaxed;
constexpr memory_order orderConsume = memory_order_consume;
constexpr memory_order orderAcquire = memory_order_acquire;
constexpr memory_order orderRelease = memory_order_release;
constexpr memory_order orderAcqRel = memory_order_acq_rel;
constexpr memory_order orderSeqCst = memory_order_seq_cst;
#endif

/* The half of an order that applies to a load (an acquire) or a store (a
 * release): what NCCL's barriers use for their polls and their posts. */
NCCL_DEVICE_INLINE memory_order loadOrderOf(memory_order o) {
  return o == orderRelease ? orderRelaxed : o == orderAcqRel ? orderAcquire : o == orderConsume ? orderAcquire : o;
}
NCCL_DEVICE_INLINE memory_order storeOrderOf(memory_order o) {
  return o == orderAcquire || o == orderConsume ? orderRelaxed : o == orderAcqRel ? orderRelease : o;
}

/* The order of each poll of a spin that ends with order o: CUDA polls with
 * o itself, as NCCL does; HIP, the emulator and AMD sync poll relaxed and
 * acquire once when the spin ends (spinLoad32 says why). */
NCCL_DEVICE_INLINE memory_order pollOrderOf(memory_order o) {
#if defined(UNICCL_DEVICE_API_CUDA) && !defined(UNICCL_DEVICE_API_AMD_SYNC)
  return o;
#else
  (void)o;
  return orderRelaxed;
#endif
}

/* ------------------------------------------------------ the thread context */
NCCL_DEVICE_INLINE int threadIndex() {
#if defined(UNICCL_DEVICE_API_EMU)
  return (int)uniccl_emu_thread_index();
#else
  return (int)threadIdx.x;
#endif
}
NCCL_DEVICE_INLINE int blockThreads() {
#if defined(UNICCL_DEVICE_API_EMU)
  return (int)uniccl_emu_block_threads();
#else
  return (int)blockDim.x;
#endif
}
/* Lanes of a warp / wavefront: 32 on NVIDIA; on AMD the target's wavefront
 * (64 on GCN/CDNA, 32 on RDNA; hipcc compiles device code once per
 * --offload-arch, and its host pass runs no device code). */
NCCL_DEVICE_INLINE int waveSize() {
#if defined(UNICCL_DEVICE_API_EMU)
  return (int)uniccl_emu_wave_size();
#elif defined(UNICCL_DEVICE_API_HIP)
#if defined(__has_builtin) && __has_builtin(__builtin_amdgcn_wavefrontsize)
  return __builtin_amdgcn_wavefrontsize();
#elif defined(__AMDGCN_WAVEFRONT_SIZE)
  return __AMDGCN_WAVEFRONT_SIZE;
#else
  return 64; /* the host pass */
#endif
#else
  return 32;
#endif
}
/* This thread's lane in its warp (blocks are one-dimensional here). */
NCCL_DEVICE_INLINE int lane() {
#if defined(UNICCL_DEVICE_API_CUDA)
  int r;
  asm("mov.u32 %0, %%laneid;" : "=r"(r));
  return r;
#else
  return threadIndex() & (waveSize() - 1);
#endif
}

/* ---------------------------------------------------------------- barriers */
/* The whole block (every thread of it calls). */
NCCL_DEVICE_INLINE void syncBlock() {
#if defined(UNICCL_DEVICE_API_EMU)
  uniccl_emu_barrier(0, (int)uniccl_emu_block_threads());
#else
  __syncthreads();
#endif
}

/* The aligned group of nLanes lanes (a power of two, at most the warp) that
 * holds this thread meets; their memory accesses before are visible to each
 * other after. AMD: the lanes of a wavefront execute in lockstep, so this is
 * a wavefront-scope fence pair around the compiler's wave barrier. */
NCCL_DEVICE_INLINE void syncLanes(int nLanes) {
#if defined(UNICCL_DEVICE_API_CUDA)
  unsigned mask = nLanes >= 32 ? ~0u : ((1u << nLanes) - 1) << (lane() & ~(nLanes - 1));
  __syncwarp(mask);
#elif defined(UNICCL_DEVICE_API_HIP)
  (void)nLanes;
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
#else
  uniccl_emu_lane_sync(nLanes);
#endif
}

#if !defined(UNICCL_DEVICE_API_HIP)
/* A barrier of nThreads threads (whole warps) named id (1..15; 0 is the
 * block's). CUDA: bar.sync. AMD GPUs before gfx12.5 have no named barriers
 * (and a software one needs zeroed shared memory that NCCL-written kernels
 * do not provide), so HIP has none: ncclCoopWarpSpan is absent there. */
NCCL_DEVICE_INLINE void syncNamed(int id, int nThreads) {
#if defined(UNICCL_DEVICE_API_CUDA)
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(nThreads) : "memory");
#else
  uniccl_emu_barrier(id, nThreads);
#endif
}
#define UNICCL_DEVICE_API_NAMED_BARRIERS 1
#endif

/* ------------------------------------------------ system-scope flag words */
NCCL_DEVICE_INLINE void store32(uint32_t* p, uint32_t v, memory_order o) {
#if defined(UNICCL_DEVICE_API_AMD_SYNC)
  switch (storeOrderOf(o)) {
    case orderRelaxed: break;
    case orderRelease: fenceReleaseSys(); break;
    default: fenceSeqCstSys(); break;
  }
  storeSys<__ATOMIC_RELAXED>(p, v);
#elif defined(UNICCL_DEVICE_API_CUDA)
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*p).store(v, storeOrderOf(o));
#else
#if defined(UNICCL_DEVICE_API_EMU)
  uniccl_emu_check_polled(p, "store32 (an LSA barrier flag)");
#endif
  switch (storeOrderOf(o)) {
    case orderRelaxed: storeSys<__ATOMIC_RELAXED>(p, v); break;
    case orderRelease: storeSys<__ATOMIC_RELEASE>(p, v); break;
    default: storeSys<__ATOMIC_SEQ_CST>(p, v); break;
  }
#endif
}

/* Spins on *p until done(value) holds, then returns the value; with an
 * acquire (or stronger) order, later accesses see what the storer
 * published. CUDA polls with loads of that order as NCCL does; HIP and the
 * emulator poll relaxed and acquire once after the spin (HIP: an acquire
 * per poll would invalidate the caches on every iteration), pausing between
 * polls (HIP: s_sleep, so spinning wavefronts leave issue slots to the
 * others; emulator: a yield every few polls, so 2 cores run many spinning
 * threads). HIP's acquire is one more load of the word with acquire order,
 * not a fence: the AMDGPU backend lowers an acquire fence with a release's
 * L2 writeback in front of the invalidate (gfx90a, gfx94x), an acquire load
 * with the invalidate alone. The word is written by one peer, each post a
 * release, so that load synchronizes with the post the spin saw or a later
 * one. */
template <typename Done>
NCCL_DEVICE_INLINE uint32_t spinLoad32(uint32_t* p, memory_order o, Done done) {
  memory_order lo = loadOrderOf(o);
#if defined(UNICCL_DEVICE_API_CUDA) && !defined(UNICCL_DEVICE_API_AMD_SYNC)
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> ref(*p);
  uint32_t v;
  while (!done(v = ref.load(lo))) {
  }
  return v;
#else
#if defined(UNICCL_DEVICE_API_EMU)
  uniccl_emu_check_polled(p, "spinLoad32 (an LSA barrier flag)");
#endif
  uint32_t v;
  while (!done(v = loadSys<__ATOMIC_RELAXED>(p))) pollPause();
  if (lo == orderSeqCst)
    fenceSeqCstSys();
  else if (lo != orderRelaxed)
#if defined(UNICCL_DEVICE_API_HIP)
    (void)loadSys<__ATOMIC_ACQUIRE>(p);
#else
    fenceAcquireSys();
#endif
  return v;
#endif
}

/* ---------------------------------------------------------------- LL lines */
/* A 16-byte line {data0, flag, data1, flag}: each 8-byte half carries the
 * flag, so a reader that sees both flags has both halves even where a
 * 16-byte store is not single-copy atomic (AMD, the emulator). Stores and
 * loads bypass caches that a peer's stores do not reach (volatile on CUDA,
 * system-scope relaxed atomics on HIP and the emulator). */
struct alignas(16) Line {
  uint32_t data0, flag0, data1, flag1;
};

NCCL_DEVICE_INLINE void storeLine(Line* p, uint32_t d0, uint32_t d1, uint32_t flag) {
#if defined(UNICCL_DEVICE_API_CUDA) && !defined(UNICCL_DEVICE_API_AMD_SYNC)
  asm volatile("st.volatile.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(d0), "r"(flag), "r"(d1), "r"(flag)
               : "memory");
#else
#if defined(UNICCL_DEVICE_API_EMU)
  uniccl_emu_check_polled(p, "storeLine (an LL all-to-all line)");
#endif
  uint64_t* q = reinterpret_cast<uint64_t*>(p);
  uint64_t lo = (uint64_t)d0 | ((uint64_t)flag << 32), hi = (uint64_t)d1 | ((uint64_t)flag << 32);
  storeSys<__ATOMIC_RELAXED>(q, lo);
  storeSys<__ATOMIC_RELAXED>(q + 1, hi);
#endif
}

NCCL_DEVICE_INLINE Line loadLine(const Line* p) {
  Line l;
#if defined(UNICCL_DEVICE_API_CUDA) && !defined(UNICCL_DEVICE_API_AMD_SYNC)
  asm volatile("ld.volatile.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(l.data0), "=r"(l.flag0), "=r"(l.data1), "=r"(l.flag1)
               : "l"(p)
               : "memory");
#else
#if defined(UNICCL_DEVICE_API_EMU)
  uniccl_emu_check_polled(p, "loadLine (an LL all-to-all line)");
#endif
  const uint64_t* q = reinterpret_cast<const uint64_t*>(p);
  const uint64_t lo = loadSys<__ATOMIC_RELAXED>(q), hi = loadSys<__ATOMIC_RELAXED>(q + 1);
  l.data0 = (uint32_t)lo;
  l.flag0 = (uint32_t)(lo >> 32);
  l.data1 = (uint32_t)hi;
  l.flag1 = (uint32_t)(hi >> 32);
#endif
  return l;
}

/* ------------------------------------------------------ GIN (gin.h) words */
/* 64-bit system-scope words: GIN signals and counters (host-mapped memory the
 * proxy thread adds into) and 32-bit FIFO indices. HIP: an acquire is the
 * load's own order (no fence: see spinLoad32). */
NCCL_DEVICE_INLINE uint64_t load64(uint64_t* p, memory_order o) {
  memory_order lo = loadOrderOf(o);
#if defined(UNICCL_DEVICE_API_CUDA) && !defined(UNICCL_DEVICE_API_AMD_SYNC)
  return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).load(lo);
#elif defined(UNICCL_DEVICE_API_HIP)
  if (lo == orderRelaxed) return loadSys<__ATOMIC_RELAXED>(p);
  return loadSys<__ATOMIC_ACQUIRE>(p);
#else
#if defined(UNICCL_DEVICE_API_EMU)
  uniccl_emu_check_polled(p, "load64 (a GIN signal or counter)");
#endif
  uint64_t v = loadSys<__ATOMIC_RELAXED>(p);
  if (lo != orderRelaxed) fenceAcquireSys();
  return v;
#endif
}
NCCL_DEVICE_INLINE void store64(uint64_t* p, uint64_t v) {
#if defined(UNICCL_DEVICE_API_CUDA) && !defined(UNICCL_DEVICE_API_AMD_SYNC)
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).store(v, cuda::memory_order_relaxed);
#else
#if defined(UNICCL_DEVICE_API_EMU)
  uniccl_emu_check_polled(p, "store64 (a GIN signal or counter)");
#endif
  storeSys<__ATOMIC_RELAXED>(p, v);
#endif
}
/* Adds to a word only the calling block's threads touch (signal shadows). */
NCCL_DEVICE_INLINE void addLocal64(uint64_t* p, uint64_t v) {
#if defined(UNICCL_DEVICE_API_CUDA) || defined(UNICCL_DEVICE_API_HIP)
  atomicAdd((unsigned long long*)p, (unsigned long long)v);
#else
  __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}
NCCL_DEVICE_INLINE uint32_t load32Relaxed(const volatile uint32_t* p) {
#if defined(UNICCL_DEVICE_API_CUDA) && !defined(UNICCL_DEVICE_API_AMD_SYNC)
  return *p; /* volatile: read from memory every time (host-mapped words) */
#else
#if defined(UNICCL_DEVICE_API_EMU)
  uniccl_emu_check_polled(const_cast<const uint32_t*>(p), "load32Relaxed (a GIN queue index or the abort flag)");
#endif
  return loadSys<__ATOMIC_RELAXED>(const_cast<const uint32_t*>(p));
#endif
}
NCCL_DEVICE_INLINE uint32_t fetchAdd32(uint32_t* p, uint32_t v) {
#if defined(UNICCL_DEVICE_API_CUDA)
  return cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*p).fetch_add(v, cuda::memory_order_relaxed);
#elif defined(UNICCL_DEVICE_API_HIP)
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  uniccl_emu_check_polled(p, "fetchAdd32 (a GIN queue index)");
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}
/* Publishes this thread's earlier stores to the host (and peers). */
NCCL_DEVICE_INLINE void fenceReleaseSystem() {
#if defined(UNICCL_DEVICE_API_CUDA) && !defined(UNICCL_DEVICE_API_AMD_SYNC)
  __threadfence_system();
#else
  fenceReleaseSys();
#endif
}
/* A 64-byte descriptor into host-mapped memory; the reader knows it is whole
 * when every 8-byte word's bit 0 is set, so the stores may land in any order
 * (CUDA: four 16-byte write-through stores, as NCCL's proxy GIN writes). */
NCCL_DEVICE_INLINE void storeDescriptor64B(void* dst, const uint64_t* q) {
#if defined(UNICCL_DEVICE_API_CUDA) && !defined(UNICCL_DEVICE_API_AMD_SYNC)
  for (int i = 0; i < 4; i++) {
    uint4 v;
    v.x = (uint32_t)q[2 * i];
    v.y = (uint32_t)(q[2 * i] >> 32);
    v.z = (uint32_t)q[2 * i + 1];
    v.w = (uint32_t)(q[2 * i + 1] >> 32);
    __stwt((uint4*)dst + i, v);
  }
#else
#if defined(UNICCL_DEVICE_API_EMU)
  uniccl_emu_check_polled(dst, "storeDescriptor64B (a GIN queue entry)");
#endif
  for (int i = 0; i < 8; i++) storeSys<__ATOMIC_RELAXED>((uint64_t*)dst + i, q[i]);
#endif
}

}  // namespace devapi
}  // namespace uniccl

#if !defined(UNICCL_DEVICE_API_CUDA)
/* NCCL's sessions take cuda::memory_order (libcu++): the same names here. */
namespace cuda {
using uniccl::devapi::memory_order;
using uniccl::devapi::memory_order_relaxed;
using uniccl::devapi::memory_order_consume;
using uniccl::devapi::memory_order_acquire;
using uniccl::devapi::memory_order_release;
using uniccl::devapi::memory_order_acq_rel;
using uniccl::devapi::memory_order_seq_cst;
}  // namespace cuda
#endif

#endif /* UNICCL_DEVICE_API */
#endif /* UNICCL_NCCL_DEVICE_IMPL_PORT_H */
