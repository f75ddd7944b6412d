#include "thread_rings.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace trace {

namespace {

// The calling thread's ring and the ThreadRings it belongs to. Trivially
// destructible on purpose: a thread_local destructor in a plugin keeps the
// library loaded until every thread that touched it has exited.
struct ThreadRingRef {
  EventRing* ring;
  uint64_t generation;
};
thread_local ThreadRingRef tRing{nullptr, 0};

long currentTid() { return (long)syscall(SYS_gettid); }

bool threadExited(long tid) {
  return syscall(SYS_tgkill, (long)getpid(), tid, 0) != 0 && errno == ESRCH;
}

}  // namespace

ThreadRings::ThreadRings(uint32_t cellsPerRing, uint64_t generation)
    : cellsPerRing_(cellsPerRing), generation_(generation), slots_(new Slot[kMaxRings]) {}

ThreadRings::~ThreadRings() {
  for (uint32_t i = 0; i < count(); i++) delete slots_[i].ring;
}

EventRing* ThreadRings::mine() {
  if (tRing.generation == generation_) return tRing.ring;
  return attach();
}

EventRing* ThreadRings::attach() {
  std::lock_guard<std::mutex> lock(mutex_);
  const long tid = currentTid();
  EventRing* ring = nullptr;
  const uint32_t n = count_.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n && ring == nullptr; i++) {
    if (slots_[i].free.load(std::memory_order_relaxed)) {
      slots_[i].free.store(false, std::memory_order_relaxed);
      slots_[i].tid.store(tid, std::memory_order_relaxed);
      ring = slots_[i].ring;
    }
  }
  if (ring == nullptr && n < kMaxRings) {
    ring = EventRing::create(n, cellsPerRing_);
    if (ring != nullptr) {
      slots_[n].ring = ring;
      slots_[n].tid.store(tid, std::memory_order_relaxed);
      count_.store(n + 1, std::memory_order_release);
    }
  }
  // A thread that got no ring asks again at its next event (and drops it).
  if (ring != nullptr) tRing = ThreadRingRef{ring, generation_};
  return ring;
}

void ThreadRings::reclaimExited() {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint32_t n = count_.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n; i++) {
    Slot& s = slots_[i];
    if (s.free.load(std::memory_order_relaxed) || !threadExited(s.tid.load(std::memory_order_relaxed))) continue;
    // Its thread is gone, so nothing more is published into it: once read
    // empty it is free.
    if (s.ring->drained()) s.free.store(true, std::memory_order_relaxed);
  }
}

}  // namespace trace
