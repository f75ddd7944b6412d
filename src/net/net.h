// The network transport interface inside uniccl: one C table, NCCL's net
// plugin ABI v8 (include/uniccl_net.h), whether the transport is built in
// (Socket, IB) or loaded from an external plugin.
#pragma once

#include <cstdint>

#include "uniccl_net.h"

namespace uniccl {

using NetApi = ncclNet_v8_t;
using NetProperties = ncclNetProperties_v8_t;

// The network this process uses, chosen once (thread-safe) under NCCL_NET and
// NCCL_NET_PLUGIN; its init() has already succeeded. Later calls return the
// same table, or the same error.
ncclResult_t netSelect(const NetApi** out);

// The network named `name` (case-insensitive; a communicator's
// ncclConfig_t.netName), initialized; nullptr or "" = netSelect(). Unknown
// names fail with ncclInvalidArgument and a WARN listing the available ones.
ncclResult_t netSelectByName(const char* name, const NetApi** out);

// How long a network connection setup keeps trying before it fails
// (UNICCL_NET_CONNECT_TIMEOUT_MS, default 30000): the socket and IB
// transports' connect/accept and the NET transport's link setup.
int64_t netConnectTimeoutMs();

// Frees what a connect() still in progress keeps in `handle`, when its
// caller gives up (the link is torn down during setup: an abort, a peer that
// died). For the built-in transports; NCCL's net API has no such call, so an
// external plugin keeps its state (as under NCCL).
void netAbandonConnect(const NetApi* net, void* handle);

// Forgets the choice and unloads the plugin so the next netSelect reads the
// environment again. Tests only: no comm of the old table may be alive.
void netUnloadForTesting();

}  // namespace uniccl
