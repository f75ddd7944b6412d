// The IB table as plugin_loader.cc lists it (libibverbs builds only): the
// transport over the real verbs unless a test installed another seam.
#include "net/ib/ib_transport.h"
#include "net/ib/verbs_real.h"

namespace uniccl {

const NetApi* ibNetApi() {
  if (!ib::verbsInstalled()) ib::installVerbs(ib::realVerbs());
  return ib::ibNetTable();
}

}  // namespace uniccl
