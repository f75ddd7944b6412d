// NCCL's entry points for re-reading the logging configuration. Programs and
// test harnesses (NCCL's own, PyTorch's libtorch_cuda links the symbol) set
// NCCL_DEBUG* in the environment, then call one of these so that logging
// follows the new values.
#include "common/api_export.h"
#include "common/util/debug.h"

// Deprecated in NCCL, still exported (ncclX weak, pncclX strong).
NCCL_API(void, ncclResetDebugInit);
void ncclResetDebugInit() { uniccl::reloadLoggingConfig(); }

// NCCL exports this one as a plain strong symbol with no pncclX twin, and
// declares it in no public header.
extern "C" __attribute__((visibility("default"))) void ncclResetDebugInitInternal();
void ncclResetDebugInitInternal() { uniccl::reloadLoggingConfig(); }
