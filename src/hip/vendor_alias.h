// HIP under the vendor-neutral names that src/gpu_common is written in
// (gpuMalloc is hipMalloc, gpuStream_t is hipStream_t, ...), as
// src/cuda/vendor_alias.h maps them to CUDA. Only the backend's translation
// units include it (the backend library puts this folder on the include
// path), so no vendor name reaches src/common.
//
// Macros rather than type aliases and wrapper functions: GPU_TRY quotes the
// failed call after expansion (gpu_common/runtime_check.h), so a WARN names
// the runtime's own function, e.g. "hipMalloc(ptr, bytes) failed: ...".
#pragma once

#include <hip/hip_runtime.h>

#include "hip/rocm_features.h"

// ------------------------------------------------------------------ errors
#define gpuError_t hipError_t
#define gpuSuccess hipSuccess
#define gpuErrorNotReady hipErrorNotReady
#define gpuErrorPeerAccessAlreadyEnabled hipErrorPeerAccessAlreadyEnabled
#define gpuErrorMemoryAllocation hipErrorOutOfMemory
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError

// ----------------------------------------------------------------- devices
#define gpuDeviceProp_t hipDeviceProp_t
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDevice hipGetDevice
#define gpuSetDevice hipSetDevice
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuDeviceGetByPCIBusId hipDeviceGetByPCIBusId
#define gpuDeviceGetPCIBusId hipDeviceGetPCIBusId
#define gpuDeviceGetAttribute hipDeviceGetAttribute
#define gpuDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define gpuDeviceEnablePeerAccess hipDeviceEnablePeerAccess

// ------------------------------------------------------- streams, capture
#define gpuStream_t hipStream_t
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuStreamWaitEvent hipStreamWaitEvent
#define gpuGraph_t hipGraph_t
#define gpuStreamCaptureMode hipStreamCaptureMode
#define gpuStreamCaptureModeRelaxed hipStreamCaptureModeRelaxed
#define gpuThreadExchangeStreamCaptureMode hipThreadExchangeStreamCaptureMode
#define gpuStreamCaptureStatus hipStreamCaptureStatus
#define gpuStreamCaptureStatusNone hipStreamCaptureStatusNone
#define gpuStreamCaptureStatusActive hipStreamCaptureStatusActive
#define gpuStreamCaptureStatusInvalidated hipStreamCaptureStatusInvalidated
// The capture's status, id and graph (nothing else asked).
#define gpuStreamGetCaptureInfo(stream, status, id, graph) \
  hipStreamGetCaptureInfo_v2(stream, status, id, graph, nullptr, nullptr)

// ------------------------------------------------------------------ events
#define gpuEvent_t hipEvent_t
#define gpuEventDefault hipEventDefault
#define gpuEventDisableTiming hipEventDisableTiming
#define gpuEventInterprocess hipEventInterprocess
#define gpuEventBlockingSync hipEventBlockingSync
#define gpuEventCreateWithFlags hipEventCreateWithFlags
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventQuery hipEventQuery
#define gpuEventSynchronize hipEventSynchronize

// ------------------------------------------------------------------ memory
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuHostAlloc hipHostMalloc
// Mapped into every device's address space, usable from every context, and
// coherent (fine-grained) whatever HIP_HOST_COHERENT says: the host and the
// kernels poll this memory while kernels run.
#define gpuHostAllocMappedFlags (hipHostMallocMapped | hipHostMallocPortable | hipHostMallocCoherent)
#define gpuFreeHost hipHostFree
#define gpuHostGetDevicePointer hipHostGetDevicePointer
#define gpuHostRegister hipHostRegister
#define gpuHostRegisterMapped hipHostRegisterMapped
#define gpuHostRegisterPortable hipHostRegisterPortable
#define gpuHostUnregister hipHostUnregister
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemcpyDefault hipMemcpyDefault
#define gpuMemsetAsync hipMemsetAsync

// ------------------------------------------------------------- IPC handles
#define gpuIpcMemHandle_t hipIpcMemHandle_t
#define gpuIpcGetMemHandle hipIpcGetMemHandle
#define gpuIpcOpenMemHandle hipIpcOpenMemHandle
#define gpuIpcMemLazyEnablePeerAccess hipIpcMemLazyEnablePeerAccess
#define gpuIpcCloseMemHandle hipIpcCloseMemHandle

// ----------------------------------------------------------------- kernels
#define gpuFuncAttributes hipFuncAttributes
#define gpuFuncGetAttributes hipFuncGetAttributes
#define gpuDeviceGetLimit hipDeviceGetLimit
#define gpuDeviceSetLimit hipDeviceSetLimit
#define gpuLimitStackSize hipLimitStackSize
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define UNICCL_GPU_HAS_STACK_LIMIT UNICCL_HIP_HAS_STACK_LIMIT

// ------------------------------------------------------------------ graphs
#define gpuUserObject_t hipUserObject_t
#define gpuUserObjectCreate hipUserObjectCreate
#define gpuUserObjectNoDestructorSync hipUserObjectNoDestructorSync
#define gpuUserObjectRelease hipUserObjectRelease
#define gpuGraphRetainUserObject hipGraphRetainUserObject
#define gpuGraphUserObjectMove hipGraphUserObjectMove
#define UNICCL_GPU_HAS_USER_OBJECTS UNICCL_HIP_HAS_USER_OBJECTS
