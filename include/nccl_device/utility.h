/*
 * uniccl's Device API: the annotation macros its headers use. Host compilers
 * (g++, clang) see plain inline functions; nvcc and hipcc see __host__
 * __device__ ones, so the same team arithmetic works in kernels and on the host.
 * No vendor header is needed for this.
 */
#ifndef UNICCL_NCCL_DEVICE_UTILITY_H
#define UNICCL_NCCL_DEVICE_UTILITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIP__)
#define NCCL_HOST_DEVICE_INLINE __host__ __device__ inline
#else
#ifndef __host__
#define __host__ /* NCCL's headers mark host-only API functions with it */
#endif
#ifdef __cplusplus
#define NCCL_HOST_DEVICE_INLINE inline
#else
#define NCCL_HOST_DEVICE_INLINE static inline /* C99: no external definition needed */
#endif
#endif

#ifdef __cplusplus
#define NCCL_EXTERN_C extern "C"
#else
#define NCCL_EXTERN_C
#endif

#endif /* UNICCL_NCCL_DEVICE_UTILITY_H */
