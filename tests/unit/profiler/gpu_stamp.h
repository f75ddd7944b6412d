// A KernelCh stamp written as the kernel writes it (timer, then the counter
// with release), so the host-side pollers can be tested without a GPU.
#pragma once

#include <cstdint>

#include "common/profiler/kernel_ch.h"

inline void gpuStamp(uniccl::KernelChStamp* s, uint64_t counter, uint64_t timer) {
  __atomic_store_n(&s->timer, timer, __ATOMIC_RELAXED);
  __atomic_store_n(&s->counter, counter, __ATOMIC_RELEASE);
}
