// device_api_gpu_test --ll's kernel launcher (ll_kernel.cu).
#pragma once

#include "../coll/rt.h"
#include "nccl_device.h"

// Slots per block that kLLCount 12-byte values from each of nRanks ranks take.
constexpr int kLLCount = 8;
int llSlots(int nRanks);

// nullptr on success, the runtime's message otherwise.
const char* launchLLExchange(const ncclDevComm& comm, ncclLLA2AHandle handle, int blocks, int rounds,
                             unsigned long long* errors, rtStream stream);
