// The benchmarks' runtime calls on uniccl's CPU emulator (docs/emulator.md),
// for the *_perf_emu tools that ci/bench.sh runs where no GPU is visible:
// the emulated devices, streams and events of tests/emu/emu_gpu.h, reached
// through uniccl's own runtime layer (common/gpu.h). Graph capture is not
// emulated (-G fails with a clear error). Included by gpu_rt.h only.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/gpu.h"
#include "uniccl.h"
#include "emu_gpu.h"
#include "emu_runtime.h"

#define BENCH_RT_NAME "CPU emulator (times are the emulator's, not a GPU's)"
#define BENCH_RT_QUEUES_ENV "UNICCL_BENCH_EMU_QUEUES"  // the emulator has no work-queue limit

struct benchDeviceProp_t {
  char name[256];
};
using benchError_t = ncclResult_t;
using benchStream_t = uniccl_stream_t;   // what the nccl* calls take
using benchEvent_t = uniccl::gpu::Event;
using benchGraph_t = void*;
using benchGraphExec_t = void*;

constexpr benchError_t benchSuccess = ncclSuccess;
constexpr benchError_t benchErrorNotReady = ncclInProgress;

inline const char* benchGetErrorString(benchError_t e) {
  return e == ncclSuccess ? "no error" : uniccl::emu::lastErrorString();
}
// The first runtime call of every tool: the emulated kernels need their runner.
inline benchError_t benchGetDeviceCount(int* n) {
  uniccl::emu::installCpuKernelRunner();
  return uniccl::gpu::getDeviceCount(n);
}
inline benchError_t benchSetDevice(int dev) { return uniccl::gpu::setDevice(dev); }
inline benchError_t benchGetDeviceProperties(benchDeviceProp_t* p, int dev) {
  uniccl::gpu::DeviceProps props;
  const ncclResult_t r = uniccl::gpu::getDeviceProps(dev, &props);
  if (r == ncclSuccess) {
    strncpy(p->name, props.name, sizeof p->name - 1);
    p->name[sizeof p->name - 1] = '\0';
  }
  return r;
}
inline benchError_t benchDeviceGetPCIBusId(char* buf, int len, int dev) {
  uniccl::gpu::DeviceProps props;
  const ncclResult_t r = uniccl::gpu::getDeviceProps(dev, &props);
  if (r == ncclSuccess && len > 0) {
    strncpy(buf, props.busId, (size_t)len - 1);
    buf[len - 1] = '\0';
  }
  return r;
}
inline benchError_t benchMalloc(void** p, size_t bytes) { return uniccl::gpu::deviceAlloc(p, bytes); }
inline benchError_t benchFree(void* p) { return uniccl::gpu::deviceFree(p); }
inline benchError_t benchMemset(void* p, int v, size_t bytes) { return uniccl::gpu::memset(p, v, bytes); }
inline benchError_t benchMemcpyToDevice(void* dst, const void* src, size_t bytes) {
  return uniccl::gpu::memcpy(dst, src, bytes);
}
inline benchError_t benchMemcpyToHost(void* dst, const void* src, size_t bytes) {
  return uniccl::gpu::memcpy(dst, src, bytes);
}
inline benchError_t benchDeviceSynchronize() { return uniccl::emu::deviceSynchronize(); }
inline benchError_t benchStreamCreate(benchStream_t* s) {
  uniccl::gpu::Stream created = nullptr;
  const ncclResult_t r = uniccl::gpu::streamCreate(&created);
  *s = static_cast<benchStream_t>(created);
  return r;
}
inline benchError_t benchStreamDestroy(benchStream_t s) { return uniccl::gpu::streamDestroy(s); }
// Whether the stream's work is done: an event recorded now (on the
// stream's device) is ready then.
inline benchError_t benchStreamQuery(benchStream_t s) {
  int dev = 0, current = 0;
  ncclResult_t r = uniccl::emu::streamGetDevice(s, &dev);
  if (r == ncclSuccess) r = uniccl::gpu::getDevice(&current);
  if (r == ncclSuccess) r = uniccl::gpu::setDevice(dev);
  if (r != ncclSuccess) return r;
  uniccl::gpu::Event e = nullptr;
  r = uniccl::gpu::eventCreate(&e);
  if (r == ncclSuccess) {
    r = uniccl::gpu::eventRecord(e, s);
    if (r == ncclSuccess) r = uniccl::gpu::eventQuery(e);
    const ncclResult_t d = uniccl::gpu::eventDestroy(e);
    if (r == ncclSuccess || r == ncclInProgress) r = d != ncclSuccess ? d : r;
  }
  const ncclResult_t back = uniccl::gpu::setDevice(current);
  return r != ncclSuccess ? r : back;
}
inline benchError_t benchStreamSynchronize(benchStream_t s) { return uniccl::gpu::streamSynchronize(s); }
inline benchError_t benchEventCreate(benchEvent_t* e) {
  return uniccl::gpu::eventCreate(e, uniccl::gpu::kEventDefault);
}
inline benchError_t benchEventDestroy(benchEvent_t e) { return uniccl::gpu::eventDestroy(e); }
inline benchError_t benchEventRecord(benchEvent_t e, benchStream_t s) { return uniccl::gpu::eventRecord(e, s); }
inline benchError_t benchEventElapsedTime(float* ms, benchEvent_t a, benchEvent_t b) {
  return uniccl::emu::eventElapsedMs(a, b, ms);
}
// Graph capture is not emulated.
inline benchError_t benchGraphUnsupported() {
  fprintf(stderr, "the CPU emulator has no graph capture: run without -G\n");
  return ncclInvalidUsage;
}
inline benchError_t benchStreamBeginCapture(benchStream_t) { return benchGraphUnsupported(); }
inline benchError_t benchStreamEndCapture(benchStream_t, benchGraph_t*) { return benchGraphUnsupported(); }
inline benchError_t benchGraphInstantiate(benchGraphExec_t*, benchGraph_t) { return benchGraphUnsupported(); }
inline benchError_t benchGraphLaunch(benchGraphExec_t, benchStream_t) { return benchGraphUnsupported(); }
inline benchError_t benchGraphExecDestroy(benchGraphExec_t) { return ncclSuccess; }
inline benchError_t benchGraphDestroy(benchGraph_t) { return ncclSuccess; }
