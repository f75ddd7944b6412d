// The first ROCm release (HIP_VERSION = major*1e7 + minor*1e5 + patch) whose
// headers ship each call the HIP backend uses beyond ROCm 5.2, the oldest it
// builds with. Where the headers are older the backend answers without the
// call (docs/amd.md, "ROCm versions"); tests/unit/hip compiles the newer
// branches against declarations of the newer releases.
#pragma once

#include <hip/hip_version.h>

#define UNICCL_HIP_HAS_USER_OBJECTS (HIP_VERSION >= 50300000)
// 5.2 leaves hipExtLaunchKernel out of a capture, and has no user objects.
#define UNICCL_HIP_HAS_CAPTURE (HIP_VERSION >= 50300000)
#define UNICCL_HIP_HAS_MEMORY_TYPE_FIELD (HIP_VERSION >= 60000000)  // hipPointerAttribute_t::type
#define UNICCL_HIP_HAS_WALL_CLOCK_RATE (HIP_VERSION >= 60000000)  // hipDeviceAttributeWallClockRate
#define UNICCL_HIP_HAS_STACK_LIMIT (HIP_VERSION >= 60000000)  // hipLimitStackSize (5.2's hipLimit_t lacks it)
// Virtual memory (hipMemCreate .. hipMemUnmap, fd export): declared since
// ROCm 5.2 as "beta", but 5.2 has no attribute saying whether a device
// supports it and the ROCm 5 runtimes answer "no" for every device (bug
// ROCm/hip#3151, 5.4.2); CLR implements the calls over ROCr's vmem API from 6.0.
#define UNICCL_HIP_HAS_VMM (HIP_VERSION >= 60000000)
// Uncached VMM memory (hipMemAllocationTypeUncached): declared and served
// by hipMemCreate from ROCm 7.2; the runtime loaded must be as new.
#define UNICCL_HIP_HAS_UNCACHED_VMM (HIP_VERSION >= 70200000)
#define UNICCL_HIP_UNCACHED_VMM_RUNTIME 70200000
