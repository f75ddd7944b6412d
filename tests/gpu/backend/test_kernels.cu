// Test kernels in the vendor-neutral subset of the kernel language
// (__global__, threadIdx/blockIdx, volatile, __threadfence_system), so one
// source builds with nvcc and as HIP. src/device/port.h did not exist yet
// when these were written; they use no atomics, so they do not need it.
#if defined(UNICCL_GPU_BACKEND_HIP)
#include <hip/hip_runtime.h>
#define TEST_RT(name) hip##name
#define TEST_RT_T(name) hip##name
typedef hipError_t testError_t;
#else
#include <cuda_runtime.h>
#define TEST_RT(name) cuda##name
#define TEST_RT_T(name) cuda##name
typedef cudaError_t testError_t;
#endif

#include <cstdio>

#include "test_kernels.h"

namespace uniccl::gputest {

__global__ void spin(volatile int* flag, volatile int* result, int value, long long maxSpins) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  long long n = 0;
  while (*flag == 0 && n < maxSpins) ++n;
  *result = *flag != 0 ? value : -1;
  __threadfence_system();
}

__global__ void checksum(const char* base, uint32_t mask, uint32_t offset, uint32_t bytes,
                         volatile unsigned long long* out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  unsigned long long s = 0;
  for (uint32_t i = 0; i < bytes / 4; ++i) {
    const volatile uint32_t* w = (const volatile uint32_t*)(base + ((offset + 4 * i) & mask));
    s += (unsigned long long)(*w) * (i + 1);
  }
  *out = s;
  __threadfence_system();
}

__global__ void increment(volatile int* counter) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  *counter = *counter + 1;
  __threadfence_system();
}

const void* spinKernel() { return (const void*)&spin; }
const void* checksumKernel() { return (const void*)&checksum; }
const void* incrementKernel() { return (const void*)&increment; }

static ncclResult_t check(testError_t err, const char* what) {
  if (err == TEST_RT(Success)) return ncclSuccess;
  std::fprintf(stderr, "%s failed: %s\n", what, TEST_RT(GetErrorString)(err));
  (void)TEST_RT(GetLastError)();
  return ncclUnhandledCudaError;
}

ncclResult_t beginCapture(gpu::Stream s) {
  return check(TEST_RT(StreamBeginCapture)((TEST_RT_T(Stream_t))s, TEST_RT(StreamCaptureModeGlobal)),
               "StreamBeginCapture");
}
ncclResult_t endCapture(gpu::Stream s, gpu::Graph* g) {
  TEST_RT_T(Graph_t) graph = nullptr;
  ncclResult_t r = check(TEST_RT(StreamEndCapture)((TEST_RT_T(Stream_t))s, &graph), "StreamEndCapture");
  *g = graph;
  return r;
}
ncclResult_t replay(gpu::Graph g, gpu::Stream s, int times) {
  TEST_RT_T(GraphExec_t) exec = nullptr;
  ncclResult_t r = check(TEST_RT(GraphInstantiateWithFlags)(&exec, (TEST_RT_T(Graph_t))g, 0), "GraphInstantiateWithFlags");
  if (r != ncclSuccess) return r;
  for (int i = 0; i < times && r == ncclSuccess; ++i)
    r = check(TEST_RT(GraphLaunch)(exec, (TEST_RT_T(Stream_t))s), "GraphLaunch");
  if (r == ncclSuccess) r = check(TEST_RT(StreamSynchronize)((TEST_RT_T(Stream_t))s), "StreamSynchronize");
  ncclResult_t d = check(TEST_RT(GraphExecDestroy)(exec), "GraphExecDestroy");
  return r != ncclSuccess ? r : d;
}
ncclResult_t destroyGraph(gpu::Graph g) {
  return check(TEST_RT(GraphDestroy)((TEST_RT_T(Graph_t))g), "GraphDestroy");
}

}  // namespace uniccl::gputest
