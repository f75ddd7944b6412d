#include "event_ring.h"

#include <sys/mman.h>

#include <new>

namespace trace {

EventRing* EventRing::create(uint32_t index, uint32_t cells) {
  // Mapped with its pages populated: a thread's first records must not pay
  // a page fault each (1 to 7 us per 4 KiB page in virtual machines whose
  // host maps guest memory lazily).
  void* p = mmap(nullptr, (size_t)cells * sizeof(Cell), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  EventRing* r = new (std::nothrow) EventRing(index, cells, static_cast<Cell*>(p));
  if (r == nullptr) munmap(p, (size_t)cells * sizeof(Cell));
  return r;
}

EventRing::EventRing(uint32_t index, uint32_t cells, Cell* memory)
    : cells_(memory), capacity_(cells), mask_(cells - 1), index_(index),
      idBase_((uint64_t)index << kRingIdShift) {}

EventRing::~EventRing() { munmap(cells_, (size_t)capacity_ * sizeof(Cell)); }

}  // namespace trace
