// COMPILE CHECK ONLY: never used to build anything that runs.
//
// CI's hipcc is Debian's ROCm 5.2, so the branches of the HIP backend
// (src/hip/gpu_hip.cc, and src/gpu_common/gpu_runtime.cc over
// src/hip/vendor_alias.h) that need a newer ROCm (HIP_VERSION >= 5.3: graph
// user objects; >= 6.0: virtual memory, hipPointerAttribute_t::type, the
// wall-clock rate, the stack limit; >= 7.2: uncached virtual memory) are
// never compiled there. tests/unit/hip/meson.build compiles both files with
// this header forced in first (-include) and UNICCL_TEST_HIP_VERSION set:
// the installed headers, then HIP_VERSION raised to that version, then what
// ROCm added after 5.2 that they use, declared as ROCm 6.x / 7.x document
// them (same names, types and values; hip_runtime_api.h of those releases). A
// mistyped call, a wrong argument or a name missing here in a newer
// branch fails the check. What it cannot catch: the newer runtimes'
// behaviour (docs/amd.md, "ROCm versions").
#pragma once

#if !defined(UNICCL_TEST_HIP_VERSION)
#error "rocm_newer_api.h: set UNICCL_TEST_HIP_VERSION (the ROCm release to pretend, as HIP_VERSION)"
#endif

// ROCm 6.0 renamed hipPointerAttribute_t's memoryType to type and
// renumbered hipMemoryType (CUDA's values, with hipMemoryTypeManaged): the
// 5.x struct, enum and query are read under other names, the 6.x ones are
// declared below.
#define hipPointerAttribute_t uniccl_rocm5_hipPointerAttribute_t
#define hipPointerGetAttributes uniccl_rocm5_hipPointerGetAttributes
#define hipMemoryType uniccl_rocm5_hipMemoryType
#define hipMemoryTypeHost uniccl_rocm5_hipMemoryTypeHost
#define hipMemoryTypeDevice uniccl_rocm5_hipMemoryTypeDevice
#define hipMemoryTypeArray uniccl_rocm5_hipMemoryTypeArray
#define hipMemoryTypeUnified uniccl_rocm5_hipMemoryTypeUnified
#include <hip/hip_ext.h>
#include <hip/hip_runtime.h>
#include <hip/hip_version.h>
#undef hipPointerAttribute_t
#undef hipPointerGetAttributes
#undef hipMemoryType
#undef hipMemoryTypeHost
#undef hipMemoryTypeDevice
#undef hipMemoryTypeArray
#undef hipMemoryTypeUnified

#if HIP_VERSION >= UNICCL_TEST_HIP_VERSION
#error "rocm_newer_api.h: the installed HIP is as new as the version asked for: compile the HIP backend as it is"
#endif
#undef HIP_VERSION
#undef HIP_VERSION_MAJOR
#undef HIP_VERSION_MINOR
#undef HIP_VERSION_PATCH
#define HIP_VERSION_MAJOR (UNICCL_TEST_HIP_VERSION / 10000000)
#define HIP_VERSION_MINOR (UNICCL_TEST_HIP_VERSION / 100000 % 100)
#define HIP_VERSION_PATCH (UNICCL_TEST_HIP_VERSION % 100000)
#define HIP_VERSION UNICCL_TEST_HIP_VERSION

// ROCm 5.3: graph user objects.
typedef struct hipUserObject* hipUserObject_t;
typedef enum hipUserObjectFlags {
  hipUserObjectNoDestructorSync = 0x1,
} hipUserObjectFlags;
typedef enum hipUserObjectRetainFlags {
  hipGraphUserObjectMove = 0x1,
} hipUserObjectRetainFlags;
extern "C" {
hipError_t hipUserObjectCreate(hipUserObject_t* object_out, void* ptr, hipHostFn_t destroy,
                               unsigned int initialRefcount, unsigned int flags);
hipError_t hipUserObjectRelease(hipUserObject_t object, unsigned int count = 1);
hipError_t hipGraphRetainUserObject(hipGraph_t graph, hipUserObject_t object, unsigned int count = 1,
                                    unsigned int flags = 0);
}

// ROCm 5.7: uncached device memory (a flag of hipExtMallocWithFlags).
#define hipDeviceMallocUncached 0x3

// ROCm 6.0: pointer attributes with `type`, the device attributes and the
// stack limit 5.2's enums lack (their values in the 6.x enums).
typedef enum hipMemoryType {
  hipMemoryTypeUnregistered = 0,
  hipMemoryTypeHost = 1,
  hipMemoryTypeDevice = 2,
  hipMemoryTypeManaged = 3,
  hipMemoryTypeArray = 10,
  hipMemoryTypeUnified = 11
} hipMemoryType;
typedef struct hipPointerAttribute_t {
  enum hipMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
  int isManaged;
  unsigned allocationFlags;
} hipPointerAttribute_t;
extern "C" hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attributes, const void* ptr);
constexpr hipDeviceAttribute_t hipDeviceAttributeVirtualMemoryManagementSupported = (hipDeviceAttribute_t)89;
constexpr hipDeviceAttribute_t hipDeviceAttributeWallClockRate = (hipDeviceAttribute_t)10017;
constexpr hipLimit_t hipLimitStackSize = (hipLimit_t)0x0;
extern "C" hipError_t hipDeviceSetLimit(enum hipLimit_t limit, size_t value);

// ROCm 7.2: uncached virtual memory.
#if UNICCL_TEST_HIP_VERSION >= 70200000
constexpr hipMemAllocationType hipMemAllocationTypeUncached = (hipMemAllocationType)0x40000000;
#endif
