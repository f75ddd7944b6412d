// Which ring each thread writes its records to: one ring per thread that
// reports events, made at its first event. When the thread has exited and
// the writer has read its ring empty, the ring goes to the next thread that
// needs one, so a program that starts and ends threads keeps a bounded
// number of rings.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "event_ring.h"

namespace trace {

class ThreadRings {
 public:
  // At most this many rings at a time (ids hold the ring index: trace_record.h).
  static constexpr uint32_t kMaxRings = 4096;

  // `generation`: different for every ThreadRings of the process, so that a
  // thread's cached ring of an earlier one is never taken for one of this.
  ThreadRings(uint32_t cellsPerRing, uint64_t generation);
  ~ThreadRings();
  ThreadRings(const ThreadRings&) = delete;
  ThreadRings& operator=(const ThreadRings&) = delete;

  // The calling thread's ring; nullptr when no ring could be made for it.
  EventRing* mine();
  uint64_t generation() const { return generation_; }

  // ------------------------------------------------- the writer's side
  uint32_t count() const { return count_.load(std::memory_order_acquire); }
  EventRing* at(uint32_t i) const { return slots_[i].ring; }
  // The thread that writes ring i now (its records are that thread's).
  long ownerTid(uint32_t i) const { return slots_[i].tid.load(std::memory_order_relaxed); }
  // The ring that handed out `id`, or nullptr.
  EventRing* ringOfId(uint64_t id) const {
    const uint64_t i = id >> kRingIdShift;
    return i < count() ? slots_[i].ring : nullptr;
  }
  // Rings whose thread has exited and which were read empty are handed to
  // new threads from now on. Call with no drain running.
  void reclaimExited();

 private:
  EventRing* attach();   // mine()'s slow path: the thread's first event here

  struct Slot {
    EventRing* ring = nullptr;
    std::atomic<long> tid{0};         // the owning thread
    std::atomic<bool> free{false};    // its thread exited and the ring was read empty
  };
  const uint32_t cellsPerRing_;
  const uint64_t generation_;
  std::mutex mutex_;   // attach() and reclaimExited()
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint32_t> count_{0};
};

}  // namespace trace
