// Conn FIFO memory: reset, RAII ownership, the plain host allocator.
#include "common/proxy/conn_fifo.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "common/util/debug.h"

namespace uniccl {

void connFifoReset(ConnFifo* f) {
  std::memset(static_cast<void*>(f), 0, sizeof(*f));
  for (ConnFifoSlot& s : f->slots) s.size = -1;
  // No fence: the FIFO reaches the other side only through a later synchronizing hand-over.
}

ncclResult_t connFifoHostAlloc(void** hostPtr, void** devPtr, size_t bytes) {
  void* p = nullptr;
  int err = posix_memalign(&p, 4096, bytes);
  if (err != 0) {
    WARN("conn FIFO: cannot allocate %zu bytes of host memory: %s", bytes, strerror(err));
    return ncclSystemError;
  }
  *hostPtr = p;
  *devPtr = p;
  return ncclSuccess;
}

ncclResult_t connFifoHostFree(void* hostPtr) {
  free(hostPtr);
  return ncclSuccess;
}

ConnFifoBuffer::~ConnFifoBuffer() { reset(); }

ConnFifoBuffer::ConnFifoBuffer(ConnFifoBuffer&& o) noexcept
    : host_(std::exchange(o.host_, nullptr)),
      device_(std::exchange(o.device_, nullptr)),
      release_(std::exchange(o.release_, nullptr)) {}

ConnFifoBuffer& ConnFifoBuffer::operator=(ConnFifoBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    host_ = std::exchange(o.host_, nullptr);
    device_ = std::exchange(o.device_, nullptr);
    release_ = std::exchange(o.release_, nullptr);
  }
  return *this;
}

ncclResult_t ConnFifoBuffer::allocate(AllocFn alloc, FreeFn release) {
  if (alloc == nullptr || release == nullptr) {
    WARN("conn FIFO: allocate needs both an allocation and a release function");
    return ncclInvalidArgument;
  }
  reset();
  void* h = nullptr;
  void* d = nullptr;
  ncclResult_t r = alloc(&h, &d, sizeof(ConnFifo));
  if (r != ncclSuccess) return r;
  if (h == nullptr || (reinterpret_cast<uintptr_t>(h) % alignof(ConnFifo)) != 0) {
    WARN("conn FIFO: allocator returned %p, not %zu-byte aligned host memory", h, alignof(ConnFifo));
    release(h);
    return ncclInternalError;
  }
  host_ = static_cast<ConnFifo*>(h);
  device_ = static_cast<ConnFifo*>(d);
  release_ = release;
  connFifoReset(host_);
  return ncclSuccess;
}

ncclResult_t ConnFifoBuffer::allocateHost() { return allocate(connFifoHostAlloc, connFifoHostFree); }

void ConnFifoBuffer::reset() {
  if (host_ != nullptr && release_ != nullptr) release_(host_);
  host_ = nullptr;
  device_ = nullptr;
  release_ = nullptr;
}

}  // namespace uniccl
