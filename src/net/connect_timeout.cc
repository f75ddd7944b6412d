// The one reader of UNICCL_NET_CONNECT_TIMEOUT_MS (net/net.h).
#include "common/util/knobs.h"
#include "net/net.h"

namespace uniccl {

int64_t netConnectTimeoutMs() { return knobInt(Knob::UNICCL_NET_CONNECT_TIMEOUT_MS); }

}  // namespace uniccl
