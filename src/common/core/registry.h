// Buffers registered with ncclCommRegister. Registration validates the
// range; messages received into a registered buffer over P2P may be stored
// there by the sender directly (core/direct_recv.h), which records here
// where each sending peer's process sees the buffer's allocations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "uniccl.h"

namespace uniccl {

// Where peer `peer`'s process sees an allocation of this rank's
// (core/import_service.h): peerBase 0 when the peer could not map it, or
// while the request is pending (core/direct_importer.h).
struct PeerView {
  int peer;
  uintptr_t allocBase;
  uintptr_t peerBase;
  bool pending = false;
};

struct RegisteredBuffer {
  uint64_t id;   // never reused within the registry (the importer finds its registration by it)
  uintptr_t base;
  size_t size;
  int device;
  std::vector<PeerView> views;
};

class BufferRegistry {
 public:
  [[nodiscard]] ncclResult_t add(void* buff, size_t size, int expectDevice, void** handle);
  // views: receives the removed buffer's peer views (to release them).
  [[nodiscard]] ncclResult_t remove(void* handle, std::vector<PeerView>* views = nullptr);
  size_t count() const;
  // Runs f(buffer) under the registry's lock on the registration `id`.
  // False: it is not registered (any more).
  template <typename F>
  bool withRegistration(uint64_t id, F&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& b : buffers_)
      if (b->id == id) {
        f(*b);
        return true;
      }
    return false;
  }
  // Runs f(buffer) under the registry's lock on the registered buffer that
  // holds [p, p + n). False: none does.
  template <typename F>
  bool withBufferHolding(uintptr_t p, size_t n, F&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& b : buffers_)
      if (p >= b->base && n <= b->size && p - b->base <= b->size - n) {
        f(*b);
        return true;
      }
    return false;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<RegisteredBuffer>> buffers_;
  uint64_t nextId_ = 1;
};

}  // namespace uniccl
