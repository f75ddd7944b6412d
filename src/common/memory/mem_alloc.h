// ncclMemAlloc's memory (core/memory_api.cc). Where the GPU supports virtual
// memory management (gpu::vmmQuery), each allocation is its own physical
// allocation, rounded up to the granularity, mapped at a reservation of its
// own with read/write access for the current device and every GPU that can
// reach it (gpu::canAccessPeer; copy engines and kernels of peers write
// there): memory whose handle peers can import and map (symmetric windows),
// as NCCL's cuMem path gives.
// Elsewhere, plain device memory (gpu::deviceAlloc), with an INFO line once.
// A process-wide table keeps every allocation (base -> size, handle) until
// memFree, so that only what memAlloc returned is freed, and only once.
#pragma once

#include <cstddef>

#include "common/gpu.h"

namespace uniccl {

// `bytes` (> 0) on the current device. VMM allocations start on a multiple
// of max(granularity, NCCL_WIN_REQUIRED_ALIGNMENT).
[[nodiscard]] ncclResult_t memAlloc(void** ptr, size_t bytes);
// The same, for memory that peers poll while kernels run (the symmetric
// collectives' barrier, the Device API's barriers and LL lines): a VMM
// allocation of polled physical memory (gpu::VmmInfo::polled), never plain
// memory. Where the GPU has no such VMM memory (HIP before ROCm 7.2, or no
// VMM at all): ncclInvalidUsage with a WARN saying why. Freed with memFree.
[[nodiscard]] ncclResult_t memAllocPolled(void** ptr, size_t bytes);
// Frees what memAlloc returned (the same pointer). Anything else -- an
// interior pointer, memory from elsewhere, a second free -- is
// ncclInvalidArgument with a WARN, and nothing is freed.
[[nodiscard]] ncclResult_t memFree(void* ptr);

// The memAlloc allocation that contains ptr (false: none).
struct MemAllocInfo {
  void* base;
  size_t bytes;            // the mapping (VMM: a multiple of the granularity) or the size asked for
  bool vmm;                // a physical allocation mapped with gpu::memMap
  gpu::MemHandle handle;   // vmm only: the table's reference (not a new one)
  int device;
};
bool memAllocFind(const void* ptr, MemAllocInfo* out);
// A new reference to the VMM allocation mapped at ptr, with the mapping's
// start and size, asked of the backend only where that cannot crash
// (gpu::memRetainAnyAddress): an ncclMemAlloc mapping always, any other
// address only where the backend answers for every address (CUDA; on HIP a
// VMM mapping made elsewhere is then treated as ordinary memory).
// ncclInvalidArgument without a log: ptr is not in a known VMM mapping.
[[nodiscard]] ncclResult_t memRetainMapping(const void* ptr, gpu::MemHandle* handle, void** mapBase, size_t* mapBytes);
// Allocations made and not yet freed (leak checks in tests).
size_t memAllocLive();

}  // namespace uniccl
