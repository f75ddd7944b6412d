// The benchmarks' one portability point.
//
// The *_perf tools are built twice from the same sources: against uniccl and
// against the vendor library (NCCL or RCCL) for side-by-side comparison. They
// may therefore use nothing of uniccl's internals (not even uniccl::gpu); the
// few GPU runtime calls they need (buffers, streams, events, graphs, device
// names) are mapped here onto the CUDA or HIP runtime, so vendor names stay
// out of every other bench file, as the project's layout rule asks.
#pragma once

#if defined(UNICCL_BENCH_EMU)
// The *_perf_emu tools: uniccl on its CPU emulator (gpu_rt_emu.h).
#include "gpu_rt_emu.h"
#else
#if defined(UNICCL_GPU_BACKEND_HIP) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_runtime.h>
#define BENCH_RT(name) hip##name
#define BENCH_RT_NAME "HIP"
#define BENCH_RT_QUEUES_ENV "GPU_MAX_HW_QUEUES"  // host-to-GPU work queues, read at context creation
using benchDeviceProp_t = hipDeviceProp_t;
#else
#include <cuda_runtime.h>
#define BENCH_RT(name) cuda##name
#define BENCH_RT_NAME "CUDA"
#define BENCH_RT_QUEUES_ENV "CUDA_DEVICE_MAX_CONNECTIONS"  // host-to-GPU work queues, read at context creation
using benchDeviceProp_t = cudaDeviceProp;
#endif

using benchError_t = BENCH_RT(Error_t);
using benchStream_t = BENCH_RT(Stream_t);
using benchEvent_t = BENCH_RT(Event_t);
using benchGraph_t = BENCH_RT(Graph_t);
using benchGraphExec_t = BENCH_RT(GraphExec_t);

constexpr benchError_t benchSuccess = BENCH_RT(Success);
constexpr benchError_t benchErrorNotReady = BENCH_RT(ErrorNotReady);

inline const char* benchGetErrorString(benchError_t e) { return BENCH_RT(GetErrorString)(e); }
inline benchError_t benchGetDeviceCount(int* n) { return BENCH_RT(GetDeviceCount)(n); }
inline benchError_t benchSetDevice(int dev) { return BENCH_RT(SetDevice)(dev); }
inline benchError_t benchGetDeviceProperties(benchDeviceProp_t* p, int dev) {
  return BENCH_RT(GetDeviceProperties)(p, dev);
}
inline benchError_t benchDeviceGetPCIBusId(char* buf, int len, int dev) {
  return BENCH_RT(DeviceGetPCIBusId)(buf, len, dev);
}
inline benchError_t benchMalloc(void** p, size_t bytes) { return BENCH_RT(Malloc)(p, bytes); }
inline benchError_t benchFree(void* p) { return BENCH_RT(Free)(p); }
inline benchError_t benchMemset(void* p, int v, size_t bytes) { return BENCH_RT(Memset)(p, v, bytes); }
inline benchError_t benchMemcpyToDevice(void* dst, const void* src, size_t bytes) {
  return BENCH_RT(Memcpy)(dst, src, bytes, BENCH_RT(MemcpyHostToDevice));
}
inline benchError_t benchMemcpyToHost(void* dst, const void* src, size_t bytes) {
  return BENCH_RT(Memcpy)(dst, src, bytes, BENCH_RT(MemcpyDeviceToHost));
}
inline benchError_t benchDeviceSynchronize() { return BENCH_RT(DeviceSynchronize)(); }
inline benchError_t benchStreamCreate(benchStream_t* s) {
  return BENCH_RT(StreamCreateWithFlags)(s, BENCH_RT(StreamNonBlocking));
}
inline benchError_t benchStreamDestroy(benchStream_t s) { return BENCH_RT(StreamDestroy)(s); }
inline benchError_t benchStreamQuery(benchStream_t s) { return BENCH_RT(StreamQuery)(s); }
inline benchError_t benchStreamSynchronize(benchStream_t s) { return BENCH_RT(StreamSynchronize)(s); }
inline benchError_t benchEventCreate(benchEvent_t* e) { return BENCH_RT(EventCreate)(e); }
inline benchError_t benchEventDestroy(benchEvent_t e) { return BENCH_RT(EventDestroy)(e); }
inline benchError_t benchEventRecord(benchEvent_t e, benchStream_t s) { return BENCH_RT(EventRecord)(e, s); }
inline benchError_t benchEventElapsedTime(float* ms, benchEvent_t a, benchEvent_t b) {
  return BENCH_RT(EventElapsedTime)(ms, a, b);
}
// Thread-local capture: with -t several threads capture their own streams at once.
inline benchError_t benchStreamBeginCapture(benchStream_t s) {
  return BENCH_RT(StreamBeginCapture)(s, BENCH_RT(StreamCaptureModeThreadLocal));
}
inline benchError_t benchStreamEndCapture(benchStream_t s, benchGraph_t* g) {
  return BENCH_RT(StreamEndCapture)(s, g);
}
inline benchError_t benchGraphInstantiate(benchGraphExec_t* exec, benchGraph_t g) {
  return BENCH_RT(GraphInstantiateWithFlags)(exec, g, 0);
}
inline benchError_t benchGraphLaunch(benchGraphExec_t exec, benchStream_t s) {
  return BENCH_RT(GraphLaunch)(exec, s);
}
inline benchError_t benchGraphExecDestroy(benchGraphExec_t exec) { return BENCH_RT(GraphExecDestroy)(exec); }
inline benchError_t benchGraphDestroy(benchGraph_t g) { return BENCH_RT(GraphDestroy)(g); }
#endif  // UNICCL_BENCH_EMU
