// One thread's records on their way to the writer thread: a single-producer
// single-consumer ring of cells (trace_record.h). The owning thread writes
// records and publishes them; the writer (one consumer at a time, under the
// tracer's pass lock) moves them out (ring_drainer.h) and frees their cells
// for reuse.
//
// Why a ring: its memory is written again and again, so it stays in the
// caches and its pages were faulted in once, at creation. A record costs the
// producer no lock, no allocation and no shared counter; it reads the
// consumer's position only when its cached copy says the ring is full.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "trace_record.h"

namespace trace {

class EventRing {
 public:
  // `cells`: a power of two. Returns nullptr when the memory cannot be had.
  static EventRing* create(uint32_t index, uint32_t cells);
  ~EventRing();
  EventRing(const EventRing&) = delete;
  EventRing& operator=(const EventRing&) = delete;

  uint32_t index() const { return index_; }
  uint32_t capacity() const { return capacity_; }

  // ----------------------------------------------------------- producer
  // Room for a record of `n` cells that leaves at least `keepFree` cells
  // free; nullptr when the ring is fuller than that. The record is the
  // caller's to fill until publish().
  Cell* reserve(uint32_t n, uint32_t keepFree) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    const uint32_t at = (uint32_t)head & mask_;
    const uint32_t pad = at + n > capacity_ ? capacity_ - at : 0;   // records never wrap
    const uint64_t need = (uint64_t)pad + n + keepFree;
    uint64_t tail = cachedTail_.load(std::memory_order_relaxed);
    if (capacity_ - (head - tail) < need) {
      tail = tail_.load(std::memory_order_acquire);   // the writer freed cells up to here
      cachedTail_.store(tail, std::memory_order_relaxed);
      if (capacity_ - (head - tail) < need) return nullptr;
    }
    if (pad != 0) {
      RecordHead h{};
      h.kind = RecordKind::kPad;
      h.cells = (uint8_t)pad;
      memcpy(&cells_[at], &h, sizeof(h));
    }
    reserved_.store(pad + n, std::memory_order_relaxed);
    return &cells_[pad != 0 ? 0 : at];
  }
  // The id of the start just reserved (call once per start, before publish).
  uint64_t takeId() {
    const uint64_t seq = starts_.load(std::memory_order_relaxed) + 1;
    starts_.store(seq, std::memory_order_relaxed);
    return idBase_ + seq;
  }
  // The record reserved last is the writer's from here.
  void publish() {
    head_.store(head_.load(std::memory_order_relaxed) + reserved_.load(std::memory_order_relaxed),
                std::memory_order_release);
  }

  // ----------------------------------------------------------- consumer
  // Positions count cells from the ring's creation: the records not read yet
  // are those in [consumed(), published()), each at cellAt(its position).
  // Records never wrap: the cells from a position up to the ring's end
  // (cellsToEnd) hold whole records, in order, and lie one after the other
  // in memory.
  uint64_t published() const { return head_.load(std::memory_order_acquire); }
  uint64_t consumed() const { return tail_.load(std::memory_order_relaxed); }
  const Cell* cellAt(uint64_t pos) const { return &cells_[(uint32_t)pos & mask_]; }
  uint32_t cellsToEnd(uint64_t pos) const { return capacity_ - ((uint32_t)pos & mask_); }
  // The cells before `pos` were read, `starts` starts among them: the
  // producer may reuse them.
  void release(uint64_t pos, uint64_t starts) {
    startsRead_ += starts;
    tail_.store(pos, std::memory_order_release);
  }
  // The starts read so far (the ids takeId handed out for them are the first ones).
  uint64_t startsRead() const { return startsRead_; }
  // Every record published so far was read (consumer side).
  bool drained() const { return consumed() == published(); }

 private:
  EventRing(uint32_t index, uint32_t cells, Cell* memory);

  // Written by the producer. Atomics (relaxed: plain moves) because a ring
  // outlives the thread that owns it and passes to another (thread_rings.h).
  alignas(64) std::atomic<uint64_t> head_{0};    // cells published
  std::atomic<uint64_t> cachedTail_{0};          // the last tail_ the producer read
  std::atomic<uint64_t> starts_{0};              // ids handed out
  std::atomic<uint32_t> reserved_{0};            // cells of the record being written
  // Written by the consumer.
  alignas(64) std::atomic<uint64_t> tail_{0};    // cells read and free again
  uint64_t startsRead_ = 0;                      // starts read (ids, as takeId counts them)
  // Read-only.
  alignas(64) Cell* cells_;
  uint32_t capacity_;
  uint32_t mask_;
  uint32_t index_;
  uint64_t idBase_;
};

}  // namespace trace
