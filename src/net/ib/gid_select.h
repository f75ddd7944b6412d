// Which GID (source address) a port's QPs use, as NCCL chooses it:
//
//   InfiniBand link layer: NCCL_IB_GID_INDEX, or 0 (traffic is LID-routed).
//   Ethernet (RoCE): NCCL_IB_GID_INDEX when set (>= 0); otherwise the table is
//   scanned for a valid GID of family NCCL_IB_ADDR_FAMILY (AF_INET: an
//   IPv4-mapped ::ffff:a.b.c.d GID; AF_INET6: any other) and RoCE version
//   NCCL_IB_ROCE_VERSION_NUM (default 2), preferring the family first.
#pragma once

#include <sys/socket.h>

#include <vector>

#include "net/ib/verbs_seam.h"

namespace uniccl {
namespace ib {

struct GidEntry {
  Gid gid;
  GidType type;
};

bool gidIsZero(const Gid& gid);
int gidFamily(const Gid& gid);  // AF_INET for IPv4-mapped GIDs, else AF_INET6
// Version number (1 or 2) of a RoCE GID type; 0 when unknown.
int roceVersion(GidType type);

// The chosen index into `table`, or -1 when no entry is usable (a configured
// index out of range or pointing at an empty GID counts as unusable).
int chooseGidIndex(const std::vector<GidEntry>& table, LinkLayer linkLayer, int configuredIndex, int family,
                   int wantRoceVersion);

}  // namespace ib
}  // namespace uniccl
