// decodeUniqueId: what Bootstrap::init makes of the 128 bytes the user passes
// as ncclUniqueId (copied around by the user's own launcher, so anything).
//
// Input: the id (zero-filled past the end of the input).
#include "common/bootstrap/unique_id.h"
#include "fuzz_input.h"

using namespace uniccl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  ncclUniqueId id = in.take<ncclUniqueId>();
  UniqueIdContents c;
  memset(&c, 0xa5, sizeof(c));
  ncclResult_t res = decodeUniqueId(id, &c);
  if (res == ncclSuccess) {
    CHECK_OR_ABORT(c.version == kUniqueIdVersion && c.magic != 0 && c.root.valid() && c.root.port() > 0);
    CHECK_OR_ABORT(memcmp(&c, &id, sizeof(c)) == 0);
    CHECK_OR_ABORT(!c.root.toString().empty());
    // Round trip: what encode writes decodes to the same contents.
    ncclUniqueId again;
    encodeUniqueId(c, &again);
    UniqueIdContents d;
    CHECK_OR_ABORT(decodeUniqueId(again, &d) == ncclSuccess && memcmp(&c, &d, sizeof(c)) == 0);
  } else {
    CHECK_OR_ABORT(res == ncclInvalidArgument);
  }
  return 0;
}
