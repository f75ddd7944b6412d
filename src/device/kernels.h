// Host-side entry to the compiled kernels. Collective kernels are
// instantiated per datatype and protocol, symmetric ones per datatype
// (src/device/meson.build generates one source per kernel from the
// kernel_types list, which -Dkernel_filter can shorten for fast CI builds).
#pragma once

#include "uniccl.h"

namespace uniccl::dev {

// The __global__ function (taking one KernelArgs by value) that runs the
// ring and tree collective items of datatype `type` and protocol `proto`
// (dev::Proto), and every p2p item; nullptr where this build has no such
// kernel (a datatype filtered out; LL128 on targets whose host never
// selects it).
const void* collectiveKernel(ncclDataType_t type, int proto);

// The kernel for the symmetric collectives (kAlgoSymmetric items, nothing
// else) of datatype `type`, or nullptr where the build filtered it out.
const void* symmetricKernel(ncclDataType_t type);

// Kernel for batches made only of p2p items (datatype-free).
const void* p2pKernel();

// The reduction ops (bit op: dev::RedOp op) the collective and symmetric
// kernels carry code for: all of them unless the build left some out
// (-Dkernel_ops). Reducing collectives with another op are refused.
unsigned collectiveKernelOps();

}  // namespace uniccl::dev
