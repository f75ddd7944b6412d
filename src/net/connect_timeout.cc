// The one reader of UNICCL_NET_CONNECT_TIMEOUT_MS (net/net.h).
#include "common/util/param.h"
#include "net/net.h"

namespace uniccl {

int64_t netConnectTimeoutMs() { return paramInt("UNICCL_NET_CONNECT_TIMEOUT_MS", 30000); }

}  // namespace uniccl
