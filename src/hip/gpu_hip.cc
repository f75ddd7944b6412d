// What HIP answers differently from CUDA in src/common/gpu.h: device
// properties' vendor fields, peer links (XGMI only), polled memory, pointer
// attributes, virtual memory, launches; gpu_common/gpu_runtime.cc holds the
// rest, written once for both backends. Thin by design: each function
// translates arguments and result codes and nothing more. Calls that older
// ROCm releases lack sit behind HIP_VERSION checks (hip/rocm_features.h)
// and answer ncclInvalidUsage there, with a WARN naming the missing runtime
// call.
#include <hip/hip_ext.h>
#include <hip/hip_runtime.h>
#include <hip/hip_version.h>
#include <hsa/hsa_ext_amd.h>   // HSA_AMD_LINK_INFO_TYPE_XGMI

#include <cstdlib>

#include "common/check.h"
#include "common/gpu.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"
#include "gpu_common/relaxed_capture.h"
#include "gpu_common/runtime_check.h"
#include "gpu_common/vendor_hooks.h"
#include "hip/rocm_features.h"
#include "hip/vmm_abi.h"

namespace uniccl::gpu {

using backend::fail;
using backend::RelaxedCapture;

namespace {

// HIP_VERSION of the runtime loaded (libamdhip64), which may be newer than
// the headers this was built with; 0 where it cannot say. The virtual-memory
// calls' behaviour depends on it (hip/vmm_abi.h).
[[maybe_unused]] int runtimeVersion() {
  static const int v = [] {
    int r = 0;
    if (hipRuntimeGetVersion(&r) != hipSuccess) {
      (void)hipGetLastError();
      r = 0;
    }
    return r;
  }();
  return v;
}

[[maybe_unused]] ncclResult_t missing(const char* call) {
  WARN("%s is not available in this ROCm release (HIP_VERSION %d); update ROCm for this feature",
       call, (int)HIP_VERSION);
  return ncclInvalidUsage;
}

#define UNICCL_KNOB UNICCL_KNOB_CONSTANT
#include "hip/knobs.def"
#undef UNICCL_KNOB

}  // namespace

// ------------------------------------------------------------------ devices
ncclResult_t backend::vendorDeviceProps(int dev, const hipDeviceProp_t&, DeviceProps* out) {
  // No 128-byte store atomicity is promised to uniccl's LL128 on AMD GPUs
  // (RCCL enables LL128 per architecture, gfx90a/gfx942 with its own
  // checks): LL128 stays off on HIP (docs/amd.md).
  out->lineStoreAtomic128 = 0;
#if UNICCL_HIP_HAS_WALL_CLOCK_RATE
  int khz = 0;
  GPU_TRY(hipDeviceGetAttribute(&khz, hipDeviceAttributeWallClockRate, dev));
  out->timerRateKHz = khz > 0 ? khz : 100000;
#else
  (void)dev;
  out->timerRateKHz = 100000;   // the constant 100 MHz wall clock of gfx9, gfx10 and gfx11
#endif
  return ncclSuccess;
}

// Peers reached over PCIe rather than XGMI (Radeon gfx10/gfx11, MI210
// without a bridge) need the receiver's HDP (host data path) flushed after
// each post before its kernels see the data, as RCCL does; uniccl does not
// flush it, so such peers are answered "no direct access" and the core
// connects them through SHM instead (docs/amd.md). INFO says so once.
// LL128 stays off on HIP (docs/amd.md).
ncclResult_t p2pLinkKeepsLines(int /*dev*/, int /*peer*/, bool* whole) {
  *whole = false;
  return ncclSuccess;
}

ncclResult_t canAccessPeer(int dev, int peer, bool* can) {
  int v = 0;
  GPU_TRY(hipDeviceCanAccessPeer(&v, dev, peer));
  if (v != 0) {
    uint32_t type = 0, hops = 0;
    hipError_t err = hipExtGetLinkTypeAndHopCount(dev, peer, &type, &hops);
    if (err != hipSuccess || type != HSA_AMD_LINK_INFO_TYPE_XGMI) {
      (void)hipGetLastError();
      INFO(kSubsysInit | kSubsysP2p, "GPU %d -> %d: no XGMI link (%s): not used for P2P (no HDP flush); SHM instead",
           dev, peer, err != hipSuccess ? "link type unknown" : "PCIe");
      v = 0;
    }
  }
  *can = v != 0;
  return ncclSuccess;
}

// One XGMI hop: the two GPUs share a link of their mesh; several hops or
// PCIe: the path crosses the host.
ncclResult_t peerLinkKind(int dev, int peer, int* kind, int* count) {
  int can = 0;
  GPU_TRY(hipDeviceCanAccessPeer(&can, dev, peer));
  *kind = kPeerLinkNone;
  *count = 0;
  if (can == 0) return ncclSuccess;
  uint32_t type = 0, hops = 0;
  if (hipExtGetLinkTypeAndHopCount(dev, peer, &type, &hops) != hipSuccess) {
    (void)hipGetLastError();
    *kind = kPeerLinkPcie;
    return ncclSuccess;
  }
  if (type == HSA_AMD_LINK_INFO_TYPE_XGMI && hops == 1) {
    *kind = kPeerLinkDirect;
    *count = 1;
  } else {
    *kind = kPeerLinkPcie;
  }
  return ncclSuccess;
}

bool graphCaptureSupported(const char** why) {
#if UNICCL_HIP_HAS_CAPTURE
  *why = nullptr;
  return true;
#else
  *why = "graph capture needs ROCm 5.3 or newer (this HIP runtime records no kernel launch of uniccl into a "
         "graph and has no graph user objects)";
  return false;
#endif
}

// ------------------------------------------------------------------- memory
// RCCL's choice for everything peers poll: uncached device memory
// (hipDeviceMallocUncached, ROCm 5.7+), fine-grained before that. Stores
// then reach memory without an L2 writeback and a peer's loads see them.
#if defined(hipDeviceMallocUncached)
#define UNICCL_HIP_POLLED_FLAGS hipDeviceMallocUncached
#define UNICCL_HIP_POLLED_NAME "hipExtMallocWithFlags(hipDeviceMallocUncached)"
#else
#define UNICCL_HIP_POLLED_FLAGS hipDeviceMallocFinegrained
#define UNICCL_HIP_POLLED_NAME "hipExtMallocWithFlags(hipDeviceMallocFinegrained)"
#endif
ncclResult_t deviceAllocPolled(void** ptr, size_t bytes) {
  RelaxedCapture relaxed;
  hipError_t err = hipExtMallocWithFlags(ptr, bytes, UNICCL_HIP_POLLED_FLAGS);
  if (err != hipSuccess) {
    WARN("%s failed: %s; connection buffers need memory that peers can poll (RCCL refuses P2P without it)",
         UNICCL_HIP_POLLED_NAME, hipGetErrorString(err));
    (void)hipGetLastError();
    return err == hipErrorOutOfMemory ? ncclSystemError : ncclUnhandledCudaError;
  }
  return ncclSuccess;
}
ncclResult_t pointerGetInfo(const void* ptr, PointerInfo* info) {
  hipPointerAttribute_t a;
  hipError_t err = hipPointerGetAttributes(&a, ptr);
  PointerInfo out{MemoryKind::Unregistered, -1};
  if (err == hipErrorInvalidValue) {
    // Memory HIP does not know (plain malloc) is reported as an invalid value.
    (void)hipGetLastError();
    *info = out;
    return ncclSuccess;
  }
  if (err != hipSuccess) return fail("hipPointerGetAttributes", err);
#if UNICCL_HIP_HAS_MEMORY_TYPE_FIELD
  const hipMemoryType type = a.type;
  const bool managed = type == hipMemoryTypeManaged;
#else
  const hipMemoryType type = a.memoryType;
  const bool managed = a.isManaged != 0;
#endif
  if (managed) {
    out.kind = MemoryKind::Managed;
    out.device = a.device;
  } else if (type == hipMemoryTypeDevice) {
    out.kind = MemoryKind::Device;
    out.device = a.device;
  } else if (type == hipMemoryTypeHost) {
    out.kind = MemoryKind::Host;
  }
  *info = out;
  return ncclSuccess;
}
ncclResult_t memGetAddressRange(const void* ptr, void** base, size_t* size) {
  hipDeviceptr_t b = nullptr;
  size_t n = 0;
  GPU_TRY(hipMemGetAddressRange(&b, &n, (hipDeviceptr_t)ptr));
  *base = (void*)b;
  *size = n;
  return ncclSuccess;
}

ncclResult_t streamWriteValue32(Stream s, void* devAddr, uint32_t value) {
  // Ordered after the stream's earlier work, as CUDA's default flags.
  const hipError_t err = hipStreamWriteValue32(static_cast<hipStream_t>(s), devAddr, value, 0);
  if (err == hipErrorNotSupported) {
    (void)hipGetLastError();
    return ncclInvalidUsage;
  }
  if (err != hipSuccess) return fail("hipStreamWriteValue32", err);
  return ncclSuccess;
}

// ---------------------------------------------------------- virtual memory
#if UNICCL_HIP_HAS_VMM
static_assert(sizeof(hipMemGenericAllocationHandle_t) <= sizeof(MemHandle), "MemHandle must hold the HIP handle");

namespace {
// `polled`: uncached, for words peers spin on (gpu.h, VmmInfo::polled);
// the pinned type is coarse-grained device memory.
hipMemAllocationProp allocationProp(int dev, bool polled = false) {
  hipMemAllocationProp p = {};
#if UNICCL_HIP_HAS_UNCACHED_VMM
  p.type = polled ? hipMemAllocationTypeUncached : hipMemAllocationTypePinned;
#else
  (void)polled;
  p.type = hipMemAllocationTypePinned;
#endif
  p.location.type = hipMemLocationTypeDevice;
  p.location.id = dev;
  p.requestedHandleType = hipMemHandleTypePosixFileDescriptor;   // the only kind HIP exports on Linux
  return p;
}
hipMemGenericAllocationHandle_t toHip(MemHandle h) { return reinterpret_cast<hipMemGenericAllocationHandle_t>(h); }
MemHandle fromHip(hipMemGenericAllocationHandle_t h) { return reinterpret_cast<MemHandle>(h); }
}  // namespace

ncclResult_t vmmQuery(int dev, VmmInfo* info) {
  int vmm = 0;
  GPU_TRY(hipDeviceGetAttribute(&vmm, hipDeviceAttributeVirtualMemoryManagementSupported, dev));
  if (vmm == 0) {
    *info = VmmInfo{false, false, 0, "the GPU or its driver does not support virtual memory management "
                    "(hipDeviceAttributeVirtualMemoryManagementSupported is 0)"};
    return ncclSuccess;
  }
  const hipMemAllocationProp prop = allocationProp(dev);
  size_t granularity = 0;
  GPU_TRY(hipMemGetAllocationGranularity(&granularity, &prop, hipMemAllocationGranularityMinimum));
  // ROCm 6.0 and 6.1 implement the calls inside one process only: export
  // and import answer "not supported".
  const bool fdExport = runtimeVersion() >= hipabi::kVmmFdExport;
  *info = VmmInfo{true, fdExport, granularity,
                  fdExport ? nullptr : "sharing virtual-memory allocations between processes needs ROCm 6.2 or newer"};
#if UNICCL_HIP_HAS_UNCACHED_VMM
  if (runtimeVersion() >= UNICCL_HIP_UNCACHED_VMM_RUNTIME) {
    // One granularity serves both kinds: the larger of the two.
    const hipMemAllocationProp polledProp = allocationProp(dev, true);
    size_t g = 0;
    GPU_TRY(hipMemGetAllocationGranularity(&g, &polledProp, hipMemAllocationGranularityMinimum));
    if (g > info->granularity) info->granularity = g;
    info->polled = true;
  }
#endif
  if (!info->polled)
    info->polledWhy = "uncached virtual memory (hipMemAllocationTypeUncached) needs ROCm 7.2 or newer, to build "
                      "with and to run on";
  return ncclSuccess;
}
ncclResult_t memCreate(MemHandle* handle, size_t bytes, int dev, bool polled) {
  RelaxedCapture relaxed;
#if UNICCL_HIP_HAS_UNCACHED_VMM
  if (polled && runtimeVersion() < UNICCL_HIP_UNCACHED_VMM_RUNTIME)
    return missing("hipMemCreate(hipMemAllocationTypeUncached)");
#else
  if (polled) return missing("hipMemCreate(hipMemAllocationTypeUncached)");
#endif
  const hipMemAllocationProp prop = allocationProp(dev, polled);
  hipMemGenericAllocationHandle_t h = nullptr;
  GPU_TRY(hipMemCreate(&h, bytes, &prop, 0));
  *handle = fromHip(h);
  return ncclSuccess;
}
ncclResult_t memRelease(MemHandle handle) {
  RelaxedCapture relaxed;
  GPU_TRY(hipMemRelease(toHip(handle)));
  return ncclSuccess;
}
ncclResult_t memExportFd(MemHandle handle, int* fd) {
  int out = -1;
  GPU_TRY(hipMemExportToShareableHandle(&out, toHip(handle), hipMemHandleTypePosixFileDescriptor, 0));
  *fd = out;
  return ncclSuccess;
}
// The descriptor goes as the loaded runtime reads it (hip/vmm_abi.h): by
// value from ROCm 7.1, through an int* before.
ncclResult_t memImportFd(int fd, MemHandle* handle) {
  const int version = runtimeVersion();
  if (version < hipabi::kVmmFdExport) return missing("hipMemImportFromShareableHandle (fd import)");
  hipMemGenericAllocationHandle_t h = nullptr;
  int value = fd;
  GPU_TRY(hipMemImportFromShareableHandle(&h, hipabi::shareableFdArgument(version, &value),
                                          hipMemHandleTypePosixFileDescriptor));
  *handle = fromHip(h);
  return ncclSuccess;
}
// Never asked about an address outside the mappings uniccl made
// (memRetainAnyAddress): for an address the runtime knows but did not map
// with hipMemMap (hipMalloc memory), ROCm 6.2+ follows a null pointer in
// hipMemRetainAllocationHandle (CLR hip_vm.cpp: the mapping's phys_mem_obj);
// ROCm 6.0 and 6.1 answer hipErrorInvalidValue there, taken as "not a
// mapping".
bool memRetainAnyAddress() { return false; }
ncclResult_t memRetainFromAddress(const void* ptr, MemHandle* handle, void** mapBase, size_t* mapBytes) {
  hipMemGenericAllocationHandle_t h = nullptr;
  hipError_t err = hipMemRetainAllocationHandle(&h, const_cast<void*>(ptr));
  if (err == hipErrorInvalidValue) {
    (void)hipGetLastError();
    return ncclInvalidArgument;
  }
  if (err != hipSuccess) return fail("hipMemRetainAllocationHandle", err);
  hipDeviceptr_t b = nullptr;
  size_t n = 0;
  err = hipMemGetAddressRange(&b, &n, (hipDeviceptr_t)ptr);
  if (err != hipSuccess) {
    ncclResult_t res = fail("hipMemGetAddressRange", err);
    (void)hipMemRelease(h);
    return res;
  }
  *handle = fromHip(h);
  *mapBase = (void*)b;
  *mapBytes = n;
  return ncclSuccess;
}
ncclResult_t addressReserve(void** va, size_t bytes, size_t align) {
  RelaxedCapture relaxed;
  GPU_TRY(hipMemAddressReserve(va, bytes, align, nullptr, 0));
  return ncclSuccess;
}
ncclResult_t addressFree(void* va, size_t bytes) {
  RelaxedCapture relaxed;
  GPU_TRY(hipMemAddressFree(va, bytes));
  return ncclSuccess;
}
ncclResult_t memMap(void* va, size_t bytes, MemHandle handle, int dev) {
  RelaxedCapture relaxed;
  GPU_TRY(hipMemMap(va, bytes, 0, toHip(handle), 0));
  hipMemAccessDesc access = {};
  access.location.type = hipMemLocationTypeDevice;
  access.location.id = dev;
  access.flags = hipMemAccessFlagsProtReadWrite;
  hipError_t err = hipMemSetAccess(va, bytes, &access, 1);
  if (err != hipSuccess) {
    ncclResult_t res = fail("hipMemSetAccess", err);
    (void)hipMemUnmap(va, bytes);
    return res;
  }
  return ncclSuccess;
}
ncclResult_t memSetAccess(void* va, size_t bytes, int dev) {
  RelaxedCapture relaxed;
  hipMemAccessDesc access = {};
  access.location.type = hipMemLocationTypeDevice;
  access.location.id = dev;
  access.flags = hipMemAccessFlagsProtReadWrite;
  GPU_TRY(hipMemSetAccess(va, bytes, &access, 1));
  return ncclSuccess;
}
ncclResult_t memUnmap(void* va, size_t bytes) {
  RelaxedCapture relaxed;
  GPU_TRY(hipMemUnmap(va, bytes));
  return ncclSuccess;
}
#else
// Older ROCm: vmmQuery answers "unsupported" (callers fall back or refuse,
// naming `why`); every other call is an error naming the missing feature.
namespace {
constexpr const char* kNoVmm = "HIP virtual memory management (hipMemCreate/hipMemMap with fd export) needs ROCm 6.0 "
                               "or newer: ROCm 5 has no device that reports it supported";
ncclResult_t noVmm(const char* call) {
  WARN("%s: %s (this runtime is HIP_VERSION %d)", call, kNoVmm, (int)HIP_VERSION);
  return ncclInvalidUsage;
}
}  // namespace
ncclResult_t vmmQuery(int, VmmInfo* info) {
  *info = VmmInfo{false, false, 0, kNoVmm};
  return ncclSuccess;
}
ncclResult_t memCreate(MemHandle*, size_t, int, bool) { return noVmm("memCreate"); }
ncclResult_t memRelease(MemHandle) { return noVmm("memRelease"); }
ncclResult_t memExportFd(MemHandle, int*) { return noVmm("memExportFd"); }
ncclResult_t memImportFd(int, MemHandle*) { return noVmm("memImportFd"); }
// Nothing is ever mapped here: no address is inside a VMM mapping.
bool memRetainAnyAddress() { return false; }
ncclResult_t memRetainFromAddress(const void*, MemHandle*, void**, size_t*) { return ncclInvalidArgument; }
ncclResult_t addressReserve(void**, size_t, size_t) { return noVmm("addressReserve"); }
ncclResult_t addressFree(void*, size_t) { return noVmm("addressFree"); }
ncclResult_t memMap(void*, size_t, MemHandle, int) { return noVmm("memMap"); }
ncclResult_t memSetAccess(void*, size_t, int) { return noVmm("memSetAccess"); }
ncclResult_t memUnmap(void*, size_t) { return noVmm("memUnmap"); }
#endif

// ------------------------------------------------------------------ kernels
// hipExtLaunchKernel signals `done` from the kernel's own completion packet:
// no separate event record is enqueued behind the launch.
// Without a done event (every captured launch) an ordinary launch: it is
// what stream capture records on every ROCm release.
ncclResult_t launchKernel(const void* kernel, const LaunchConfig& cfg, void** args, Event done) {
  if (done == nullptr) {
    GPU_TRY(hipLaunchKernel(kernel, dim3(cfg.gridX), dim3(cfg.blockX), args, cfg.sharedMemBytes,
                            (hipStream_t)cfg.stream));
    return ncclSuccess;
  }
  GPU_TRY(hipExtLaunchKernel(kernel, dim3(cfg.gridX), dim3(cfg.blockX), args, cfg.sharedMemBytes,
                             (hipStream_t)cfg.stream, nullptr, (hipEvent_t)done, 0));
  return ncclSuccess;
}
// HIP has no programmatic dependent launch: kernels always start after the
// previous kernel of their stream ended (LaunchConfig::programmatic ignored).
ncclResult_t programmaticLaunchSupported(const void*, bool* supported) {
  *supported = false;
  return ncclSuccess;
}
// HIP's runtime spreads streams over GPU_MAX_HW_QUEUES hardware queues.
const KnobSpec& backend::workQueuesKnob() { return kGPU_MAX_HW_QUEUES; }

ncclResult_t processesShareDevice(bool* concurrent, const char** how) {
  // Not established for ROCm here (no AMD GPU has run uniccl): ranks of
  // different processes on one GPU are refused rather than risked.
  *concurrent = false;
  *how = "not verified on ROCm";
  return ncclSuccess;
}

// ------------------------------------------------------------------- graphs
#if !UNICCL_HIP_HAS_USER_OBJECTS
// Before ROCm 5.3 (graph capture is refused there: graphCaptureSupported).
// Ownership of `arg` passes to this call: destroy(arg) runs before it returns.
ncclResult_t graphRetainNewUserObject(Graph, void (*destroy)(void*), void* arg) {
  destroy(arg);
  return missing("hipUserObjectCreate/hipGraphRetainUserObject");
}
#endif

}  // namespace uniccl::gpu
