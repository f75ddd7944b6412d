// The CUDA runtime under the vendor-neutral names that src/gpu_common is
// written in (gpuMalloc is cudaMalloc, gpuStream_t is cudaStream_t, ...);
// src/hip/vendor_alias.h maps the same names to HIP. Only the backend's
// translation units include it (the backend library puts this folder on the
// include path), so no vendor name reaches src/common.
//
// Macros rather than type aliases and wrapper functions: GPU_TRY quotes the
// failed call after expansion (gpu_common/runtime_check.h), so a WARN names
// the runtime's own function, e.g. "cudaMalloc(ptr, bytes) failed: ...".
#pragma once

#include <cuda_runtime.h>

// ------------------------------------------------------------------ errors
#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuErrorNotReady cudaErrorNotReady
#define gpuErrorPeerAccessAlreadyEnabled cudaErrorPeerAccessAlreadyEnabled
#define gpuErrorMemoryAllocation cudaErrorMemoryAllocation
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError

// ----------------------------------------------------------------- devices
#define gpuDeviceProp_t cudaDeviceProp
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDevice cudaGetDevice
#define gpuSetDevice cudaSetDevice
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuDeviceGetByPCIBusId cudaDeviceGetByPCIBusId
#define gpuDeviceGetPCIBusId cudaDeviceGetPCIBusId
#define gpuDeviceGetAttribute cudaDeviceGetAttribute
#define gpuDevAttrMultiProcessorCount cudaDevAttrMultiProcessorCount
#define gpuDeviceEnablePeerAccess cudaDeviceEnablePeerAccess

// ------------------------------------------------------- streams, capture
#define gpuStream_t cudaStream_t
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuStreamWaitEvent cudaStreamWaitEvent
#define gpuGraph_t cudaGraph_t
#define gpuStreamCaptureMode cudaStreamCaptureMode
#define gpuStreamCaptureModeRelaxed cudaStreamCaptureModeRelaxed
#define gpuThreadExchangeStreamCaptureMode cudaThreadExchangeStreamCaptureMode
#define gpuStreamCaptureStatus cudaStreamCaptureStatus
#define gpuStreamCaptureStatusNone cudaStreamCaptureStatusNone
#define gpuStreamCaptureStatusActive cudaStreamCaptureStatusActive
#define gpuStreamCaptureStatusInvalidated cudaStreamCaptureStatusInvalidated
// The capture's status, id and graph (nothing else asked).
#define gpuStreamGetCaptureInfo(stream, status, id, graph) cudaStreamGetCaptureInfo(stream, status, id, graph)

// ------------------------------------------------------------------ events
#define gpuEvent_t cudaEvent_t
#define gpuEventDefault cudaEventDefault
#define gpuEventDisableTiming cudaEventDisableTiming
#define gpuEventInterprocess cudaEventInterprocess
#define gpuEventBlockingSync cudaEventBlockingSync
#define gpuEventCreateWithFlags cudaEventCreateWithFlags
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventQuery cudaEventQuery
#define gpuEventSynchronize cudaEventSynchronize

// ------------------------------------------------------------------ memory
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuHostAlloc cudaHostAlloc
// Mapped into every device's address space, usable from every context.
#define gpuHostAllocMappedFlags (cudaHostAllocMapped | cudaHostAllocPortable)
#define gpuFreeHost cudaFreeHost
#define gpuHostGetDevicePointer cudaHostGetDevicePointer
#define gpuHostRegister cudaHostRegister
#define gpuHostRegisterMapped cudaHostRegisterMapped
#define gpuHostRegisterPortable cudaHostRegisterPortable
#define gpuHostUnregister cudaHostUnregister
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemcpyDefault cudaMemcpyDefault
#define gpuMemsetAsync cudaMemsetAsync

// ------------------------------------------------------------- IPC handles
#define gpuIpcMemHandle_t cudaIpcMemHandle_t
#define gpuIpcGetMemHandle cudaIpcGetMemHandle
#define gpuIpcOpenMemHandle cudaIpcOpenMemHandle
#define gpuIpcMemLazyEnablePeerAccess cudaIpcMemLazyEnablePeerAccess
#define gpuIpcCloseMemHandle cudaIpcCloseMemHandle

// ----------------------------------------------------------------- kernels
#define gpuFuncAttributes cudaFuncAttributes
#define gpuFuncGetAttributes cudaFuncGetAttributes
#define gpuDeviceGetLimit cudaDeviceGetLimit
#define gpuDeviceSetLimit cudaDeviceSetLimit
#define gpuLimitStackSize cudaLimitStackSize
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define UNICCL_GPU_HAS_STACK_LIMIT 1   // in every CUDA release uniccl builds with, as are user objects

// ------------------------------------------------------------------ graphs
#define gpuUserObject_t cudaUserObject_t
#define gpuUserObjectCreate cudaUserObjectCreate
#define gpuUserObjectNoDestructorSync cudaUserObjectNoDestructorSync
#define gpuUserObjectRelease cudaUserObjectRelease
#define gpuGraphRetainUserObject cudaGraphRetainUserObject
#define gpuGraphUserObjectMove cudaGraphUserObjectMove
#define UNICCL_GPU_HAS_USER_OBJECTS 1
