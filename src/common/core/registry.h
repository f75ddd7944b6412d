// Buffers registered with ncclCommRegister. Registration validates the
// range now; zero-copy use of registered buffers comes with the performance work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "uniccl.h"

namespace uniccl {

struct RegisteredBuffer {
  uintptr_t base;
  size_t size;
  int device;
};

class BufferRegistry {
 public:
  ncclResult_t add(void* buff, size_t size, int expectDevice, void** handle);
  ncclResult_t remove(void* handle);
  size_t count() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<RegisteredBuffer>> buffers_;
};

}  // namespace uniccl
