// What gpu_runtime.cc, compiled into each backend, asks of that backend:
// the answers that differ by vendor inside functions that are otherwise
// the same for CUDA and HIP. Defined in src/cuda/gpu_cuda.cc and
// src/hip/gpu_hip.cc.
#pragma once

#include "common/gpu.h"
#include "common/util/knobs.h"
#include "vendor_alias.h"

namespace uniccl::gpu::backend {

// The DeviceProps fields whose source differs by vendor: the rate of
// device/port.h's globalTimer() (timerRateKHz) and whether a warp's
// 128-byte store reaches a peer whole (lineStoreAtomic128).
ncclResult_t vendorDeviceProps(int dev, const gpuDeviceProp_t& p, DeviceProps* out);

// The runtime's knob for the number of host-to-device work queues
// (gpu.h's WorkQueues: its integer default is the runtime's).
const KnobSpec& workQueuesKnob();

}  // namespace uniccl::gpu::backend
