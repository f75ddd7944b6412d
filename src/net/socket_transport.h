// The built-in TCP transport ("Socket"), exposed through the net plugin table.
//
//   NCCL_SOCKET_NTHREADS    helper threads per connection (default 2, 1..16)
//   NCCL_NSOCKS_PERTHREAD   data sockets per helper thread (default 2); threads x
//                           sockets is capped at 64
//   UNICCL_NET_CONNECT_TIMEOUT_MS  how long connect()/accept() keep trying
//                           before they fail (default 30000)
//
// Host memory only. One thread drives a comm at a time (the proxy's contract).
#pragma once

#include "net/net.h"

namespace uniccl {

const NetApi* socketNetApi();
// netAbandonConnect for the Socket table's handles.
void socketAbandonConnect(void* handle);

}  // namespace uniccl
