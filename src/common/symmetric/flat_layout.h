// Where each LSA peer's allocation goes in a window's flat address range.
//
// NCCL's layout (what kernels built against either header read): peer p's
// buffer starts at lsaFlatBase + p * stride, stride a multiple of 4 GiB, so
// a kernel finds any peer's copy of an offset with one multiply-add. Mapping
// calls map whole physical allocations (CUDA maps from offset 0 only), so the
// allocation of peer p is mapped where its buffer lands on its slot: at
// slot(p) - (buffer - allocation start). That works when every peer's buffer
// sits at the same offset modulo the mapping granularity (true whenever the
// ranks allocate alike); otherwise the window is refused.
//
// Pure arithmetic, unit-tested (tests/unit/symmetric).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace uniccl {

struct FlatPeer {
  size_t allocBytes;   // the physical allocation holding the peer's buffer
  size_t offset;       // the buffer's offset inside it
};

struct FlatLayout {
  size_t stride = 0;             // multiple of 4 GiB
  size_t reserveBytes = 0;       // address space for the whole window
  size_t flatBaseOffset = 0;     // lsaFlatBase - reservation start
  std::vector<size_t> mapOffset; // [peer]: where its allocation maps, from the reservation start
};

constexpr size_t kFlatStrideUnit = size_t(1) << 32;

// False (with *why set) when the peers' offsets differ modulo granularity or
// a size is not a multiple of it.
bool planFlatLayout(const std::vector<FlatPeer>& peers, size_t granularity, FlatLayout* out, const char** why);

}  // namespace uniccl
