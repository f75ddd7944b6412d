/*
 * uniccl's device synchronization primitives: system-scope word accesses,
 * system-scope fences and the pause of a polling loop, one body per target.
 * Both device layers build on them: the Device API's portability block
 * (impl/port.h) and uniccl's own kernels (src/device/port.h and its CPU
 * port, which this public header cannot name). Namespace uniccl::devapi,
 * not part of the API.
 *
 *   HIP   clang's scoped atomics at system scope and __builtin_amdgcn_fence
 *         (system scope: the empty scope name); any order. The pause is
 *         s_sleep 1, as RCCL's spins, so that a spinning wavefront leaves
 *         its SIMD's issue slots to the others.
 *   CUDA  PTX on generic addresses, relaxed accesses only: the ordered
 *         accesses go through libcu++ in the Device API and through
 *         .global forms in the kernels (src/device/port.h). Fences:
 *         fence.acq_rel.sys for an acquire or a release, fence.sc.sys for
 *         seq_cst. The pause is nothing, or under AMD sync a nanosleep of
 *         about s_sleep 1.
 *   EMU   the compiler's __atomic builtins (uniccl's CPU emulator: every
 *         GPU thread is a fiber of a host thread, all in one coherent
 *         memory); the pause lets the emulator's runner run another thread.
 *
 * AMD sync (CUDA, UNICCL_AMD_SYNC: uniccl's own -Damd_sync=true test build,
 * docs/amd.md): both layers run the HIP bodies' synchronization on NVIDIA
 * GPUs, with these primitives where HIP has them. Never defined in a
 * user's build.
 *
 * The accesses' orders are C++'s __ATOMIC_* constants, as template
 * arguments so that every access is compiled with its order (gcc reads an
 * order it cannot see at compile time as seq_cst).
 */
#ifndef UNICCL_NCCL_DEVICE_IMPL_SYNC_H
#define UNICCL_NCCL_DEVICE_IMPL_SYNC_H
#include "../utility.h"

#if UNICCL_DEVICE_API

#if defined(UNICCL_DEVICE_API_CUDA) && defined(UNICCL_AMD_SYNC)
#define UNICCL_DEVICE_API_AMD_SYNC 1
#endif

#if defined(UNICCL_DEVICE_API_EMU)
extern "C" void uniccl_emu_poll(void); /* tests/emu/emu_runtime.cc: a polling loop's pause */
#endif

namespace uniccl {
namespace devapi {

#if defined(UNICCL_DEVICE_API_CUDA)
NCCL_DEVICE_INLINE uint32_t ptxLoadRelaxedSys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
NCCL_DEVICE_INLINE uint64_t ptxLoadRelaxedSys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
NCCL_DEVICE_INLINE void ptxStoreRelaxedSys(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
NCCL_DEVICE_INLINE void ptxStoreRelaxedSys(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
#endif

/* A load of a word other agents (peer GPUs, the host) write, at system
 * scope with order Order: never served from a cache those writes miss, and
 * never hoisted out of a polling loop (an atomic). */
template <int Order, typename T>
NCCL_DEVICE_INLINE T loadSys(const T* p) {
#if defined(UNICCL_DEVICE_API_HIP)
  return __hip_atomic_load(p, Order, __HIP_MEMORY_SCOPE_SYSTEM);
#elif defined(UNICCL_DEVICE_API_CUDA)
  static_assert(Order == __ATOMIC_RELAXED, "CUDA: relaxed system-scope loads only (see above)");
  return ptxLoadRelaxedSys(p);
#else
  return __atomic_load_n(p, Order);
#endif
}

/* A store of a word other agents read, at system scope with order Order. */
template <int Order, typename T>
NCCL_DEVICE_INLINE void storeSys(T* p, T v) {
#if defined(UNICCL_DEVICE_API_HIP)
  __hip_atomic_store(p, v, Order, __HIP_MEMORY_SCOPE_SYSTEM);
#elif defined(UNICCL_DEVICE_API_CUDA)
  static_assert(Order == __ATOMIC_RELAXED, "CUDA: relaxed system-scope stores only (see above)");
  ptxStoreRelaxedSys(p, v);
#else
  __atomic_store_n(p, v, Order);
#endif
}

/* Fences at system scope. A release before a relaxed store publishes this
 * thread's earlier accesses (and, after a barrier, its group's) to peers
 * and the host; an acquire after a relaxed poll makes what the poll's
 * writer published visible. */
NCCL_DEVICE_INLINE void fenceReleaseSys() {
#if defined(UNICCL_DEVICE_API_HIP)
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "");
#elif defined(UNICCL_DEVICE_API_CUDA)
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#else
  __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
}
NCCL_DEVICE_INLINE void fenceSeqCstSys() {
#if defined(UNICCL_DEVICE_API_HIP)
  __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "");
#elif defined(UNICCL_DEVICE_API_CUDA)
  asm volatile("fence.sc.sys;" ::: "memory");
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}
#if !defined(UNICCL_DEVICE_API_HIP)
/* None on HIP: the AMDGPU backend lowers an acquire fence on gfx90a and
 * gfx94x with a release's L2 writeback in front of the invalidate; HIP code
 * acquires with a load of the polled word (loadSys<__ATOMIC_ACQUIRE>). */
NCCL_DEVICE_INLINE void fenceAcquireSys() {
#if defined(UNICCL_DEVICE_API_CUDA)
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#else
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
}
#endif

/* One iteration of a loop that polls a word or a line other agents write. */
NCCL_DEVICE_INLINE void pollPause() {
#if defined(UNICCL_DEVICE_API_AMD_SYNC)
  __nanosleep(32); /* about HIP's s_sleep 1 (64 clocks) */
#elif defined(UNICCL_DEVICE_API_HIP)
  __builtin_amdgcn_s_sleep(1);
#elif defined(UNICCL_DEVICE_API_EMU)
  uniccl_emu_poll();
#endif
}

}  // namespace devapi
}  // namespace uniccl

#endif /* UNICCL_DEVICE_API */
#endif /* UNICCL_NCCL_DEVICE_IMPL_SYNC_H */
