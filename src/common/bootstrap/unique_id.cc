#include "common/bootstrap/unique_id.h"

#include <cstring>
#include <random>
#include <vector>

#include "common/api_export.h"
#include "common/bootstrap/root.h"
#include "common/check.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl {
namespace {

uint64_t randomMagic() {
  std::random_device rd;
  uint64_t m = 0;
  while (m == 0) m = ((uint64_t)rd() << 32) ^ (uint64_t)rd();
  return m;
}

// Ranks that only see NCCL_COMM_ID must agree on the magic: hash the text
// (FNV-1a), salted so it differs from ids of other programs on that port.
uint64_t magicFromText(const char* text) {
  uint64_t h = 0xcbf29ce484222325ull ^ 0x756e6963636c0001ull;  // "uniccl" + id version
  for (const char* p = text; *p; p++) h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
  return h ? h : 1;
}

}  // namespace

void encodeUniqueId(const UniqueIdContents& c, ncclUniqueId* id) {
  memset(id, 0, sizeof(*id));
  memcpy(id, &c, sizeof(c));
}

ncclResult_t decodeUniqueId(const ncclUniqueId& id, UniqueIdContents* out) {
  UniqueIdContents c;
  memcpy(&c, &id, sizeof(c));
  if (c.version != kUniqueIdVersion || !c.root.valid() || c.magic == 0 || c.root.port() == 0) {
    WARN("Invalid ncclUniqueId (version %d, root %s): pass the id that ncclGetUniqueId produced, unchanged, to every "
         "rank",
         c.version, c.root.toString().c_str());
    return ncclInvalidArgument;
  }
  *out = c;
  return ncclSuccess;
}

ncclResult_t bootstrapIdFromEnv(ncclUniqueId* id, bool* found) {
  if (!id || !found) {
    WARN("bootstrapIdFromEnv: null argument");
    return ncclInvalidArgument;
  }
  *found = false;
  const char* env = knobValue(Knob::NCCL_COMM_ID);
  if (!env || !env[0]) return ncclSuccess;
  UniqueIdContents c;
  memset(&c, 0, sizeof(c));
  if (parseSocketAddress(env, &c.root) != ncclSuccess || c.root.port() == 0) {
    WARN("NCCL_COMM_ID='%s' is not a usable root address: use host:port or [ipv6]:port with a non-zero port", env);
    return ncclInvalidArgument;
  }
  c.version = kUniqueIdVersion;
  c.flags = kUniqueIdFromEnv;
  c.magic = magicFromText(env);
  encodeUniqueId(c, id);
  *found = true;
  return ncclSuccess;
}

}  // namespace uniccl

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  using namespace uniccl;
  if (!uniqueId) {
    WARN("ncclGetUniqueId: uniqueId is a null pointer");
    return ncclInvalidArgument;
  }
  reapFinishedRoots();
  ncclUniqueId id;
  bool fromEnv = false;
  UCHECK(bootstrapIdFromEnv(&id, &fromEnv));
  if (fromEnv) {
    UniqueIdContents c;
    UCHECK(decodeUniqueId(id, &c));
    UCHECK(startRootIfAbsent(c.root, c.magic));
    *uniqueId = id;
    return ncclSuccess;
  }
  std::vector<std::pair<std::string, SocketAddress>> ifs;
  UCHECK(findInterfaces(&ifs, 1));
  UniqueIdContents c;
  memset(&c, 0, sizeof(c));
  c.version = kUniqueIdVersion;
  c.magic = randomMagic();
  UCHECK(startRoot(ifs[0].second, c.magic, &c.root));
  encodeUniqueId(c, &id);
  INFO(kSubsysBootstrap | kSubsysInit, "ncclGetUniqueId: root listening on %s (interface %s)",
       c.root.toString().c_str(), ifs[0].first.c_str());
  *uniqueId = id;
  return ncclSuccess;
}
