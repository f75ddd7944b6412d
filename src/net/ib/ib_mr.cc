#include "net/ib/ib_mr.h"

#include <unistd.h>

#include <cstring>

#include "common/util/debug.h"

namespace uniccl {
namespace ib {

ncclResult_t registerMemory(const std::shared_ptr<DeviceContext>& ctx, void* data, size_t size, bool gpu,
                            std::unique_ptr<MemHandle>* out) {
  out->reset();
  if (data == nullptr || size == 0) {
    WARN("NET/IB: regMr of %p (+%zu bytes): nothing to register (the buffer must be non-empty)", data, size);
    return ncclInvalidArgument;
  }
  // Verbs pins whole pages; registering the pages around the range lets
  // neighbouring buffers share them without overlapping registrations failing.
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t start = (uintptr_t)data & ~(page - 1);
  uintptr_t end = ((uintptr_t)data + size + page - 1) & ~(page - 1);
  if (gpu) {  // device allocations are not page-rounded by the host's page size
    start = (uintptr_t)data;
    end = (uintptr_t)data + size;
  }
  auto mh = std::make_unique<MemHandle>();
  mh->context = ctx;
  Mr* raw = nullptr;
  if (int err = ctx->verbs->regMr(ctx->pd.get(), (void*)start, end - start, kMrAccess, &raw, &mh->keys)) {
    WARN("NET/IB: ibv_reg_mr of %s memory %p (+%zu bytes) failed: %s (%s)", gpu ? "GPU" : "host", data, size,
         strerror(err),
         gpu ? "GPU memory needs a peer-memory module (nvidia-peermem); unset UNICCL_IB_GDR to stage through host"
             : "check `ulimit -l` (locked memory) and the HCA's max_mr_size");
    return ncclSystemError;
  }
  mh->mr = own<MrPtr>(ctx->verbs, raw);
  mh->base = (uintptr_t)data;
  mh->size = size;
  mh->gpu = gpu;
  *out = std::move(mh);
  return ncclSuccess;
}

ncclResult_t registerDmabuf(const std::shared_ptr<DeviceContext>& ctx, void* data, size_t size, uint64_t offset,
                            int fd, std::unique_ptr<MemHandle>* out) {
  out->reset();
  if (!ctx->verbs->hasDmabuf()) {
    WARN("NET/IB: regMrDmaBuf: this libibverbs has no ibv_reg_dmabuf_mr (rdma-core >= 34 needed)");
    return ncclInternalError;
  }
  if (fd < 0 || size == 0) {
    WARN("NET/IB: regMrDmaBuf of fd %d (+%zu bytes): needs a dma-buf fd and a non-empty range", fd, size);
    return ncclInvalidArgument;
  }
  auto mh = std::make_unique<MemHandle>();
  mh->context = ctx;
  Mr* raw = nullptr;
  if (int err = ctx->verbs->regDmabufMr(ctx->pd.get(), offset, size, (uint64_t)(uintptr_t)data, fd, kMrAccess, &raw,
                                        &mh->keys)) {
    WARN("NET/IB: ibv_reg_dmabuf_mr of fd %d offset %llu (+%zu bytes) failed: %s (does the kernel and HCA driver "
         "support dma-buf? unset UNICCL_IB_GDR to stage through host)",
         fd, (unsigned long long)offset, size, strerror(err));
    return ncclSystemError;
  }
  mh->mr = own<MrPtr>(ctx->verbs, raw);
  mh->base = (uintptr_t)data;
  mh->size = size;
  mh->gpu = true;
  *out = std::move(mh);
  return ncclSuccess;
}

bool inRegion(const MemHandle& mh, const void* p, size_t n) {
  uintptr_t a = (uintptr_t)p;
  return a >= mh.base && n <= mh.size && a - mh.base <= mh.size - n;
}

}  // namespace ib
}  // namespace uniccl
