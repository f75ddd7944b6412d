// The conn FIFO: the queue between the side that fills network staging slots
// (a kernel, or the proxy for a receive) and the side that drains them (the
// proxy for a send, or a kernel for a receive). NCCL calls it connFifo.
//
// Layout: kSteps (NCCL_STEPS = 8) slots plus two 64-bit counters that only
// grow. Step s lives in slot s % kSteps.
//   tail  steps the producer filled  (the producer stores s + 1 after step s)
//   head  steps the consumer freed   (the consumer stores s + 1 after step s)
// The producer may fill step s only when s - head < kSteps; the consumer may
// read step s only when tail > s. A slot whose size is -1 is free.
//
// Memory-ordering contract (both producers and consumers, GPU or CPU):
//   producer: write the data; write the slot's mode/offset/ptr, then size;
//             release fence at system scope (__threadfence_system on the GPU,
//             release store on the CPU); store tail = s + 1.
//   consumer: acquire-load tail (> s); read size/mode/offset/ptr and the
//             data; write size = -1; release fence at system scope; store
//             head = s + 1.
// The struct is plain data (no std::atomic) because a kernel reads and
// writes it too; host code goes through the helpers below, which use the
// compiler's atomic builtins on the same addresses.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/dev_types.h"
#include "uniccl.h"

namespace uniccl {

constexpr int kConnSteps = dev::kSteps;  // NCCL_STEPS: the kernels fill the same steps

// A send step of LL lines (dev::kConnSizeLL in its size): the lines lie in
// the connection's LL slots, and the producer advanced no tail for it.
constexpr int64_t kConnSizeLL = dev::kConnSizeLL;

// Where the bytes of a slot are (NCCL_MODE_*). uniccl's kernels and proxy
// use only the staging slots; the slot keeps NCCL's offset and ptr fields
// (the layout is NCCL's) but no other mode is produced or accepted.
enum ConnFifoMode : int32_t {
  kConnModeNormal = 0,  // staging buffer + slot * stepBytes
};

struct ConnFifoSlot {
  int32_t mode;    // ConnFifoMode
  int32_t offset;  // byte offset of the slot in the staging buffer (written by the recv proxy, as NCCL does)
  int64_t size;    // bytes in the slot; -1: free
  void* ptr;       // unused (NCCL's pointer mode)
  uint64_t pad;    // 32 bytes per slot: two slots per 64-byte line, never straddling
};
static_assert(sizeof(ConnFifoSlot) == 32, "slot layout is shared with the kernels");
static_assert(sizeof(ConnFifoSlot) == sizeof(dev::ConnSlot) &&
                  offsetof(ConnFifoSlot, size) == offsetof(dev::ConnSlot, size),
              "the kernels' view of a slot (dev::ConnSlot) must match");

// Counters on their own cache lines: the producer's and the consumer's
// stores must not bounce one line between the GPU and the CPU.
struct ConnFifo {
  alignas(64) uint64_t tail;
  alignas(64) uint64_t head;
  alignas(64) ConnFifoSlot slots[kConnSteps];
};
static_assert(sizeof(ConnFifo) == 128 + 32 * kConnSteps, "conn FIFO layout is shared with the kernels");

// ---- host-side accessors (the GPU side uses port.h's equivalents) ----

inline uint64_t connLoadAcquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void connStoreRelease(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
inline int64_t connLoadSize(const ConnFifoSlot& s) { return __atomic_load_n(&s.size, __ATOMIC_RELAXED); }

// Resets to the initial state: counters 0, every slot free.
void connFifoReset(ConnFifo* f);

// Producer: may step `step` be filled (its slot freed by the consumer)?
// The consumer may have freed steps not filled yet: an LL consumer of a
// step without lines (a zero-byte part) does not wait for its message.
inline bool connFifoCanFill(const ConnFifo* f, uint64_t step) {
  return step < connLoadAcquire(&f->head) + static_cast<uint64_t>(kConnSteps);
}

// Producer: publishes step `step` (its data already written) as `size` bytes.
inline void connFifoPublish(ConnFifo* f, uint64_t step, int64_t size, int32_t offset = 0) {
  ConnFifoSlot& s = f->slots[step % kConnSteps];
  s.mode = kConnModeNormal;
  s.offset = offset;
  s.ptr = nullptr;
  __atomic_store_n(&s.size, size, __ATOMIC_RELAXED);
  connStoreRelease(&f->tail, step + 1);  // orders data + slot fields before tail
}

// Consumer: has step `step` been published?
inline bool connFifoReady(const ConnFifo* f, uint64_t step) { return connLoadAcquire(&f->tail) > step; }

// Consumer: frees step `step` after reading it.
inline void connFifoFree(ConnFifo* f, uint64_t step) {
  __atomic_store_n(&f->slots[step % kConnSteps].size, int64_t{-1}, __ATOMIC_RELAXED);
  connStoreRelease(&f->head, step + 1);  // orders our reads + size = -1 before head
}

// Memory for a conn FIFO that both sides see. Production uses mapped host
// memory (gpu::hostAllocMapped: the kernel gets devicePtr()); tests pass
// plain host memory. Owns the allocation.
class ConnFifoBuffer {
 public:
  using AllocFn = ncclResult_t (*)(void** hostPtr, void** devPtr, size_t bytes);
  using FreeFn = ncclResult_t (*)(void* hostPtr);

  ConnFifoBuffer() = default;
  ~ConnFifoBuffer();
  ConnFifoBuffer(const ConnFifoBuffer&) = delete;
  ConnFifoBuffer& operator=(const ConnFifoBuffer&) = delete;
  ConnFifoBuffer(ConnFifoBuffer&& o) noexcept;
  ConnFifoBuffer& operator=(ConnFifoBuffer&& o) noexcept;

  // Allocates and resets (all slots free). Replaces what was held.
  [[nodiscard]] ncclResult_t allocate(AllocFn alloc, FreeFn release);
  [[nodiscard]] ncclResult_t allocateHost();    // plain page-aligned host memory (tests, CPU-only peers)
  [[nodiscard]] ncclResult_t allocateMapped();  // gpu::hostAllocMapped (conn_fifo_mapped.cc)
  void reset();                   // frees

  ConnFifo* host() const { return host_; }
  ConnFifo* device() const { return device_; }  // the address kernels use

 private:
  ConnFifo* host_ = nullptr;
  ConnFifo* device_ = nullptr;
  FreeFn release_ = nullptr;
};

// The plain host allocator behind allocateHost (exposed for tests).
[[nodiscard]] ncclResult_t connFifoHostAlloc(void** hostPtr, void** devPtr, size_t bytes);
[[nodiscard]] ncclResult_t connFifoHostFree(void* hostPtr);

}  // namespace uniccl
