// The work FIFO: a power-of-two ring in host-pinned, device-mapped memory into
// which the host writes work items that kernels read through (devBase,
// offset, mask). Positions are 32-bit monotonic byte counters, `produced`
// (host wrote up to) and `consumed` (GPU finished up to), only ever compared
// through their difference, so they may wrap at 2^32 freely.
//
// Backpressure: when a reservation does not fit, the host polls the
// event-callback queue, blocking on the oldest outstanding event; the
// callbacks of finished launches call markConsumed() and free room.
//
// Size: NCCL_WORK_FIFO_BYTES (default 1 MiB). It must be a power of two of at
// least 4096 and at most 1 GiB; other values are rounded up to the next power
// of two (or clamped to those bounds) with a WARN.
//
// Single-threaded like its communicator: no locks, no allocation after init.
#pragma once

#include <cstdint>

#include "common/gpu.h"

namespace uniccl {

class EventCallbackQueue;

class WorkFifo {
 public:
  static constexpr uint32_t kItemBytes = 64;       // reservation granule; items never straddle the end
  static constexpr uint32_t kMinBytes = 4096;
  static constexpr uint32_t kMaxBytes = 1u << 30;  // keeps counter differences unambiguous
  static constexpr uint32_t kDefaultBytes = 1u << 20;

  WorkFifo() = default;
  ~WorkFifo();
  WorkFifo(const WorkFifo&) = delete;
  WorkFifo& operator=(const WorkFifo&) = delete;

  // The configured size: NCCL_WORK_FIFO_BYTES normalised as described above.
  static uint32_t configuredBytes();
  // Normalises any requested size (WARNs when it had to change it).
  static uint32_t normalizeBytes(int64_t requested);

  // Allocates the ring (bytes == 0: configuredBytes()). `callbacks` is the
  // queue whose completions advance `consumed`; it must outlive the FIFO.
  [[nodiscard]] ncclResult_t init(uint32_t bytes, EventCallbackQueue* callbacks);

  // Reserves `bytes` (a multiple of kItemBytes, at most the capacity) and
  // returns in *offset the ring position of the reservation (the old
  // `produced`; mask it, or use hostPtr()). Blocks while the ring is full.
  [[nodiscard]] ncclResult_t reserve(uint32_t bytes, uint32_t* offset);

  // Copies `bytes` (a multiple of 16) from `src` into the ring at `offset`
  // in 16-byte pieces, each position masked so wrapping is handled.
  void write(uint32_t offset, const void* src, uint32_t bytes);

  // Called from a completion callback: everything before `upTo` has been
  // read by the GPU. Only forward moves within [consumed, produced] apply;
  // stale (older) values are ignored.
  void markConsumed(uint32_t upTo);

  void* hostPtr(uint32_t offset) const { return host_ + (offset & mask_); }
  void* devBase() const { return dev_; }
  uint32_t mask() const { return mask_; }
  uint32_t capacity() const { return mask_ + 1; }
  uint32_t produced() const { return produced_; }
  uint32_t consumed() const { return consumed_; }
  uint32_t used() const { return produced_ - consumed_; }

  // Tests: starts both counters at `value` (e.g. 2^32 - 128) to cross the wrap.
  void setCountersForTesting(uint32_t value) { produced_ = consumed_ = value; }

 private:
  char* host_ = nullptr;
  void* dev_ = nullptr;
  uint32_t mask_ = 0;
  uint32_t produced_ = 0;
  uint32_t consumed_ = 0;
  EventCallbackQueue* callbacks_ = nullptr;
};

}  // namespace uniccl
