/*
 * uniccl's Device API: the annotation macros its headers use. Host compilers
 * (g++, clang) see plain inline functions; nvcc and hipcc see __host__
 * __device__ ones, so the same team arithmetic works in kernels and on the host.
 * No vendor header is needed for this.
 *
 * Device-side functions (pointers, cooperative groups, sessions) exist where
 * UNICCL_DEVICE_API is 1: C++ compiled by nvcc (or clang in CUDA mode), by
 * hipcc (clang in HIP mode), or for uniccl's CPU emulator (a host compiler
 * with -DUNICCL_DEV_CPU, where kernels are host functions run by one OS
 * thread per GPU thread: docs/emulator.md). Plain host translation units see
 * the host-visible types only.
 */
#ifndef UNICCL_NCCL_DEVICE_UTILITY_H
#define UNICCL_NCCL_DEVICE_UTILITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define UNICCL_DEVICE_API_CUDA 1
#elif defined(__HIP__) || defined(__HIPCC__)
#define UNICCL_DEVICE_API_HIP 1
#elif defined(UNICCL_DEV_CPU)
#define UNICCL_DEVICE_API_EMU 1
#endif

#if defined(__cplusplus) && \
    (defined(UNICCL_DEVICE_API_CUDA) || defined(UNICCL_DEVICE_API_HIP) || defined(UNICCL_DEVICE_API_EMU))
#define UNICCL_DEVICE_API 1
#else
#define UNICCL_DEVICE_API 0
#endif

#if defined(__CUDACC__) || defined(__HIP__)
#define NCCL_HOST_DEVICE_INLINE __host__ __device__ inline
#define NCCL_DEVICE_INLINE __device__ __forceinline__
#else
#ifndef __host__
#define __host__ /* NCCL's headers mark host-only API functions with it */
#endif
#ifdef __cplusplus
#define NCCL_HOST_DEVICE_INLINE inline
#else
#define NCCL_HOST_DEVICE_INLINE static inline /* C99: no external definition needed */
#endif
/* The emulator's device functions are host functions. */
#define NCCL_DEVICE_INLINE inline
#endif

#ifdef __cplusplus
#define NCCL_EXTERN_C extern "C"
#else
#define NCCL_EXTERN_C
#endif

#endif /* UNICCL_NCCL_DEVICE_UTILITY_H */
