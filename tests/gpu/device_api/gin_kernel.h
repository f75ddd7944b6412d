// device_api_gpu_test --gin's kernel launcher (gin_kernel.cu).
#pragma once

#include <cstddef>

#include "../coll/rt.h"
#include "nccl_device.h"

// nullptr on success, the runtime's message otherwise. The window holds
// bytes * (1 + 2 * nRanks) bytes.
const char* launchGinExchange(const ncclDevComm& comm, ncclWindow_t win, size_t bytes, int rounds,
                              unsigned long long* errors, rtStream stream);
