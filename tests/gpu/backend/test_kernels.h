// Kernels and stream-capture helpers for the backend GPU tests. The kernels
// are single-source (test_kernels.cu, compiled by nvcc or as HIP); the
// capture helpers wrap the few runtime calls that src/common/gpu.h has no
// reason to offer (begin/end capture, instantiate, replay), for tests only.
#pragma once

#include <cstdint>

#include "common/gpu.h"

namespace uniccl::gputest {

// spin(volatile int* flag, volatile int* result, int value, long long maxSpins):
// one thread waits until *flag != 0 (or maxSpins polls), then writes value
// (or -1 when it gave up) to *result.
const void* spinKernel();
// checksum(const char* base, uint32_t mask, uint32_t offset, uint32_t bytes,
//          volatile unsigned long long* out): sums the 32-bit words of the
// work at `offset` in the ring (positions masked), weighted by index.
const void* checksumKernel();
// increment(volatile int* counter): ++*counter by one thread.
const void* incrementKernel();

// Host reference of checksumKernel over the same bytes (already unmasked).
inline unsigned long long checksumHost(const uint32_t* words, uint32_t n) {
  unsigned long long s = 0;
  for (uint32_t i = 0; i < n; ++i) s += (unsigned long long)words[i] * (i + 1);
  return s;
}

ncclResult_t beginCapture(gpu::Stream s);           // global capture mode
ncclResult_t endCapture(gpu::Stream s, gpu::Graph* g);
// Instantiates g, launches it `times` on s, waits, destroys the executable.
ncclResult_t replay(gpu::Graph g, gpu::Stream s, int times);
ncclResult_t destroyGraph(gpu::Graph g);

}  // namespace uniccl::gputest
