/*
 * <nccl_device.h> for programs written against NCCL 2.28's Device API.
 * uniccl's own header: the host-visible part only (types with NCCL 2.28.9's
 * layouts, host functions, team arithmetic). Which parts work is listed in
 * include/nccl_device/core.h and in README's status table.
 */
#ifndef UNICCL_NCCL_DEVICE_H
#define UNICCL_NCCL_DEVICE_H
#include "nccl_device/core.h"
#include "nccl_device/comm.h"
#include "nccl_device/gin_barrier.h"
#include "nccl_device/ll_a2a.h"
#include "nccl_device/lsa_barrier.h"
#endif
