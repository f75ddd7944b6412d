// How the backends turn a failed runtime call into an ncclResult_t (gpu.h's
// contract): logged once where it happened (WARN), the runtime's
// non-sticky error cleared so the next unrelated check does not report it
// again. Written once over the vendor names (vendor_alias.h: the backend's
// folder is on its include path).
#pragma once

#include "common/check.h"
#include "common/util/debug.h"
#include "uniccl.h"
#include "vendor_alias.h"

namespace uniccl::gpu::backend {

inline ncclResult_t fail(const char* call, gpuError_t err, ncclResult_t res = ncclUnhandledCudaError) {
  WARN("%s failed: %s", call, gpuGetErrorString(err));
  (void)gpuGetLastError();
  return res;
}

// Host allocations that fail for lack of memory are a system error, not a GPU one.
inline ncclResult_t failAlloc(const char* call, gpuError_t err) {
  return fail(call, err, err == gpuErrorMemoryAllocation ? ncclSystemError : ncclUnhandledCudaError);
}

}  // namespace uniccl::gpu::backend

// The vendor's name of an aliased call, for messages: GPU_CALL_NAME(gpuMalloc)
// is the runtime's own spelling of gpuMalloc (vendor_alias.h).
#define GPU_CALL_NAME(call) UNICCL_GPU_QUOTE_(call)
#define UNICCL_GPU_QUOTE_(text) #text

// Returns from the calling function when the call fails. The call is quoted
// after its aliases expanded, so the message names the vendor's function.
#define GPU_TRY(call) UNICCL_GPU_TRY_(call)
#define UNICCL_GPU_TRY_(call)                                                                     \
  do {                                                                                            \
    gpuError_t uniccl_err_ = (call);                                                              \
    if (uniccl_err_ != gpuSuccess) return ::uniccl::gpu::backend::fail(#call, uniccl_err_);       \
  } while (0)
