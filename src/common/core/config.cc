// Reading ncclConfig_t across NCCL header versions, validating it, filling
// defaults and applying NCCL_* environment overrides (see config.h).
#include "common/core/config.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/util/debug.h"
#include "common/util/knobs.h"
#include "device/dev_types.h"

namespace uniccl {

static_assert(kMaxCTAs == dev::kMaxChannels, "a collective runs at most one block per channel the kernels know");

namespace {

constexpr unsigned int kConfigMagic = 0xcafebeef;

// Where each field of the current ncclConfig_t lies and the NCCL release that
// added it. Both matter: a field is present iff it fits in the caller's
// `size` AND the caller's header was at least that release. The version test
// alone guards fields that newer releases placed into the tail padding of an
// older struct (cgaClusterSize sits in the padding of the 24-byte 2.14
// struct, trafficClass in that of the 48-byte 2.18 struct): `size` covers
// those bytes, but an old program never wrote them.
struct FieldSpec {
  const char* name;
  size_t offset;
  size_t size;
  unsigned int since;  // NCCL_VERSION code of the release that introduced it
};

#define UNICCL_FIELD(f, since) \
  FieldSpec { #f, offsetof(ncclConfig_t, f), sizeof(static_cast<ncclConfig_t*>(nullptr)->f), since }

const FieldSpec kFields[] = {
    UNICCL_FIELD(blocking, NCCL_VERSION(2, 14, 0)),
    UNICCL_FIELD(cgaClusterSize, NCCL_VERSION(2, 17, 0)),
    UNICCL_FIELD(minCTAs, NCCL_VERSION(2, 17, 0)),
    UNICCL_FIELD(maxCTAs, NCCL_VERSION(2, 17, 0)),
    UNICCL_FIELD(netName, NCCL_VERSION(2, 17, 0)),
    UNICCL_FIELD(splitShare, NCCL_VERSION(2, 18, 0)),
    UNICCL_FIELD(trafficClass, NCCL_VERSION(2, 25, 0)),
    UNICCL_FIELD(commName, NCCL_VERSION(2, 19, 0)),
    UNICCL_FIELD(collnetEnable, NCCL_VERSION(2, 27, 0)),
    UNICCL_FIELD(CTAPolicy, NCCL_VERSION(2, 27, 0)),
    UNICCL_FIELD(shrinkShare, NCCL_VERSION(2, 27, 0)),
    UNICCL_FIELD(nvlsCTAs, NCCL_VERSION(2, 27, 0)),
    UNICCL_FIELD(nChannelsPerNetPeer, NCCL_VERSION(2, 28, 0)),
    UNICCL_FIELD(nvlinkCentricSched, NCCL_VERSION(2, 28, 0)),
};
#undef UNICCL_FIELD

// The first ncclConfig_t (NCCL 2.14: size, magic, version, blocking) is 24
// bytes; no NCCL_CONFIG_INITIALIZER ever produced less.
constexpr size_t kMinConfigSize = 24;
static_assert(offsetof(ncclConfig_t, blocking) + sizeof(int) <= kMinConfigSize,
              "the 2.14 layout must hold blocking");

ncclConfig_t undefinedConfig() {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  return c;
}

// Copies into `raw` the fields the caller's struct really has; the others
// keep their NCCL_CONFIG_UNDEF_* values. Reads no byte past the caller's size.
[[nodiscard]] ncclResult_t copyPresentFields(const ncclConfig_t* user, ncclConfig_t* raw,
                               unsigned int* userVersion) {
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(user);
  size_t size;
  std::memcpy(&size, bytes + offsetof(ncclConfig_t, size), sizeof(size));
  if (size < kMinConfigSize) {
    WARN("ncclConfig_t.size is %zu, smaller than any NCCL config (at least %zu bytes): "
         "initialize the config with NCCL_CONFIG_INITIALIZER",
         size, kMinConfigSize);
    return ncclInvalidArgument;
  }
  unsigned int magic, version;
  std::memcpy(&magic, bytes + offsetof(ncclConfig_t, magic), sizeof(magic));
  std::memcpy(&version, bytes + offsetof(ncclConfig_t, version), sizeof(version));
  if (magic != kConfigMagic) {
    WARN("ncclConfig_t.magic is 0x%x, expected 0xcafebeef: the config was not initialized "
         "with NCCL_CONFIG_INITIALIZER",
         magic);
    return ncclInvalidArgument;
  }
  if (version < static_cast<unsigned int>(NCCL_VERSION(2, 14, 0))) {
    INFO(kSubsysEnv, "ncclConfig_t.version %u predates NCCL 2.14: using default options", version);
  }
  const size_t readable = std::min(size, sizeof(ncclConfig_t));
  for (const FieldSpec& f : kFields) {
    if (f.offset + f.size > readable || version < f.since) continue;
    std::memcpy(reinterpret_cast<unsigned char*>(raw) + f.offset, bytes + f.offset, f.size);
  }
  *userVersion = version;
  return ncclSuccess;
}

bool isUndef(int v) { return v == NCCL_CONFIG_UNDEF_INT; }

[[nodiscard]] ncclResult_t invalid(const char* field, int value, const char* allowed) {
  WARN("ncclConfig_t.%s = %d is invalid: allowed are %s, or NCCL_CONFIG_UNDEF_INT for the default",
       field, value, allowed);
  return ncclInvalidArgument;
}

[[nodiscard]] ncclResult_t checkBool(const char* field, int v) {
  if (isUndef(v) || v == 0 || v == 1) return ncclSuccess;
  return invalid(field, v, "0 or 1");
}

[[nodiscard]] ncclResult_t checkRange(const char* field, int v, int lo, int hi, const char* allowed) {
  if (isUndef(v) || (v >= lo && v <= hi)) return ncclSuccess;
  return invalid(field, v, allowed);
}

[[nodiscard]] ncclResult_t validate(const ncclConfig_t& c) {
  ncclResult_t r;
  if ((r = checkBool("blocking", c.blocking)) != ncclSuccess) return r;
  if ((r = checkRange("cgaClusterSize", c.cgaClusterSize, 0, INT_MAX, "values >= 0")) != ncclSuccess)
    return r;
  if ((r = checkRange("minCTAs", c.minCTAs, 1, INT_MAX, "values >= 1")) != ncclSuccess) return r;
  if ((r = checkRange("maxCTAs", c.maxCTAs, 1, INT_MAX, "values >= 1")) != ncclSuccess) return r;
  if (!isUndef(c.minCTAs) && !isUndef(c.maxCTAs) && c.minCTAs > c.maxCTAs) {
    WARN("ncclConfig_t.minCTAs = %d is larger than maxCTAs = %d: minCTAs must not exceed maxCTAs",
         c.minCTAs, c.maxCTAs);
    return ncclInvalidArgument;
  }
  if ((r = checkBool("splitShare", c.splitShare)) != ncclSuccess) return r;
  if ((r = checkRange("trafficClass", c.trafficClass, 0, INT_MAX, "values >= 0")) != ncclSuccess)
    return r;
  if ((r = checkBool("collnetEnable", c.collnetEnable)) != ncclSuccess) return r;
  if ((r = checkRange("CTAPolicy", c.CTAPolicy, NCCL_CTA_POLICY_DEFAULT, NCCL_CTA_POLICY_ZERO,
                      "NCCL_CTA_POLICY_DEFAULT (0), NCCL_CTA_POLICY_EFFICIENCY (1) or "
                      "NCCL_CTA_POLICY_ZERO (2)")) != ncclSuccess)
    return r;
  if ((r = checkBool("shrinkShare", c.shrinkShare)) != ncclSuccess) return r;
  if ((r = checkRange("nvlsCTAs", c.nvlsCTAs, 1, INT_MAX, "values >= 1")) != ncclSuccess) return r;
  static_assert(kMaxCTAs == 128, "update the nChannelsPerNetPeer message below");
  if ((r = checkRange("nChannelsPerNetPeer", c.nChannelsPerNetPeer, 1, kMaxCTAs,
                      "1 to 128")) != ncclSuccess)
    return r;
  if ((r = checkBool("nvlinkCentricSched", c.nvlinkCentricSched)) != ncclSuccess) return r;
  return ncclSuccess;
}

// Resolves UNDEF fields to uniccl's defaults (those of CommConfig).
void resolve(const ncclConfig_t& c, CommConfig* out) {
  auto pick = [](int v, int dflt) { return isUndef(v) ? dflt : v; };
  const CommConfig d;
  out->blocking = pick(c.blocking, d.blocking) != 0;
  out->cgaClusterSize = pick(c.cgaClusterSize, d.cgaClusterSize);
  out->minCTAs = pick(c.minCTAs, d.minCTAs);
  out->maxCTAs = pick(c.maxCTAs, d.maxCTAs);
  out->netName = c.netName ? c.netName : "";
  out->splitShare = pick(c.splitShare, d.splitShare) != 0;
  out->trafficClass = c.trafficClass;  // UNDEF == kConfigAuto
  out->commName = c.commName ? c.commName : "";
  out->collnetEnable = pick(c.collnetEnable, d.collnetEnable) != 0;
  out->ctaPolicy = pick(c.CTAPolicy, d.ctaPolicy);
  out->shrinkShare = pick(c.shrinkShare, d.shrinkShare) != 0;
  out->nvlsCTAs = c.nvlsCTAs;                        // UNDEF == kConfigAuto
  out->nChannelsPerNetPeer = c.nChannelsPerNetPeer;  // UNDEF == kConfigAuto
  out->nvlinkCentricSched = pick(c.nvlinkCentricSched, d.nvlinkCentricSched) != 0;
}

// Reads integer variable `name`; false when unset or not an integer (the
// latter is reported, since a typo would otherwise silently do nothing).
bool envInt(Knob k, int* value) {
  const char* name = knobSpec(k).name;
  const char* s = knobValue(k);
  if (s == nullptr || *s == '\0') return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 0);
  while (end && (*end == ' ' || *end == '\t' || *end == '\n')) ++end;
  if (errno != 0 || end == s || *end != '\0' || v < INT_MIN || v > INT_MAX) {
    WARN("%s=\"%s\" is not an integer; ignoring it", name, s);
    return false;
  }
  *value = static_cast<int>(v);
  return true;
}

void ignored(const char* name, int v, const char* allowed) {
  INFO(kSubsysEnv, "%s=%d ignored: allowed are %s", name, v, allowed);
}

void envBool(Knob k, bool* field) {
  const char* name = knobSpec(k).name;
  int v;
  if (!envInt(k, &v)) return;
  if (v == 0 || v == 1) {
    *field = v == 1;
    INFO(kSubsysEnv, "%s set by environment to %d", name, v);
  } else {
    ignored(name, v, "0 or 1");
  }
}

void envPositive(Knob k, int* field) {
  const char* name = knobSpec(k).name;
  int v;
  if (!envInt(k, &v)) return;
  if (v > 0) {
    *field = v;
    INFO(kSubsysEnv, "%s set by environment to %d", name, v);
  } else {
    ignored(name, v, "values >= 1");
  }
}

}  // namespace

void applyConfigEnv(CommConfig* cfg) {
  // As in NCCL, a valid environment setting wins over the program's config:
  // it is how a user retunes a program without rebuilding it.
  envBool(Knob::NCCL_COMM_BLOCKING, &cfg->blocking);

  int v;
  if (envInt(Knob::NCCL_CGA_CLUSTER_SIZE, &v)) {
    if (v < 0) {
      ignored("NCCL_CGA_CLUSTER_SIZE", v, "0 to 8");
    } else {
      cfg->cgaClusterSize = std::min(v, kMaxCgaClusterSize);
      INFO(kSubsysEnv, "NCCL_CGA_CLUSTER_SIZE set by environment to %d", cfg->cgaClusterSize);
    }
  }
  envPositive(Knob::NCCL_MIN_CTAS, &cfg->minCTAs);
  envPositive(Knob::NCCL_MAX_CTAS, &cfg->maxCTAs);
  envPositive(Knob::NCCL_NCHANNELS_PER_NET_PEER, &cfg->nChannelsPerNetPeer);
  envBool(Knob::NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE, &cfg->nvlinkCentricSched);

  if (const char* net = knobValue(Knob::NCCL_NET); net != nullptr && *net != '\0') {
    cfg->netName = net;
    INFO(kSubsysEnv, "NCCL_NET set by environment to %s", net);
  }
  envBool(Knob::NCCL_COMM_SPLIT_SHARE_RESOURCES, &cfg->splitShare);
  envBool(Knob::NCCL_COMM_SHRINK_SHARE_RESOURCES, &cfg->shrinkShare);
  envBool(Knob::NCCL_COLLNET_ENABLE, &cfg->collnetEnable);
  if (envInt(Knob::NCCL_CTA_POLICY, &v)) {
    if (v >= NCCL_CTA_POLICY_DEFAULT && v <= NCCL_CTA_POLICY_ZERO) {
      cfg->ctaPolicy = v;
      INFO(kSubsysEnv, "NCCL_CTA_POLICY set by environment to %d", v);
    } else {
      ignored("NCCL_CTA_POLICY", v, "0, 1 or 2");
    }
  }
  envPositive(Knob::NCCL_NVLS_NCHANNELS, &cfg->nvlsCTAs);

  // Caps keep the channel counts inside what the library can launch; values
  // above come from the environment or from large config values, which NCCL
  // also clamps instead of rejecting.
  auto cap = [](const char* what, int* field) {
    if (*field > kMaxCTAs) {
      INFO(kSubsysEnv, "%s %d is above the limit of %d channels; using %d", what, *field,
           kMaxCTAs, kMaxCTAs);
      *field = kMaxCTAs;
    }
  };
  cap("minCTAs", &cfg->minCTAs);
  cap("maxCTAs", &cfg->maxCTAs);
  cap("nChannelsPerNetPeer", &cfg->nChannelsPerNetPeer);
  if (cfg->cgaClusterSize > kMaxCgaClusterSize) {
    INFO(kSubsysEnv, "cgaClusterSize %d is above the limit of %d; using %d", cfg->cgaClusterSize,
         kMaxCgaClusterSize, kMaxCgaClusterSize);
    cfg->cgaClusterSize = kMaxCgaClusterSize;
  }
  if (cfg->minCTAs > cfg->maxCTAs) {
    INFO(kSubsysEnv, "minCTAs %d is larger than maxCTAs %d; using %d for both", cfg->minCTAs,
         cfg->maxCTAs, cfg->maxCTAs);
    cfg->minCTAs = cfg->maxCTAs;
  }
}

ncclResult_t readConfig(const ncclConfig_t* user, CommConfig* out) {
  if (out == nullptr) {
    WARN("readConfig: output pointer is null");
    return ncclInternalError;
  }
  ncclConfig_t raw = undefinedConfig();
  unsigned int userVersion = 0;
  if (user != nullptr) {
    ncclResult_t r = copyPresentFields(user, &raw, &userVersion);
    if (r != ncclSuccess) return r;
    if ((r = validate(raw)) != ncclSuccess) return r;
  }
  CommConfig cfg;
  resolve(raw, &cfg);
  cfg.userVersion = userVersion;
  applyConfigEnv(&cfg);
  INFO(kSubsysInit,
       "comm config: blocking %d cgaClusterSize %d CTAs %d-%d net \"%s\" splitShare %d "
       "trafficClass %d name \"%s\" collnet %d CTAPolicy %d shrinkShare %d nvlsCTAs %d "
       "nChannelsPerNetPeer %d nvlinkCentricSched %d (config version %u)",
       cfg.blocking, cfg.cgaClusterSize, cfg.minCTAs, cfg.maxCTAs, cfg.netName.c_str(),
       cfg.splitShare, cfg.trafficClass, cfg.commName.c_str(), cfg.collnetEnable, cfg.ctaPolicy,
       cfg.shrinkShare, cfg.nvlsCTAs, cfg.nChannelsPerNetPeer, cfg.nvlinkCentricSched,
       cfg.userVersion);
  *out = std::move(cfg);
  return ncclSuccess;
}

}  // namespace uniccl
