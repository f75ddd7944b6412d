// Event id -> PendingEvent*, for the writer thread: open addressing with
// linear probing, so that finding an event for each stop and state costs no
// allocation (a node-based std::unordered_map allocates per insert).
#pragma once

#include <cstdint>
#include <vector>

#include "pending_event.h"

namespace trace {

class IdMap {
 public:
  IdMap() : slots_(kInitial) {}

  PendingEvent* find(uint64_t id) const {
    for (size_t i = slotOf(id);; i = next(i)) {
      if (slots_[i].id == id) return slots_[i].event;
      if (slots_[i].id == 0) return nullptr;
    }
  }
  // `id` (non-zero) must not be in the map.
  void insert(uint64_t id, PendingEvent* e) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    size_t i = slotOf(id);
    while (slots_[i].id != 0) i = next(i);
    slots_[i] = Slot{id, e};
    size_++;
  }
  void erase(uint64_t id) {
    size_t i = slotOf(id);
    while (slots_[i].id != id) {
      if (slots_[i].id == 0) return;
      i = next(i);
    }
    // Backward shift: later entries of the probe run move up, so that no
    // tombstones accumulate.
    for (size_t j = next(i);; j = next(j)) {
      if (slots_[j].id == 0) break;
      const size_t home = slotOf(slots_[j].id);
      // Entry j may fill the hole at i unless its home lies cyclically in (i, j].
      const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!stays) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
    size_--;
  }
  size_t size() const { return size_; }
  template <typename F>
  void forEach(F f) const {
    for (const Slot& s : slots_)
      if (s.id != 0) f(s.event);
  }

 private:
  static constexpr size_t kInitial = 1024;
  struct Slot {
    uint64_t id = 0;
    PendingEvent* event = nullptr;
  };
  size_t slotOf(uint64_t id) const { return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & (slots_.size() - 1); }
  size_t next(size_t i) const { return (i + 1) & (slots_.size() - 1); }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    size_ = 0;
    for (const Slot& s : old)
      if (s.id != 0) insert(s.id, s.event);
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace trace
