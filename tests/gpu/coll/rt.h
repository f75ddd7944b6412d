// The collective tests' GPU-runtime portability point: the tests touch the
// vendor runtime only through these few functions (device selection, plain
// device buffers, streams), so one source builds for CUDA and for HIP. The
// library itself is reached only through the public NCCL API.
#pragma once

#include <cstddef>
#include <cstdlib>

#if defined(UNICCL_GPU_BACKEND_HIP) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_runtime.h>
#define COLLTEST_RT(name) hip##name
using rtError = hipError_t;
using rtStream = hipStream_t;
using rtGraph = hipGraph_t;
using rtGraphExec = hipGraphExec_t;
#define COLLTEST_RT_SUCCESS hipSuccess
#define COLLTEST_RT_CAPTURE_GLOBAL hipStreamCaptureModeGlobal
#define COLLTEST_RT_H2D hipMemcpyHostToDevice
#define COLLTEST_RT_D2H hipMemcpyDeviceToHost
#define COLLTEST_RT_BACKEND "hip"
#define COLLTEST_RT_QUEUES_ENV "GPU_MAX_HW_QUEUES"
#else
#include <cuda_runtime.h>
#define COLLTEST_RT(name) cuda##name
using rtError = cudaError_t;
using rtStream = cudaStream_t;
using rtGraph = cudaGraph_t;
using rtGraphExec = cudaGraphExec_t;
#define COLLTEST_RT_SUCCESS cudaSuccess
#define COLLTEST_RT_CAPTURE_GLOBAL cudaStreamCaptureModeGlobal
#define COLLTEST_RT_H2D cudaMemcpyHostToDevice
#define COLLTEST_RT_D2H cudaMemcpyDeviceToHost
#define COLLTEST_RT_BACKEND "cuda"
#define COLLTEST_RT_QUEUES_ENV "CUDA_DEVICE_MAX_CONNECTIONS"
#endif

namespace colltest::rt {

// Several ranks on one GPU in one process each need a host-to-GPU work queue
// of their own (a kernel queued behind another rank's waiting kernel never
// starts). The runtime reads the count when it creates the context, so this
// must run before the first runtime call; a value already set wins.
inline void raiseWorkQueues() { setenv(COLLTEST_RT_QUEUES_ENV, "32", 0); }

// Every wrapper returns nullptr on success, else the runtime's error text.
inline const char* err(rtError e) {
  return e == COLLTEST_RT_SUCCESS ? nullptr : COLLTEST_RT(GetErrorString)(e);
}

// Number of visible GPUs; 0 when there is none or no working driver.
inline int deviceCount() {
  int n = 0;
  if (COLLTEST_RT(GetDeviceCount)(&n) != COLLTEST_RT_SUCCESS) {
    (void)COLLTEST_RT(GetLastError)();
    return 0;
  }
  return n;
}

inline const char* setDevice(int dev) { return err(COLLTEST_RT(SetDevice)(dev)); }
inline const char* malloc(void** p, size_t bytes) { return err(COLLTEST_RT(Malloc)(p, bytes)); }
inline const char* free(void* p) { return err(COLLTEST_RT(Free)(p)); }
inline const char* memset(void* p, int value, size_t bytes) { return err(COLLTEST_RT(Memset)(p, value, bytes)); }
inline const char* toDevice(void* dst, const void* src, size_t bytes) {
  return err(COLLTEST_RT(Memcpy)(dst, src, bytes, COLLTEST_RT_H2D));
}
inline const char* toHost(void* dst, const void* src, size_t bytes) {
  return err(COLLTEST_RT(Memcpy)(dst, src, bytes, COLLTEST_RT_D2H));
}
inline const char* streamCreate(rtStream* s) { return err(COLLTEST_RT(StreamCreate)(s)); }
inline const char* streamSync(rtStream s) { return err(COLLTEST_RT(StreamSynchronize)(s)); }
inline const char* streamDestroy(rtStream s) { return err(COLLTEST_RT(StreamDestroy)(s)); }
inline const char* deviceSync() { return err(COLLTEST_RT(DeviceSynchronize)()); }
// The WithFlags form has the same signature in both runtimes (ROCm 5.2's
// plain form takes an error node and a log buffer instead of flags).
inline const char* graphInstantiate(rtGraphExec* exec, rtGraph graph) {
  return err(COLLTEST_RT(GraphInstantiateWithFlags)(exec, graph, 0));
}
inline const char* memInfo(size_t* freeBytes, size_t* totalBytes) {
  return err(COLLTEST_RT(MemGetInfo)(freeBytes, totalBytes));
}

}  // namespace colltest::rt
