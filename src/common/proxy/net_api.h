// The network plugin table the proxy drives: NCCL's net plugin ABI v8
// (ncclNet_v8_t, include/uniccl_net.h); the same type as src/net's NetApi.
#pragma once

#include "uniccl_net.h"

namespace uniccl {
using ProxyNet = ncclNet_v8_t;
}  // namespace uniccl
