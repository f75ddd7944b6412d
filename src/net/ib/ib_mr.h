// Memory registration for the IB transport: host memory always (pinned by
// ibv_reg_mr); GPU memory only when GPUDirect RDMA is enabled (UNICCL_IB_GDR=1):
// by ibv_reg_mr on the device pointer (needs a peer-memory kernel module such
// as nvidia-peermem) or by ibv_reg_dmabuf_mr from a dma-buf fd the caller
// exported. Without it the proxy stages GPU data through host memory.
#pragma once

#include <memory>

#include "net/ib/ib_devices.h"

namespace uniccl {
namespace ib {

struct MemHandle {
  std::shared_ptr<DeviceContext> context;  // declared first: outlives mr
  MrPtr mr;
  MrKeys keys;
  uintptr_t base = 0;  // the caller's range (not page-rounded)
  size_t size = 0;
  bool gpu = false;  // device memory: received data needs iflush
};

constexpr int kMrAccess = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;

// Registers [data, data + size) (page-rounded for ibv_reg_mr). `gpu`: the
// range is device memory (peer-memory registration).
ncclResult_t registerMemory(const std::shared_ptr<DeviceContext>& ctx, void* data, size_t size, bool gpu,
                            std::unique_ptr<MemHandle>* out);
// Registers `size` bytes at `offset` of dma-buf `fd`, mapped at `data`.
ncclResult_t registerDmabuf(const std::shared_ptr<DeviceContext>& ctx, void* data, size_t size, uint64_t offset,
                            int fd, std::unique_ptr<MemHandle>* out);

// Whether [p, p + n) lies inside the registration.
bool inRegion(const MemHandle& mh, const void* p, size_t n);

}  // namespace ib
}  // namespace uniccl
