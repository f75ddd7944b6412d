// device_api_gpu_test's kernel launcher (lsa_kernel.cu).
#pragma once

#include "../coll/rt.h"
#include "nccl_device.h"

// nullptr on success, the runtime's message otherwise.
const char* launchLsaExchange(const ncclDevComm& comm, ncclWindow_t win, int blocks, int threads, int rounds,
                              unsigned long long* errors, rtStream stream);
