// Memory-related API: ncclMemAlloc/Free, buffer registration and the
// PreMulSum operator constructors (windows: window_api.cc).
#include <cstdint>

#include "common/api_export.h"
#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/direct_recv.h"
#include "common/core/validate.h"
#include "common/memory/mem_alloc.h"
#include "common/util/debug.h"

using namespace uniccl;

// Virtual memory where the GPU has it (peers can map the buffers), plain
// device memory elsewhere: memory/mem_alloc.h.
NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size);
ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) {
    WARN("ncclMemAlloc: ptr is a NULL pointer");
    return ncclInvalidArgument;
  }
  if (size == 0) {
    *ptr = nullptr;
    return ncclSuccess;
  }
  void* p = nullptr;
  UCHECK(memAlloc(&p, size));
  *ptr = p;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemFree, void* ptr);
ncclResult_t ncclMemFree(void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  return memFree(ptr);
}

NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  UCHECK(checkCommUsable(comm, "ncclCommRegister"));
  if (buff == nullptr || handle == nullptr || size == 0) {
    WARN("ncclCommRegister: need a buffer, a size > 0 and a handle pointer (got %p, %zu, %p)", buff, size,
         (void*)handle);
    return ncclInvalidArgument;
  }
  if (size > UINTPTR_MAX - reinterpret_cast<uintptr_t>(buff)) {
    WARN("ncclCommRegister: size %zu from %p runs past the end of the address space", size, buff);
    return ncclInvalidArgument;
  }
  return comm->registry.add(buff, size, comm->gpuDev, handle);
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  UCHECK(checkCommHandle(comm, "ncclCommDeregister"));
  if (handle == nullptr) return ncclSuccess;   // as NCCL: nothing was registered
  std::vector<PeerView> views;
  UCHECK(comm->registry.remove(handle, &views));
  releaseDirectViews(comm, views);   // peers that mapped it for direct receives unmap it
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
         ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  const char* fn = "ncclRedOpCreatePreMulSum";
  UCHECK(checkCommUsable(comm, fn));
  UCHECK(checkDataType(datatype, fn));
  if (op == nullptr || scalar == nullptr) {
    WARN("%s: op and scalar must not be NULL", fn);
    return ncclInvalidArgument;
  }
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate) {
    WARN("%s: invalid residence %d", fn, (int)residence);
    return ncclInvalidArgument;
  }
  if (residence == ncclScalarDevice) {
    gpu::PointerInfo info;
    if (gpu::pointerGetInfo(scalar, &info) != ncclSuccess || info.kind == gpu::MemoryKind::Unregistered) {
      WARN("%s: scalar %p is declared ncclScalarDevice but is not GPU-accessible memory", fn, scalar);
      return ncclInvalidArgument;
    }
  }
  return comm->redOps.create(op, scalar, datatype, residence);
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  UCHECK(checkCommHandle(comm, "ncclRedOpDestroy"));
  return comm->redOps.destroy(op);
}
