// Communicator options: the user's ncclConfig_t (from any NCCL header since
// 2.14) plus the NCCL_* environment of the same options, resolved into one
// plain struct with every default filled in. Other knobs are read where they
// are used, through the registry (util/knobs.h; docs/environment.md lists them all).
#pragma once

#include <string>

#include "uniccl.h"

namespace uniccl {

// Upper bound of channels (GPU blocks) per collective; min/maxCTAs and
// nChannelsPerNetPeer are capped to it (NCCL's MAXCHANNELS is 64; uniccl
// launches up to dev::kMaxChannels, 128).
constexpr int kMaxCTAs = 128;
// Largest thread-block cluster accepted for cgaClusterSize (NVIDIA sm_90+).
constexpr int kMaxCgaClusterSize = 8;
// An option left to the library's automatic choice at run time.
constexpr int kConfigAuto = NCCL_CONFIG_UNDEF_INT;

struct CommConfig {
  // false: calls on the communicator may return ncclInProgress (NCCL_COMM_BLOCKING).
  bool blocking = true;
  // Thread-block cluster size for kernels; ignored where unsupported (NCCL_CGA_CLUSTER_SIZE).
  int cgaClusterSize = 4;
  // Channel count bounds, 1 <= minCTAs <= maxCTAs <= kMaxCTAs (NCCL_MIN_CTAS, NCCL_MAX_CTAS).
  int minCTAs = 1;
  int maxCTAs = kMaxCTAs;
  // Network transport by name, e.g. "Socket" or "IB"; empty: best available (NCCL_NET).
  std::string netName;
  // Children of ncclCommSplit reuse the parent's resources (NCCL_COMM_SPLIT_SHARE_RESOURCES).
  bool splitShare = false;
  // Network traffic class for QoS; kConfigAuto: the transport's default.
  int trafficClass = kConfigAuto;
  // Name shown in logs and handed to profilers; empty: none.
  std::string commName;
  // In-network reductions allowed (NCCL_COLLNET_ENABLE).
  bool collnetEnable = false;
  // NCCL_CTA_POLICY_DEFAULT / _EFFICIENCY / _ZERO (NCCL_CTA_POLICY).
  int ctaPolicy = NCCL_CTA_POLICY_DEFAULT;
  // Children of ncclCommShrink reuse the parent's resources (NCCL_COMM_SHRINK_SHARE_RESOURCES).
  bool shrinkShare = false;
  // Channels for NVLink-SHARP algorithms; kConfigAuto: automatic (NCCL_NVLS_NCHANNELS).
  int nvlsCTAs = kConfigAuto;
  // Channels per remote peer for point-to-point; kConfigAuto: automatic
  // (NCCL_NCHANNELS_PER_NET_PEER).
  int nChannelsPerNetPeer = kConfigAuto;
  // Schedule to maximize NVLink utilization (NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE).
  bool nvlinkCentricSched = false;
  // `version` of the caller's ncclConfig_t (NCCL header it was built with); 0: no config given.
  unsigned int userVersion = 0;
};

// Builds *out from `user` (nullptr: all defaults) and the environment.
// A config built against an older NCCL header is read only as far as that
// header's struct reaches: a field counts iff it lies within user->size and
// user->version is at least the release that introduced it, so memory past
// an older struct (or its tail padding) is never read. Rejects, with a WARN
// naming the field and what is allowed, and returns ncclInvalidArgument for:
// a magic other than 0xcafebeef (not made with NCCL_CONFIG_INITIALIZER), a
// size below the first (NCCL 2.14) layout, or out-of-range values. Valid
// NCCL_* environment variables override the config, as in NCCL. *out is
// written only on success.
[[nodiscard]] ncclResult_t readConfig(const ncclConfig_t* user, CommConfig* out);

// Applies the NCCL_* environment overrides and the caps (kMaxCTAs, min <=
// max) to an already resolved config. readConfig calls it; ncclCommSplit and
// ncclCommShrink call it on a copy of the parent's config when the caller
// passes no config, so that environment changes reach the child as in NCCL.
void applyConfigEnv(CommConfig* cfg);

}  // namespace uniccl
