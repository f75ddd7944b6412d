// Result-propagation macros used everywhere inside uniccl. An error is logged
// once where it is born (WARN at the origin); the macros here only pass it up.
#pragma once

#include "uniccl.h"

// Returns the error of `call` to the caller.
#define UCHECK(call)                              \
  do {                                            \
    ncclResult_t uniccl_res_ = (call);            \
    if (uniccl_res_ != ncclSuccess && uniccl_res_ != ncclInProgress) return uniccl_res_; \
  } while (0)

// Stores the error of `call` in `res` and jumps to `label` (cleanup paths).
#define UCHECK_GOTO(call, res, label)             \
  do {                                            \
    (res) = (call);                               \
    if ((res) != ncclSuccess && (res) != ncclInProgress) goto label; \
  } while (0)

// Checks a system call that returns -1/errno on failure.
#define USYSCHECK(call, name)                                        \
  do {                                                               \
    if ((call) == -1) {                                              \
      WARN("%s failed: %s", name, strerror(errno));                  \
      return ncclSystemError;                                        \
    }                                                                \
  } while (0)
