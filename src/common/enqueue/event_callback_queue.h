// The GPU-to-host completion path: an intrusive FIFO of {event, callback}
// nodes. Work submitted on one stream completes in submission order, so the
// queue is polled from its head and stops at the first event not yet reached;
// callbacks therefore run strictly in push order. Callbacks reclaim what the
// finished work held (advance the work FIFO's `consumed`, free plan memory).
//
// Single-threaded like the communicator that owns it (no locks); nodes come
// from an internal free list, so steady-state push/poll never allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/gpu.h"

namespace uniccl {

class EventPool;

class EventCallbackQueue {
 public:
  using Callback = void (*)(void* arg, uint64_t value);

  // When `recycle` is given, each node's event goes back to that pool once
  // its callback has run (the pool must outlive the queue).
  explicit EventCallbackQueue(EventPool* recycle = nullptr) : recycle_(recycle) {}
  // Pending callbacks are dropped without running (call drain() first to run
  // them); their events stay owned by whoever owns them (e.g. the pool).
  ~EventCallbackQueue() = default;
  EventCallbackQueue(const EventCallbackQueue&) = delete;
  EventCallbackQueue& operator=(const EventCallbackQueue&) = delete;

  // Queues fn(arg, value) to run once `e` (already recorded) has completed.
  [[nodiscard]] ncclResult_t push(gpu::Event e, Callback fn, void* arg, uint64_t value);

  // Runs, in push order, the callbacks of completed events and stops at the
  // first event not yet complete. With waitSome and nothing complete, blocks
  // on the oldest event first, so at least one callback runs.
  //
  // An event that reports an error (the work it tracks failed) is returned to
  // the caller and its node stays at the head, callback not run: the queue
  // keeps its state and every later poll reports the same error until the
  // owner aborts (and then destroys the queue, dropping the callbacks).
  // Callbacks must not call poll() or drain() (reentry is refused with
  // ncclInternalError); they may push().
  [[nodiscard]] ncclResult_t poll(bool waitSome);
  // Waits for every queued event and runs every callback.
  [[nodiscard]] ncclResult_t drain();

  bool empty() const { return head_ == nullptr; }
  size_t size() const { return size_; }
  // Nodes allocated so far (tests check the steady state does not grow it).
  size_t nodesAllocated() const { return nodesAllocated_; }

 private:
  struct Node {
    gpu::Event event;
    Callback fn;
    void* arg;
    uint64_t value;
    Node* next;
  };
  [[nodiscard]] ncclResult_t allocNodes();

  EventPool* recycle_;
  Node* head_ = nullptr;
  Node* tail_ = nullptr;
  Node* free_ = nullptr;
  size_t size_ = 0;
  size_t nodesAllocated_ = 0;
  bool polling_ = false;
  std::vector<std::unique_ptr<Node[]>> chunks_;
};

}  // namespace uniccl
