// netAbandonConnect (net/net.h): each built-in transport frees the connect
// state it keeps in its own handles.
#include "net/ib/ib_transport.h"
#include "net/net.h"
#include "net/socket_transport.h"

namespace uniccl {

void netAbandonConnect(const NetApi* net, void* handle) {
  if (net == socketNetApi()) socketAbandonConnect(handle);
  else if (net == ib::ibNetTable()) ib::abandonConnect(handle);
}

}  // namespace uniccl
