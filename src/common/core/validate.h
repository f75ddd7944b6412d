// Argument checks of the API entry points. Every failure WARNs (so
// ncclGetLastError has the text) and returns the NCCL error code; callers
// enqueue nothing when a check fails.
#pragma once

#include <cstddef>
#include <cstdint>

#include "uniccl.h"

struct ncclComm;

namespace uniccl {

// comm non-null, alive, initialized and not aborted.
[[nodiscard]] ncclResult_t checkCommUsable(ncclComm* comm, const char* fn);
// comm non-null and a live communicator (core/comm_registry.h), checked
// without reading it: for queries and destroy/abort, and first in the others.
[[nodiscard]] ncclResult_t checkCommHandle(const ncclComm* comm, const char* fn);
// checkCommUsable, or revoked (split and shrink may start from one).
[[nodiscard]] ncclResult_t checkCommManageable(ncclComm* comm, const char* fn);
[[nodiscard]] ncclResult_t checkDataType(ncclDataType_t dtype, const char* fn);
[[nodiscard]] ncclResult_t checkRank(const ncclComm* comm, int rank, const char* what, const char* fn);
// count * elemSize * factor without overflow.
[[nodiscard]] ncclResult_t checkedBytes(size_t count, size_t elemSize, size_t factor, size_t* bytes, const char* fn);
// A buffer of `bytes` the GPU of comm will read or write: non-null when
// bytes > 0, GPU-accessible, on comm's device when it is device memory, and
// inside its allocation. The allocations it accepted last are remembered
// (ncclComm::checkedBuffers), so the buffers of a loop of calls cost no
// runtime query.
[[nodiscard]] ncclResult_t checkBuffer(ncclComm* comm, const void* ptr, size_t bytes, const char* name, const char* fn);

// The device allocations checkBuffer accepted last, the oldest replaced
// first. The range that holds an address decides for it alone: a buffer
// that runs past its end is checked again by the runtime, which then
// reports it precisely.
class CheckedRanges {
 public:
  static constexpr unsigned kRanges = 4;

  // Whether [p, p + bytes) lies inside a remembered allocation.
  bool covers(uintptr_t p, size_t bytes) const {
    for (const Range& r : ranges_)
      if (p >= r.base && p < r.end) return bytes <= r.end - p;
    return false;
  }
  // Remembers the allocation [base, end) in place of the oldest.
  void remember(uintptr_t base, uintptr_t end) { ranges_[next_++ % kRanges] = Range{base, end}; }

 private:
  struct Range {
    uintptr_t base = 0, end = 0;
  };
  Range ranges_[kRanges];
  unsigned next_ = 0;
};

}  // namespace uniccl
