// A pool of GPU events of one flavour (the communicator's done events, timing
// disabled; the watchdog uses no events: watchdog/eager_tracker.h). Creating an event costs a
// runtime call, so events are created on demand, recycled forever, and all
// destroyed with the pool: the steady state neither creates nor allocates.
#pragma once

#include <cstddef>
#include <vector>

#include "common/gpu.h"

namespace uniccl {

class EventPool {
 public:
  explicit EventPool(unsigned flags = gpu::kEventDisableTiming) : flags_(flags) {}
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  // Hands out a free event, creating one when none is free.
  [[nodiscard]] ncclResult_t get(gpu::Event* e);
  // Takes back an event obtained from get(); never allocates.
  void put(gpu::Event e);
  // Creates events up front so that the first `count` gets do not.
  [[nodiscard]] ncclResult_t reserve(size_t count);

  size_t created() const { return all_.size(); }
  size_t available() const { return free_.size(); }
  unsigned flags() const { return flags_; }

 private:
  [[nodiscard]] ncclResult_t createOne();

  unsigned flags_;
  std::vector<gpu::Event> all_;   // every event created, destroyed with the pool
  std::vector<gpu::Event> free_;  // capacity kept >= all_.size(): put() never reallocates
};

}  // namespace uniccl
