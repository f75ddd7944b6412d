// How uniccl exports the NCCL C API. Each API function is defined once as the
// public weak symbol `ncclX`; `pncclX` is a strong alias of it, as in NCCL, so
// profiling/interposition tools that wrap ncclX and call pncclX keep working.
//
//   NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count);
//   ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) { ... }
#pragma once

#include "uniccl.h"

#define NCCL_API(ret, func, ...)                                                   \
  extern "C" __attribute__((visibility("default"))) __attribute__((alias(#func))) \
  ret p##func(__VA_ARGS__);                                                        \
  extern "C" __attribute__((visibility("default"))) __attribute__((weak))         \
  ret func(__VA_ARGS__)
