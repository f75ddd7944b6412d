#include "common/enqueue/event_callback_queue.h"

#include <new>

#include "common/check.h"
#include "common/enqueue/event_pool.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {
constexpr size_t kNodesPerChunk = 64;
}

ncclResult_t EventCallbackQueue::allocNodes() {
  try {
    chunks_.reserve(chunks_.size() + 1);
    chunks_.emplace_back(new Node[kNodesPerChunk]);
  } catch (const std::bad_alloc&) {
    WARN("EventCallbackQueue: out of host memory growing beyond %zu callbacks", nodesAllocated_);
    return ncclSystemError;
  }
  Node* chunk = chunks_.back().get();
  for (size_t i = 0; i < kNodesPerChunk; ++i) {
    chunk[i].next = free_;
    free_ = &chunk[i];
  }
  nodesAllocated_ += kNodesPerChunk;
  return ncclSuccess;
}

ncclResult_t EventCallbackQueue::push(gpu::Event e, Callback fn, void* arg, uint64_t value) {
  if (fn == nullptr) {
    WARN("EventCallbackQueue::push: null callback");
    return ncclInternalError;
  }
  if (free_ == nullptr) UCHECK(allocNodes());
  Node* n = free_;
  free_ = n->next;
  *n = Node{e, fn, arg, value, nullptr};
  if (tail_ != nullptr) tail_->next = n; else head_ = n;
  tail_ = n;
  ++size_;
  return ncclSuccess;
}

ncclResult_t EventCallbackQueue::poll(bool waitSome) {
  if (polling_) {
    WARN("EventCallbackQueue::poll called from inside a callback; callbacks must not poll");
    return ncclInternalError;
  }
  polling_ = true;
  ncclResult_t res = ncclSuccess;
  bool mayWait = waitSome;
  while (head_ != nullptr) {
    res = gpu::eventQuery(head_->event);
    if (res == ncclInProgress) {
      if (!mayWait) {
        res = ncclSuccess;
        break;
      }
      res = gpu::eventSynchronize(head_->event);
    }
    if (res != ncclSuccess) break;  // node kept: see the header
    mayWait = false;

    // Unlink before running, so a callback that pushes sees a consistent queue.
    Node* n = head_;
    head_ = n->next;
    if (head_ == nullptr) tail_ = nullptr;
    --size_;
    const Node done = *n;
    n->next = free_;
    free_ = n;
    done.fn(done.arg, done.value);
    if (recycle_ != nullptr) recycle_->put(done.event);
  }
  polling_ = false;
  return res;
}

ncclResult_t EventCallbackQueue::drain() {
  while (!empty()) UCHECK(poll(/*waitSome=*/true));
  return ncclSuccess;
}

}  // namespace uniccl
