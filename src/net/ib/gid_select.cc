#include "net/ib/gid_select.h"

namespace uniccl {
namespace ib {

bool gidIsZero(const Gid& gid) {
  for (uint8_t b : gid.raw)
    if (b != 0) return false;
  return true;
}

int gidFamily(const Gid& gid) {
  for (int i = 0; i < 10; i++)
    if (gid.raw[i] != 0) return AF_INET6;
  return gid.raw[10] == 0xff && gid.raw[11] == 0xff ? AF_INET : AF_INET6;
}

int roceVersion(GidType type) {
  switch (type) {
    case GidType::kIbRoceV1: return 1;
    case GidType::kRoceV2: return 2;
    default: return 0;
  }
}

namespace {

bool usable(const std::vector<GidEntry>& table, int index) {
  return index >= 0 && index < (int)table.size() && !gidIsZero(table[index].gid);
}

// NCCL's ncclUpdateGidIndex: does `cand` beat the current choice `cur`?
bool better(const std::vector<GidEntry>& table, int cur, int cand, int family, int wantVersion) {
  const GidEntry& c = table[cand];
  if (gidIsZero(c.gid) || gidFamily(c.gid) != family) return false;
  if (!usable(table, cur) || gidFamily(table[cur].gid) != family) return true;  // first of the wanted family
  return roceVersion(table[cur].type) != wantVersion && roceVersion(c.type) == wantVersion;
}

}  // namespace

int chooseGidIndex(const std::vector<GidEntry>& table, LinkLayer linkLayer, int configuredIndex, int family,
                   int wantRoceVersion) {
  if (configuredIndex >= 0) return usable(table, configuredIndex) ? configuredIndex : -1;
  if (linkLayer != LinkLayer::kEthernet) return table.empty() ? -1 : 0;
  int best = 0;
  for (int i = 1; i < (int)table.size(); i++)
    if (better(table, best, i, family, wantRoceVersion)) best = i;
  return usable(table, best) ? best : -1;
}

}  // namespace ib
}  // namespace uniccl
