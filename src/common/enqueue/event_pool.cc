#include "common/enqueue/event_pool.h"

#include "common/check.h"
#include "common/util/debug.h"

namespace uniccl {

EventPool::~EventPool() {
  // Events still handed out die too: the pool's owner outlives their users.
  for (gpu::Event e : all_) (void)gpu::eventDestroy(e);
}

ncclResult_t EventPool::createOne() {
  // Grow both vectors before creating, so that a failed allocation leaves no
  // event unaccounted for and put() can never need memory.
  try {
    all_.reserve(all_.size() + 1);
    free_.reserve(all_.size() + 1);
  } catch (const std::bad_alloc&) {
    WARN("EventPool: out of host memory growing the pool beyond %zu events", all_.size());
    return ncclSystemError;
  }
  gpu::Event e = nullptr;
  UCHECK(gpu::eventCreate(&e, flags_));
  all_.push_back(e);
  free_.push_back(e);
  return ncclSuccess;
}

ncclResult_t EventPool::get(gpu::Event* e) {
  if (free_.empty()) UCHECK(createOne());
  *e = free_.back();
  free_.pop_back();
  return ncclSuccess;
}

void EventPool::put(gpu::Event e) { free_.push_back(e); }

ncclResult_t EventPool::reserve(size_t count) {
  while (free_.size() < count) UCHECK(createOne());
  return ncclSuccess;
}

}  // namespace uniccl
