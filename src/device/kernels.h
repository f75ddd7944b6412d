// Host-side entry to the compiled kernels. Kernels are instantiated per
// datatype (src/device/meson.build generates one source per type from the
// kernel_types list, which -Dkernel_filter can shorten for fast CI builds).
#pragma once

#include "uniccl.h"

namespace uniccl::dev {

// The __global__ function (taking one KernelArgs by value) that runs any
// work item whose collective datatype is `type` (and every p2p item), or
// nullptr when this build filtered that datatype out.
const void* collectiveKernel(ncclDataType_t type);

// The kernel for the symmetric collectives (kAlgoSymmetric items, nothing
// else) of datatype `type`, or nullptr where the build filtered it out.
const void* symmetricKernel(ncclDataType_t type);

// Kernel for batches made only of p2p items (datatype-free).
const void* p2pKernel();

}  // namespace uniccl::dev
