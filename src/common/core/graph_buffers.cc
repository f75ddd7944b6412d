#include "common/core/graph_buffers.h"

#include <atomic>
#include <new>

#include "common/util/debug.h"

namespace uniccl {

namespace {

struct Released {
  void* ptr;
  GraphBufferKind kind;
  Released* next;
};

// Records pushed by user-object destructors; taken whole by reclaimGraphBuffers.
std::atomic<Released*> gReleased{nullptr};

// The user object's destructor: a lock-free push, no allocation, no GPU call.
void onReleased(void* arg) {
  Released* r = static_cast<Released*>(arg);
  Released* head = gReleased.load(std::memory_order_relaxed);
  do {
    r->next = head;
  } while (!gReleased.compare_exchange_weak(head, r, std::memory_order_release, std::memory_order_relaxed));
}

// A free that fails was logged by the backend; nobody waits for its result.
void release(void* ptr, GraphBufferKind kind) {
  if (kind == GraphBufferKind::kHostMapped) (void)gpu::hostFree(ptr);
  else (void)gpu::deviceFree(ptr);
}

}  // namespace

ncclResult_t graphOwnBuffer(gpu::Graph g, void* ptr, GraphBufferKind kind) {
  Released* r = new (std::nothrow) Released{ptr, kind, nullptr};
  if (r == nullptr) {
    WARN("graph capture: out of host memory for a graph-owned buffer's record");
    release(ptr, kind);
    return ncclSystemError;
  }
  // The backends call onReleased(r) on failure too: the record is queued either way.
  return gpu::graphRetainNewUserObject(g, onReleased, r);
}

void reclaimGraphBuffers() {
  if (gReleased.load(std::memory_order_relaxed) == nullptr) return;
  Released* r = gReleased.exchange(nullptr, std::memory_order_acquire);
  while (r != nullptr) {
    Released* next = r->next;
    release(r->ptr, r->kind);
    delete r;
    r = next;
  }
}

}  // namespace uniccl
