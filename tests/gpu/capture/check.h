// Checks shared by capture_test's parts: on failure print where and why,
// count it, and return false from the calling function.
#pragma once

#include <cstdio>

#include "nccl.h"

inline int gCaptureFails = 0;   // every failed check of the process

#define CHECK(cond, ...)                                    \
  do {                                                      \
    if (!(cond)) {                                          \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);  \
      fprintf(stderr, __VA_ARGS__);                         \
      fprintf(stderr, "\n");                                \
      gCaptureFails++;                                      \
      return false;                                         \
    }                                                       \
  } while (0)
#define RT(call) CHECK((call) == nullptr, "%s", #call)
#define NC(call)                                                                              \
  do {                                                                                        \
    ncclResult_t r_ = (call);                                                                 \
    CHECK(r_ == ncclSuccess, "%s -> %s (%s)", #call, ncclGetErrorString(r_), ncclGetLastError(nullptr)); \
  } while (0)
