/*
 * uniccl's Device API: cooperative groups (NCCL 2.28.9's ncclCoop*), the
 * sets of threads that enter a session together. Each has
 *   int thread_rank()   this thread's rank in the group, 0..size()-1
 *   int size()          the number of threads (num_threads(): the same)
 *   void sync()         the group meets; its memory accesses before are
 *                       visible to all of its threads after
 * and is passed by value. Device code only (nvcc, hipcc, the emulator).
 *
 * What a "warp" is: 32 lanes on NVIDIA. On AMD, the hardware wavefront:
 * 64 lanes on GCN/CDNA (gfx9: MI100-MI300), 32 on RDNA (gfx10-gfx12), as
 * the --offload-arch being compiled has it; ncclCoopWarp::size() says which.
 * Code that counts warps as blockDim.x / 32 is wrong on CDNA: use size().
 *
 *   ncclCoopTile<N>   aligned groups of N lanes (N a power of two, at most
 *                     32, so a tile fits in every target's warp)
 *   ncclCoopThread    one thread (ncclCoopTile<1>)
 *   ncclCoopWarp      the warp (NVIDIA: ncclCoopTile<32>, as NCCL has it;
 *                     AMD and the emulator: its own type, whose size is the
 *                     wavefront's)
 *   ncclCoopWarpSpan  nWarps consecutive warps from warp0, with an id 0..14
 *                     that no other span in a collective at the same time
 *                     uses; NVIDIA and the emulator only: AMD GPUs (before
 *                     gfx12.5) have no named barriers for its sync, so on
 *                     HIP it is not declared (a kernel using it does not
 *                     compile, rather than synchronize wrongly)
 *   ncclCoopCta       the whole block (__syncthreads)
 *
 * Not provided: ncclCoopLanes (arbitrary lane masks), ncclCoopCoalesced,
 * ncclCoopBcast, ncclCoopGetLaneMask.
 */
#ifndef UNICCL_NCCL_DEVICE_COOP_H
#define UNICCL_NCCL_DEVICE_COOP_H
#include "utility.h"
#include "impl/port.h"

#if UNICCL_DEVICE_API

template <int nThreadsPow2>
struct ncclCoopTile {
  static_assert(nThreadsPow2 >= 1 && nThreadsPow2 <= 32 && (nThreadsPow2 & (nThreadsPow2 - 1)) == 0,
                "ncclCoopTile: a power of two from 1 to 32 lanes");
  NCCL_DEVICE_INLINE int thread_rank() const { return uniccl::devapi::lane() & (nThreadsPow2 - 1); }
  NCCL_DEVICE_INLINE constexpr int size() const { return nThreadsPow2; }
  NCCL_DEVICE_INLINE constexpr int num_threads() const { return nThreadsPow2; }
  NCCL_DEVICE_INLINE void sync() {
    if (nThreadsPow2 > 1) uniccl::devapi::syncLanes(nThreadsPow2);
  }
};

typedef ncclCoopTile<1> ncclCoopThread;

#if defined(UNICCL_DEVICE_API_CUDA)
typedef ncclCoopTile<32> ncclCoopWarp;
#else
/* The wavefront: one type for every width, so that hipcc's host pass (which
 * does not know the target's width) and its device passes agree on kernel
 * signatures that name it. */
struct ncclCoopWarp {
  NCCL_DEVICE_INLINE int thread_rank() const { return uniccl::devapi::lane(); }
  NCCL_DEVICE_INLINE int size() const { return uniccl::devapi::waveSize(); }
  NCCL_DEVICE_INLINE int num_threads() const { return uniccl::devapi::waveSize(); }
  NCCL_DEVICE_INLINE void sync() { uniccl::devapi::syncLanes(uniccl::devapi::waveSize()); }
};
#endif

#if defined(UNICCL_DEVICE_API_NAMED_BARRIERS)
struct ncclCoopWarpSpan {
  uint32_t warp0 : 8, nWarps : 8, id : 8;

  NCCL_DEVICE_INLINE constexpr ncclCoopWarpSpan(int warp0, int nWarps, int id)
      : warp0((uint32_t)warp0), nWarps((uint32_t)nWarps), id((uint32_t)id) {}

  NCCL_DEVICE_INLINE int thread_rank() const {
    return uniccl::devapi::threadIndex() - uniccl::devapi::waveSize() * (int)warp0;
  }
  NCCL_DEVICE_INLINE int size() const { return uniccl::devapi::waveSize() * (int)nWarps; }
  NCCL_DEVICE_INLINE int num_threads() const { return size(); }
  NCCL_DEVICE_INLINE void sync() { uniccl::devapi::syncNamed(1 + (int)id, size()); }
};
#endif

struct ncclCoopCta {
  NCCL_DEVICE_INLINE int thread_rank() const { return uniccl::devapi::threadIndex(); }
  NCCL_DEVICE_INLINE int size() const { return uniccl::devapi::blockThreads(); }
  NCCL_DEVICE_INLINE int num_threads() const { return uniccl::devapi::blockThreads(); }
  NCCL_DEVICE_INLINE void sync() { uniccl::devapi::syncBlock(); }
};

/* Known at compile time: is the group a single thread? Is it within one warp? */
template <int n>
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopTile<n>) {
  return n == 1;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopCta) { return false; }
template <int n>
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopTile<n>) {
  return true;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopCta) { return false; }
#if !defined(UNICCL_DEVICE_API_CUDA)
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopWarp) { return false; }
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopWarp) { return true; }
#endif
#if defined(UNICCL_DEVICE_API_NAMED_BARRIERS)
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopWarpSpan) { return false; }
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopWarpSpan) { return false; }
#endif

#endif /* UNICCL_DEVICE_API */
#endif /* UNICCL_NCCL_DEVICE_COOP_H */
