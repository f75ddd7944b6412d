// The kernels live in device_lib (compiled by the GPU compiler), which host
// unit tests do not link. The fake GPU only logs launches: any distinct
// addresses serve as kernels.
#include "device/kernels.h"

#include "device/dev_types.h"
#include "fake_kernels.h"

namespace uniccl::dev {
namespace {
char gCollKernels[ncclNumTypes][3];   // [type][protocol]
char gSymKernels[ncclNumTypes];
char gP2pKernel;
}  // namespace
const void* collectiveKernel(ncclDataType_t type, int proto) {
  return (int)type >= 0 && (int)type < ncclNumTypes && proto >= 0 && proto < 3 ? &gCollKernels[type][proto] : nullptr;
}
const void* symmetricKernel(ncclDataType_t type) {
  return (int)type >= 0 && (int)type < ncclNumTypes ? &gSymKernels[type] : nullptr;
}
const void* p2pKernel() { return &gP2pKernel; }
unsigned fakeKernelOps = (1u << kNumRedOps) - 1;
unsigned collectiveKernelOps() { return fakeKernelOps; }
}  // namespace uniccl::dev
