#include "common/symmetric/flat_layout.h"

#include <algorithm>

namespace uniccl {

bool planFlatLayout(const std::vector<FlatPeer>& peers, size_t granularity, FlatLayout* out, const char** why) {
  if (peers.empty() || granularity == 0) {
    *why = "no peers or no granularity";
    return false;
  }
  const size_t residue = peers[0].offset % granularity;
  size_t maxLead = 0;    // largest (offset - residue): how far before its slot an allocation starts
  size_t maxSpan = 0;    // largest allocation
  for (const FlatPeer& p : peers) {
    if (p.allocBytes % granularity != 0) {
      *why = "an allocation's size is not a multiple of the mapping granularity";
      return false;
    }
    if (p.offset % granularity != residue) {
      *why = "the ranks' buffers sit at different offsets (modulo the mapping granularity) in their allocations; "
             "allocate the window's memory alike on every rank (e.g. one ncclMemAlloc per window)";
      return false;
    }
    if (p.offset >= p.allocBytes) {
      *why = "a buffer lies outside its allocation";
      return false;
    }
    maxLead = std::max(maxLead, p.offset - residue);
    maxSpan = std::max(maxSpan, p.allocBytes);
  }
  // Peer p's allocation occupies [slot(p) - lead(p), slot(p) - lead(p) + alloc(p)),
  // slot(p) = maxLead + p * stride (+ residue for the buffer itself). Disjoint
  // when stride >= maxSpan + maxLead.
  const size_t need = maxSpan + maxLead;
  out->stride = (need + kFlatStrideUnit - 1) / kFlatStrideUnit * kFlatStrideUnit;
  out->reserveBytes = peers.size() * out->stride + maxLead;
  out->flatBaseOffset = maxLead + residue;
  out->mapOffset.resize(peers.size());
  for (size_t p = 0; p < peers.size(); p++)
    out->mapOffset[p] = maxLead + p * out->stride - (peers[p].offset - residue);
  return true;
}

}  // namespace uniccl
