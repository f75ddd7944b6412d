#include "common/core/validate.h"

#include <cstdint>

#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/comm_registry.h"
#include "common/util/debug.h"

namespace uniccl {

ncclResult_t checkCommHandle(const ncclComm* comm, const char* fn) {
  if (comm == nullptr) {
    WARN("%s: comm is NULL", fn);
    return ncclInvalidArgument;
  }
  switch (commHandleState(comm)) {
    case CommHandle::Live:
      return ncclSuccess;
    case CommHandle::Destroyed:
      WARN("%s: communicator %p was destroyed (ncclCommDestroy or ncclCommAbort returned): its handle cannot be "
           "used any more", fn, (const void*)comm);
      return ncclInvalidArgument;
    case CommHandle::Unknown:
      break;
  }
  WARN("%s: comm %p is not a valid communicator (not returned by ncclCommInit*, ncclCommSplit or ncclCommShrink, "
       "or destroyed)", fn, (const void*)comm);
  return ncclInvalidArgument;
}

ncclResult_t checkCommUsable(ncclComm* comm, const char* fn) {
  UCHECK(checkCommHandle(comm, fn));
  switch (comm->state.load(std::memory_order_acquire)) {
    case CommState::Ready: break;
    case CommState::Initializing:
      // As NCCL (ncclCommEnsureReady): using a comm still in progress is an invalid argument.
      WARN("%s: communicator %p is still initializing; poll ncclCommGetAsyncError until it returns ncclSuccess",
           fn, (void*)comm);
      return ncclInvalidArgument;
    case CommState::Failed: {
      // As NCCL: the init failure is the comm's async error, and every use returns it.
      int err = comm->asyncError.load(std::memory_order_acquire);
      WARN("%s: communicator %p failed to initialize (%s); destroy it", fn, (void*)comm,
           ncclGetErrorString((ncclResult_t)err));
      return err != ncclSuccess && err != ncclInProgress ? (ncclResult_t)err : ncclInvalidUsage;
    }
    case CommState::Finalized:
      WARN("%s: communicator %p was finalized; only ncclCommDestroy is allowed", fn, (void*)comm);
      return ncclInvalidUsage;
    case CommState::Aborted:
      WARN("%s: communicator %p was aborted", fn, (void*)comm);
      return ncclInvalidUsage;
    case CommState::Revoked:
      WARN("%s: communicator %p was revoked (ncclCommRevoke or ncclCommShrink with NCCL_SHRINK_ABORT): only "
           "ncclCommSplit, ncclCommShrink, ncclCommDestroy and ncclCommAbort are allowed", fn, (void*)comm);
      return ncclInvalidUsage;
  }
  int err = comm->asyncError.load(std::memory_order_acquire);
  if (err != ncclSuccess) {
    WARN("%s: communicator %p has an asynchronous error (%s); abort it", fn, (void*)comm,
         ncclGetErrorString((ncclResult_t)err));
    return (ncclResult_t)err;
  }
  return ncclSuccess;
}

ncclResult_t checkCommManageable(ncclComm* comm, const char* fn) {
  UCHECK(checkCommHandle(comm, fn));
  // A revoked communicator is quiescent (ncclCommRevoke returned): its
  // bootstrap still reaches the live ranks, which is all split and shrink use.
  if (comm->state.load(std::memory_order_acquire) == CommState::Revoked) return ncclSuccess;
  return checkCommUsable(comm, fn);
}

ncclResult_t checkDataType(ncclDataType_t dtype, const char* fn) {
  if ((int)dtype < 0 || (int)dtype >= ncclNumTypes) {
    WARN("%s: invalid datatype %d (valid: 0..%d)", fn, (int)dtype, ncclNumTypes - 1);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t checkRank(const ncclComm* comm, int rank, const char* what, const char* fn) {
  if (rank < 0 || rank >= comm->nRanks) {
    WARN("%s: %s %d is out of range (communicator has %d ranks)", fn, what, rank, comm->nRanks);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t checkedBytes(size_t count, size_t elemSize, size_t factor, size_t* bytes, const char* fn) {
  size_t per = elemSize * factor;
  if (per != 0 && count > SIZE_MAX / per) {
    WARN("%s: count %zu is too large: %zu x %zu bytes overflows size_t", fn, count, factor, elemSize);
    return ncclInvalidArgument;
  }
  *bytes = count * per;
  return ncclSuccess;
}

ncclResult_t checkBuffer(ncclComm* comm, const void* ptr, size_t bytes, const char* name, const char* fn) {
  if (bytes == 0) return ncclSuccess;
  if (ptr == nullptr) {
    WARN("%s: %s is NULL but %zu bytes are to be accessed", fn, name, bytes);
    return ncclInvalidArgument;
  }
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (comm->checkedBuffers.covers(p, bytes)) return ncclSuccess;
  gpu::PointerInfo info;
  if (gpu::pointerGetInfo(ptr, &info) != ncclSuccess) {
    WARN("%s: %s %p is not a valid GPU-accessible pointer", fn, name, ptr);
    return ncclInvalidArgument;
  }
  switch (info.kind) {
    case gpu::MemoryKind::Unregistered:
      WARN("%s: %s %p is ordinary host memory; pass GPU memory (or pinned/managed memory)", fn, name, ptr);
      return ncclInvalidArgument;
    case gpu::MemoryKind::Device:
      if (info.device != comm->gpuDev) {
        WARN("%s: %s %p is on GPU %d but the communicator (rank %d) uses GPU %d", fn, name, ptr, info.device,
             comm->rank, comm->gpuDev);
        return ncclInvalidArgument;
      }
      break;
    default:
      return ncclSuccess;   // host-pinned or managed: GPU-accessible, no range to check
  }
  void* base = nullptr;
  size_t size = 0;
  if (gpu::memGetAddressRange(ptr, &base, &size) != ncclSuccess) return ncclSuccess;
  uintptr_t b = reinterpret_cast<uintptr_t>(base);
  if (p + bytes > b + size || p + bytes < p) {
    WARN("%s: %s %p + %zu bytes runs past the end of its allocation (%p, %zu bytes): check count and datatype",
         fn, name, ptr, bytes, base, size);
    return ncclInvalidArgument;
  }
  comm->checkedBuffers.remember(b, b + size);
  return ncclSuccess;
}

}  // namespace uniccl
