// GIN (GPU-initiated networking) through the proxy thread: the host side of
// include/nccl_device/gin.h. One GinState per device communicator that asked
// for GIN: per context a block of host-mapped memory in NCCL 2.28.9's proxy
// GIN layout (ncclGinProxyGpuCtx_t, descriptor queues per peer, producer and
// consumer indices, counters, signals), a NetLink (one channel) to every
// other rank, and a poller on the process's proxy thread that drains the
// queues onto the links and applies what arrives. docs/device_api.md, "GIN".
#pragma once

#include <cstdint>

#include "nccl_device.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

class GinState;

struct GinConfig {
  int contexts = 1;        // 1..NCCL_GIN_MAX_CONTEXTS
  int signals = 0;         // per context
  int counters = 0;        // per context
};

// Collective over comm (every rank calls it with the same config). Fills the
// GIN fields of *devComm. ncclInvalidUsage with the reason where GIN cannot
// be set up (no network).
[[nodiscard]] ncclResult_t ginCreate(ncclComm* comm, const GinConfig& cfg, ncclDevComm_t* devComm, GinState** out);
// Ends the proxy's work on it, closes the links, frees the memory (after an
// abort the context memory a kernel may still poll is left allocated).
void ginDestroy(GinState* gin);

}  // namespace uniccl
