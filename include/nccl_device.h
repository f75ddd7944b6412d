/*
 * <nccl_device.h> for programs written against NCCL 2.28's Device API.
 * uniccl's own header: the host-visible part (types with NCCL 2.28.9's
 * layouts, host functions, team arithmetic) everywhere, and in device code
 * (nvcc, hipcc, uniccl's CPU emulator) the device-side functions: window
 * pointers, ncclSymPtr, cooperative groups, LSA barriers, the LL all-to-all.
 * What exists and what does not: docs/device_api.md.
 */
#ifndef UNICCL_NCCL_DEVICE_H
#define UNICCL_NCCL_DEVICE_H
#include "nccl_device/core.h"
#include "nccl_device/comm.h"
#include "nccl_device/coop.h"
#include "nccl_device/ptr.h"
#include "nccl_device/gin.h"
#include "nccl_device/gin_barrier.h"
#include "nccl_device/ll_a2a.h"
#include "nccl_device/lsa_barrier.h"
#include "nccl_device/barrier.h"
#endif
