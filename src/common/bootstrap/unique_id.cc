#include "common/bootstrap/unique_id.h"

#include <atomic>
#include <cstring>
#include <vector>

#include "common/api_export.h"
#include "common/bootstrap/root.h"
#include "common/check.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl {
namespace {

// Ranks may build their ids on several threads at once: warn once among them.
std::atomic<bool> warnedPublicSecret{false};

}  // namespace

uint64_t wireMagic(const AuthSecret& secret) {
  Sha256Digest d = deriveFromSecret(secret, "uniccl bootstrap magic");
  uint64_t m;
  memcpy(&m, d.data(), sizeof(m));
  return m ? m : 1;
}

ncclResult_t newRandomUniqueId(ncclUniqueId* out) {
  std::vector<std::pair<std::string, SocketAddress>> ifs;
  UCHECK(findInterfaces(&ifs, 1));
  UniqueIdContents c;
  memset(&c, 0, sizeof(c));
  c.version = kUniqueIdVersion;
  UCHECK(randomSecret(&c.secret));
  c.magic = wireMagic(c.secret);
  UCHECK(startRoot(ifs[0].second, c.secret, &c.root));
  encodeUniqueId(c, out);
  INFO(kSubsysBootstrap | kSubsysInit, "New unique id: root listening on %s (interface %s)",
       c.root.toString().c_str(), ifs[0].first.c_str());
  return ncclSuccess;
}

void encodeUniqueId(const UniqueIdContents& c, ncclUniqueId* id) {
  memset(id, 0, sizeof(*id));
  memcpy(id, &c, sizeof(c));
}

ncclResult_t decodeUniqueId(const ncclUniqueId& id, UniqueIdContents* out) {
  UniqueIdContents c;
  memcpy(&c, &id, sizeof(c));
  if (c.version != kUniqueIdVersion || !c.root.valid() || c.magic != wireMagic(c.secret) || c.root.port() == 0) {
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
  // Every rank sees only NCCL_COMM_ID: the secret must come from a text
  // they all share. Without UNICCL_COMM_SECRET that is the address itself,
  // which anyone on the network can compute: NCCL's (lack of) protection.
  const char* secretText = knobValue(Knob::UNICCL_COMM_SECRET);
  if (secretText && secretText[0]) {
    c.secret = secretFromText(secretText);
  } else {
    c.flags |= kUniqueIdPublicSecret;
    c.secret = secretFromText(env);
    if (!warnedPublicSecret.exchange(true)) {
      WARN("NCCL_COMM_ID is set without UNICCL_COMM_SECRET: any process that can reach %s can join or disturb this "
           "job's bootstrap. Set UNICCL_COMM_SECRET to the same private text on every rank (e.g. a random string "
           "the launcher generates) to authenticate the ranks",
           env);
    }
  }
  c.magic = wireMagic(c.secret);
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
    UCHECK(startRootIfAbsent(c.root, c.secret));
    *uniqueId = id;
    return ncclSuccess;
  }
  UCHECK(newRandomUniqueId(&id));
  *uniqueId = id;
  return ncclSuccess;
}
