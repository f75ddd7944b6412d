#include "common/core/registry.h"

#include <algorithm>

#include "common/gpu.h"
#include "common/util/debug.h"

namespace uniccl {

ncclResult_t BufferRegistry::add(void* buff, size_t size, int expectDevice, void** handle) {
  gpu::PointerInfo info;
  if (gpu::pointerGetInfo(buff, &info) != ncclSuccess || info.kind != gpu::MemoryKind::Device) {
    WARN("ncclCommRegister: %p is not GPU device memory", buff);
    return ncclInvalidArgument;
  }
  if (info.device != expectDevice) {
    WARN("ncclCommRegister: %p is on GPU %d, the communicator uses GPU %d", buff, info.device, expectDevice);
    return ncclInvalidArgument;
  }
  void* base = nullptr;
  size_t allocSize = 0;
  if (gpu::memGetAddressRange(buff, &base, &allocSize) == ncclSuccess &&
      static_cast<char*>(buff) + size > static_cast<char*>(base) + allocSize) {
    WARN("ncclCommRegister: [%p, +%zu) runs past the end of its allocation (%p, %zu bytes)", buff, size, base,
         allocSize);
    return ncclInvalidArgument;
  }
  auto entry = std::make_unique<RegisteredBuffer>(RegisteredBuffer{0, reinterpret_cast<uintptr_t>(buff), size,
                                                                   info.device, {}});
  std::lock_guard<std::mutex> lock(mutex_);
  entry->id = nextId_++;
  *handle = entry.get();
  buffers_.push_back(std::move(entry));
  return ncclSuccess;
}

ncclResult_t BufferRegistry::remove(void* handle, std::vector<PeerView>* views) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(buffers_.begin(), buffers_.end(), [&](const auto& b) { return b.get() == handle; });
  if (it == buffers_.end()) {
    WARN("ncclCommDeregister: handle %p was not returned by ncclCommRegister on this communicator", handle);
    return ncclInvalidArgument;
  }
  if (views != nullptr) *views = std::move((*it)->views);
  buffers_.erase(it);
  return ncclSuccess;
}

size_t BufferRegistry::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return buffers_.size();
}

}  // namespace uniccl
