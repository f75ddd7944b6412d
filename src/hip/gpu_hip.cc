// src/common/gpu.h over HIP. Thin by design: each function translates
// arguments and result codes and nothing more. Calls that older ROCm releases
// lack sit behind HIP_VERSION checks and answer ncclInvalidUsage there, with
// a WARN naming the missing runtime call.
#include <hip/hip_ext.h>
#include <hip/hip_runtime.h>
#include <hip/hip_version.h>
#include <hsa/hsa_ext_amd.h>   // HSA_AMD_LINK_INFO_TYPE_XGMI

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "common/check.h"
#include "common/gpu.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"
#include "hip/vmm_abi.h"

// First ROCm releases known to ship these calls (HIP_VERSION = major*1e7 + minor*1e5 + patch).
#define UNICCL_HIP_HAS_USER_OBJECTS (HIP_VERSION >= 50300000)
// 5.2 leaves hipExtLaunchKernel out of a capture, and has no user objects.
#define UNICCL_HIP_HAS_CAPTURE (HIP_VERSION >= 50300000)
#define UNICCL_HIP_HAS_MEMORY_TYPE_FIELD (HIP_VERSION >= 60000000)  // hipPointerAttribute_t::type
#define UNICCL_HIP_HAS_WALL_CLOCK_RATE (HIP_VERSION >= 60000000)  // hipDeviceAttributeWallClockRate
#define UNICCL_HIP_HAS_STACK_LIMIT (HIP_VERSION >= 60000000)  // hipLimitStackSize (5.2's hipLimit_t lacks it)
// Virtual memory (hipMemCreate .. hipMemUnmap, fd export): declared since
// ROCm 5.2 as "beta", but 5.2 has no attribute saying whether a device
// supports it and the ROCm 5 runtimes answer "no" for every device (bug
// ROCm/hip#3151, 5.4.2); CLR implements the calls over ROCr's vmem API from 6.0.
#define UNICCL_HIP_HAS_VMM (HIP_VERSION >= 60000000)
// Uncached VMM memory (hipMemAllocationTypeUncached): declared and served
// by hipMemCreate from ROCm 7.2; the runtime loaded must be as new.
#define UNICCL_HIP_HAS_UNCACHED_VMM (HIP_VERSION >= 70200000)
#define UNICCL_HIP_UNCACHED_VMM_RUNTIME 70200000

namespace uniccl::gpu {

static_assert(sizeof(hipIpcMemHandle_t) <= kIpcHandleBytes, "IpcMemHandle must hold hipIpcMemHandle_t");

namespace {

// Logs a failed runtime call once, where it happened, and clears the
// non-sticky error so the next unrelated check does not report it again.
ncclResult_t fail(const char* call, hipError_t err, ncclResult_t res = ncclUnhandledCudaError) {
  WARN("%s failed: %s", call, hipGetErrorString(err));
  (void)hipGetLastError();
  return res;
}

ncclResult_t failAlloc(const char* call, hipError_t err) {
  return fail(call, err, err == hipErrorOutOfMemory ? ncclSystemError : ncclUnhandledCudaError);
}

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

}  // namespace

#define HIP_TRY(call)                              \
  do {                                             \
    hipError_t uniccl_err_ = (call);               \
    if (uniccl_err_ != hipSuccess) return fail(#call, uniccl_err_); \
  } while (0)

// Calls the enqueue path makes while a stream of this (or, in global capture
// mode, any) thread may be capturing a graph: completion polling, graph-owned
// work buffers, freeing the buffers of destroyed graphs, and connecting to a
// peer first used inside a capture (allocation, IPC, copies). Global capture
// mode forbids them; they touch nothing the capture records, so run them
// relaxed.
class RelaxedCapture {
 public:
  // A failure to switch leaves the mode as it was: the guarded call then
  // reports the capture error itself.
  RelaxedCapture() { (void)hipThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { (void)hipThreadExchangeStreamCaptureMode(&mode_); }

 private:
  hipStreamCaptureMode mode_ = hipStreamCaptureModeRelaxed;
};

namespace {
// Synchronous copies and fills run on a private non-blocking stream of the
// current device, then wait for it: on the legacy stream they would wait for
// (and during a capture break) a blocking stream the application captures
// on. One stream per device, for the life of the process.
ncclResult_t privateStream(hipStream_t* out) {
  static std::mutex& mu = *new std::mutex();   // never destroyed: used until the process ends
  static std::map<int, hipStream_t>& streams = *new std::map<int, hipStream_t>();
  int dev = 0;
  HIP_TRY(hipGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  auto it = streams.find(dev);
  if (it == streams.end()) {
    hipStream_t s = nullptr;
    HIP_TRY(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    it = streams.emplace(dev, s).first;
  }
  *out = it->second;
  return ncclSuccess;
}
}  // namespace

// ------------------------------------------------------------------ devices
ncclResult_t getDeviceCount(int* count) {
  HIP_TRY(hipGetDeviceCount(count));
  return ncclSuccess;
}
ncclResult_t getDevice(int* dev) {
  HIP_TRY(hipGetDevice(dev));
  return ncclSuccess;
}
ncclResult_t setDevice(int dev) {
  HIP_TRY(hipSetDevice(dev));
  return ncclSuccess;
}

// Not finding the device is an expected answer (a peer's GPU hidden from
// this process), so it returns ncclInvalidArgument without a WARN.
ncclResult_t deviceGetByBusId(const char* busId, int* dev) {
  hipError_t e = hipDeviceGetByPCIBusId(dev, busId);
  if (e != hipSuccess) {
    (void)hipGetLastError();
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t getDeviceProps(int dev, DeviceProps* props) {
  hipDeviceProp_t p;
  HIP_TRY(hipGetDeviceProperties(&p, dev));
  DeviceProps out{};
  std::strncpy(out.name, p.name, sizeof(out.name) - 1);
  out.multiProcessorCount = p.multiProcessorCount;
  out.warpSize = p.warpSize;
  // No 128-byte store atomicity is promised to uniccl's LL128 on AMD GPUs
  // (RCCL enables LL128 per architecture, gfx90a/gfx942 with its own
  // checks): LL128 stays off on HIP (docs/amd.md).
  out.lineStoreAtomic128 = 0;
#if UNICCL_HIP_HAS_WALL_CLOCK_RATE
  int khz = 0;
  HIP_TRY(hipDeviceGetAttribute(&khz, hipDeviceAttributeWallClockRate, dev));
  out.timerRateKHz = khz > 0 ? khz : 100000;
#else
  out.timerRateKHz = 100000;   // the constant 100 MHz wall clock of gfx9, gfx10 and gfx11
#endif
  out.computeMajor = p.major;
  out.computeMinor = p.minor;
  out.totalGlobalMem = p.totalGlobalMem;
  out.pciDomain = p.pciDomainID;
  out.pciBus = p.pciBusID;
  out.pciDevice = p.pciDeviceID;
  out.canMapHostMemory = p.canMapHostMemory;
  out.concurrentManagedAccess = p.concurrentManagedAccess;
  HIP_TRY(hipDeviceGetPCIBusId(out.busId, sizeof(out.busId), dev));
  for (char* c = out.busId; *c; ++c) *c = (char)std::tolower((unsigned char)*c);
  *props = out;
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
  HIP_TRY(hipDeviceCanAccessPeer(&v, dev, peer));
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
  HIP_TRY(hipDeviceCanAccessPeer(&can, dev, peer));
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

ncclResult_t enablePeerAccess(int peer) {
  RelaxedCapture relaxed;
  hipError_t err = hipDeviceEnablePeerAccess(peer, 0);
  if (err == hipErrorPeerAccessAlreadyEnabled) {
    (void)hipGetLastError();
    return ncclSuccess;
  }
  if (err != hipSuccess) return fail("hipDeviceEnablePeerAccess", err);
  return ncclSuccess;
}

// ------------------------------------------------------------------ streams
ncclResult_t streamCreate(Stream* s) {
  RelaxedCapture relaxed;  // may come during a capture (the side stream, core/side_stream.h)
  hipStream_t st;
  HIP_TRY(hipStreamCreateWithFlags(&st, hipStreamNonBlocking));
  *s = st;
  return ncclSuccess;
}
ncclResult_t streamDestroy(Stream s) {
  HIP_TRY(hipStreamDestroy((hipStream_t)s));
  return ncclSuccess;
}
ncclResult_t streamSynchronize(Stream s) {
  HIP_TRY(hipStreamSynchronize((hipStream_t)s));
  return ncclSuccess;
}
ncclResult_t streamWaitEvent(Stream s, Event e) {
  HIP_TRY(hipStreamWaitEvent((hipStream_t)s, (hipEvent_t)e, 0));
  return ncclSuccess;
}

ncclResult_t streamGetCaptureInfo(Stream s, CaptureInfo* info) {
  hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
  unsigned long long id = 0;
  hipGraph_t graph = nullptr;
  HIP_TRY(hipStreamGetCaptureInfo_v2((hipStream_t)s, &status, &id, &graph, nullptr, nullptr));
  CaptureInfo out{};
  switch (status) {
    case hipStreamCaptureStatusActive: out.status = CaptureStatus::Active; break;
    case hipStreamCaptureStatusInvalidated: out.status = CaptureStatus::Invalidated; break;
    default: out.status = CaptureStatus::None; break;
  }
  out.graphId = out.status == CaptureStatus::None ? 0 : id;
  out.graph = out.status == CaptureStatus::Active ? graph : nullptr;
  *info = out;
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

// ------------------------------------------------------------------- events
ncclResult_t eventCreate(Event* e, unsigned flags) {
  RelaxedCapture relaxed;
  unsigned f = hipEventDefault;
  if (flags & kEventDisableTiming) f |= hipEventDisableTiming;
  if (flags & kEventInterprocess) f |= hipEventInterprocess;
  if (flags & kEventBlockingSync) f |= hipEventBlockingSync;
  hipEvent_t ev;
  HIP_TRY(hipEventCreateWithFlags(&ev, f));
  *e = ev;
  return ncclSuccess;
}
ncclResult_t eventDestroy(Event e) {
  HIP_TRY(hipEventDestroy((hipEvent_t)e));
  return ncclSuccess;
}
ncclResult_t eventRecord(Event e, Stream s) {
  HIP_TRY(hipEventRecord((hipEvent_t)e, (hipStream_t)s));
  return ncclSuccess;
}
ncclResult_t eventQuery(Event e) {
  RelaxedCapture relaxed;
  hipError_t err = hipEventQuery((hipEvent_t)e);
  if (err == hipSuccess) return ncclSuccess;
  if (err == hipErrorNotReady) return ncclInProgress;  // not an error: nothing to clear
  return fail("hipEventQuery", err);
}
ncclResult_t eventSynchronize(Event e) {
  HIP_TRY(hipEventSynchronize((hipEvent_t)e));
  return ncclSuccess;
}

// ------------------------------------------------------------------- memory
ncclResult_t deviceAlloc(void** ptr, size_t bytes) {
  RelaxedCapture relaxed;
  HIP_TRY(hipMalloc(ptr, bytes));
  return ncclSuccess;
}
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
ncclResult_t deviceFree(void* ptr) {
  RelaxedCapture relaxed;
  HIP_TRY(hipFree(ptr));
  return ncclSuccess;
}
// Coherent (fine-grained) whatever HIP_HOST_COHERENT says: the host and the
// kernels poll this memory while kernels run.
ncclResult_t hostAllocMapped(void** hostPtr, void** devPtr, size_t bytes) {
  RelaxedCapture relaxed;
  void* h = nullptr;
  hipError_t err = hipHostMalloc(&h, bytes, hipHostMallocMapped | hipHostMallocPortable | hipHostMallocCoherent);
  if (err != hipSuccess) return failAlloc("hipHostMalloc(mapped)", err);
  void* d = nullptr;
  err = hipHostGetDevicePointer(&d, h, 0);
  if (err != hipSuccess) {
    ncclResult_t res = fail("hipHostGetDevicePointer", err);
    (void)hipHostFree(h);
    return res;
  }
  *hostPtr = h;
  *devPtr = d;
  return ncclSuccess;
}
ncclResult_t hostFree(void* ptr) {
  RelaxedCapture relaxed;
  HIP_TRY(hipHostFree(ptr));
  return ncclSuccess;
}
ncclResult_t hostRegister(void* ptr, size_t bytes, void** devPtr) {
  RelaxedCapture relaxed;
  HIP_TRY(hipHostRegister(ptr, bytes, hipHostRegisterMapped | hipHostRegisterPortable));
  void* d = nullptr;
  hipError_t err = hipHostGetDevicePointer(&d, ptr, 0);
  if (err != hipSuccess) {
    ncclResult_t res = fail("hipHostGetDevicePointer", err);
    (void)hipHostUnregister(ptr);
    return res;
  }
  *devPtr = d;
  return ncclSuccess;
}
ncclResult_t hostUnregister(void* ptr) {
  RelaxedCapture relaxed;
  HIP_TRY(hipHostUnregister(ptr));
  return ncclSuccess;
}
ncclResult_t memcpyAsync(void* dst, const void* src, size_t bytes, Stream s) {
  HIP_TRY(hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, (hipStream_t)s));
  return ncclSuccess;
}
ncclResult_t memcpy(void* dst, const void* src, size_t bytes) {
  RelaxedCapture relaxed;
  hipStream_t s;
  UCHECK(privateStream(&s));
  HIP_TRY(hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, s));
  HIP_TRY(hipStreamSynchronize(s));
  return ncclSuccess;
}
ncclResult_t memset(void* dst, int value, size_t bytes) {
  RelaxedCapture relaxed;
  hipStream_t s;
  UCHECK(privateStream(&s));
  HIP_TRY(hipMemsetAsync(dst, value, bytes, s));
  HIP_TRY(hipStreamSynchronize(s));
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
  HIP_TRY(hipMemGetAddressRange(&b, &n, (hipDeviceptr_t)ptr));
  *base = (void*)b;
  *size = n;
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
  HIP_TRY(hipDeviceGetAttribute(&vmm, hipDeviceAttributeVirtualMemoryManagementSupported, dev));
  if (vmm == 0) {
    *info = VmmInfo{false, false, 0, "the GPU or its driver does not support virtual memory management "
                    "(hipDeviceAttributeVirtualMemoryManagementSupported is 0)"};
    return ncclSuccess;
  }
  const hipMemAllocationProp prop = allocationProp(dev);
  size_t granularity = 0;
  HIP_TRY(hipMemGetAllocationGranularity(&granularity, &prop, hipMemAllocationGranularityMinimum));
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
    HIP_TRY(hipMemGetAllocationGranularity(&g, &polledProp, hipMemAllocationGranularityMinimum));
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
  HIP_TRY(hipMemCreate(&h, bytes, &prop, 0));
  *handle = fromHip(h);
  return ncclSuccess;
}
ncclResult_t memRelease(MemHandle handle) {
  RelaxedCapture relaxed;
  HIP_TRY(hipMemRelease(toHip(handle)));
  return ncclSuccess;
}
ncclResult_t memExportFd(MemHandle handle, int* fd) {
  int out = -1;
  HIP_TRY(hipMemExportToShareableHandle(&out, toHip(handle), hipMemHandleTypePosixFileDescriptor, 0));
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
  HIP_TRY(hipMemImportFromShareableHandle(&h, hipabi::shareableFdArgument(version, &value),
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
  HIP_TRY(hipMemAddressReserve(va, bytes, align, nullptr, 0));
  return ncclSuccess;
}
ncclResult_t addressFree(void* va, size_t bytes) {
  RelaxedCapture relaxed;
  HIP_TRY(hipMemAddressFree(va, bytes));
  return ncclSuccess;
}
ncclResult_t memMap(void* va, size_t bytes, MemHandle handle, int dev) {
  RelaxedCapture relaxed;
  HIP_TRY(hipMemMap(va, bytes, 0, toHip(handle), 0));
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
  HIP_TRY(hipMemSetAccess(va, bytes, &access, 1));
  return ncclSuccess;
}
ncclResult_t memUnmap(void* va, size_t bytes) {
  RelaxedCapture relaxed;
  HIP_TRY(hipMemUnmap(va, bytes));
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

// -------------------------------------------------------------- IPC handles
ncclResult_t ipcGetMemHandle(IpcMemHandle* handle, void* devPtr) {
  RelaxedCapture relaxed;
  hipIpcMemHandle_t h;
  HIP_TRY(hipIpcGetMemHandle(&h, devPtr));
  IpcMemHandle out{};
  std::memcpy(out.bytes, &h, sizeof(h));
  *handle = out;
  return ncclSuccess;
}
ncclResult_t ipcOpenMemHandle(void** devPtr, const IpcMemHandle& handle) {
  RelaxedCapture relaxed;
  hipIpcMemHandle_t h;
  std::memcpy(&h, handle.bytes, sizeof(h));
  HIP_TRY(hipIpcOpenMemHandle(devPtr, h, hipIpcMemLazyEnablePeerAccess));
  return ncclSuccess;
}
ncclResult_t ipcCloseMemHandle(void* devPtr) {
  RelaxedCapture relaxed;
  HIP_TRY(hipIpcCloseMemHandle(devPtr));
  return ncclSuccess;
}

// ------------------------------------------------------------------ kernels
// hipExtLaunchKernel signals `done` from the kernel's own completion packet:
// no separate event record is enqueued behind the launch.
// Without a done event (every captured launch) an ordinary launch: it is
// what stream capture records on every ROCm release.
ncclResult_t launchKernel(const void* kernel, const LaunchConfig& cfg, void** args, Event done) {
  if (done == nullptr) {
    HIP_TRY(hipLaunchKernel(kernel, dim3(cfg.gridX), dim3(cfg.blockX), args, cfg.sharedMemBytes,
                            (hipStream_t)cfg.stream));
    return ncclSuccess;
  }
  HIP_TRY(hipExtLaunchKernel(kernel, dim3(cfg.gridX), dim3(cfg.blockX), args, cfg.sharedMemBytes,
                             (hipStream_t)cfg.stream, nullptr, (hipEvent_t)done, 0));
  return ncclSuccess;
}
ncclResult_t preloadKernel(const void* kernel) {
  hipFuncAttributes attr;
  HIP_TRY(hipFuncGetAttributes(&attr, kernel));
#if UNICCL_HIP_HAS_STACK_LIMIT
  // Reserve the kernel's per-thread stack now, as the CUDA backend does: a
  // first launch that has to grow it waits for the kernels already running
  // on this GPU, which may spin on a peer this thread has yet to launch.
  size_t stack = 0;
  HIP_TRY(hipDeviceGetLimit(&stack, hipLimitStackSize));
  if ((size_t)attr.localSizeBytes > stack) HIP_TRY(hipDeviceSetLimit(hipLimitStackSize, attr.localSizeBytes));
#endif
  return ncclSuccess;
}
// HIP has no programmatic dependent launch: kernels always start after the
// previous kernel of their stream ended (LaunchConfig::programmatic ignored).
ncclResult_t programmaticLaunchSupported(const void*, bool* supported) {
  *supported = false;
  return ncclSuccess;
}
ncclResult_t kernelResidentBlocks(const void* kernel, unsigned blockThreads, int* blocks) {
  int dev = 0, perCu = 0, cus = 0;
  HIP_TRY(hipGetDevice(&dev));
  HIP_TRY(hipDeviceGetAttribute(&cus, hipDeviceAttributeMultiprocessorCount, dev));
  HIP_TRY(hipOccupancyMaxActiveBlocksPerMultiprocessor(&perCu, kernel, (int)blockThreads, 0));
  *blocks = perCu * cus;
  return ncclSuccess;
}
namespace {
#define UNICCL_KNOB UNICCL_KNOB_CONSTANT
#include "hip/knobs.def"
#undef UNICCL_KNOB
}  // namespace

WorkQueues workQueues() {
  // HIP's runtime spreads streams over GPU_MAX_HW_QUEUES hardware queues (default 4).
  const KnobSpec& k = kGPU_MAX_HW_QUEUES;
  const char* v = knobValue(k);
  int n = v != nullptr ? atoi(v) : (int)k.intDefault;
  return WorkQueues{n > 0 ? n : (int)k.intDefault, k.name};
}
ncclResult_t processesShareDevice(bool* concurrent, const char** how) {
  // Not established for ROCm here (no AMD GPU has run uniccl): ranks of
  // different processes on one GPU are refused rather than risked.
  *concurrent = false;
  *how = "not verified on ROCm";
  return ncclSuccess;
}

// ------------------------------------------------------------------- graphs
// Ownership of `arg` always passes to this call: destroy(arg) runs exactly
// once, when the graph goes away or, on any failure, by the time this
// returns (or when the runtime drops the object we release).
ncclResult_t graphRetainNewUserObject(Graph g, void (*destroy)(void*), void* arg) {
#if UNICCL_HIP_HAS_USER_OBJECTS
  hipUserObject_t obj = nullptr;
  hipError_t err = hipUserObjectCreate(&obj, arg, destroy, 1, hipUserObjectNoDestructorSync);
  if (err != hipSuccess) {
    ncclResult_t res = fail("hipUserObjectCreate", err);
    destroy(arg);
    return res;
  }
  err = hipGraphRetainUserObject((hipGraph_t)g, obj, 1, hipGraphUserObjectMove);
  if (err != hipSuccess) {
    ncclResult_t res = fail("hipGraphRetainUserObject", err);
    (void)hipUserObjectRelease(obj, 1);
    return res;
  }
  return ncclSuccess;
#else
  destroy(arg);
  return missing("hipUserObjectCreate/hipGraphRetainUserObject");
#endif
}

}  // namespace uniccl::gpu
