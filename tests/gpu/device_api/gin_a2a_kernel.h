// gin_a2a_bench's kernel launcher (gin_a2a_kernel.cu).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../coll/rt.h"
#include "nccl_device.h"

// The window holds the send blocks [0, n*block) and the receive blocks
// [n*block, 2*n*block). Signal 0 has counted `signalBase` puts before this
// launch. nullptr on success, the runtime's message otherwise.
const char* launchGinAllToAll(const ncclDevComm& comm, ncclWindow_t win, size_t block, int iters, uint64_t signalBase,
                              rtStream stream);
