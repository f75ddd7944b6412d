// src/common/gpu.h over the CUDA runtime. Thin by design: each function
// translates arguments and result codes and nothing more, so that behaviour
// lives in src/common where both backends (and the unit-test fake) share it.
#include <cuda.h>
#include <cuda_runtime.h>

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "common/check.h"
#include "common/gpu.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl::gpu {

static_assert(sizeof(cudaIpcMemHandle_t) <= kIpcHandleBytes, "IpcMemHandle must hold cudaIpcMemHandle_t");

namespace {

// Logs a failed runtime call once, where it happened, and clears the
// non-sticky error so the next unrelated check does not report it again.
ncclResult_t fail(const char* call, cudaError_t err, ncclResult_t res = ncclUnhandledCudaError) {
  WARN("%s failed: %s", call, cudaGetErrorString(err));
  (void)cudaGetLastError();
  return res;
}

// Host allocations that fail for lack of memory are a system error, not a GPU one.
ncclResult_t failAlloc(const char* call, cudaError_t err) {
  return fail(call, err, err == cudaErrorMemoryAllocation ? ncclSystemError : ncclUnhandledCudaError);
}

}  // namespace

#define CUDA_TRY(call)                              \
  do {                                              \
    cudaError_t uniccl_err_ = (call);               \
    if (uniccl_err_ != cudaSuccess) return fail(#call, uniccl_err_); \
  } while (0)

// Calls the enqueue path makes while a stream of this (or, in global capture
// mode, any) thread may be capturing a graph: completion polling, graph-owned
// work buffers, freeing the buffers of destroyed graphs, and connecting to a
// peer first used inside a capture (allocation, IPC, copies). Global capture
// mode forbids them; they touch nothing the capture records, so run them
// relaxed.
class RelaxedCapture {
 public:
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

namespace {
// Synchronous copies and fills run on a private non-blocking stream of the
// current device, then wait for it: on the legacy stream they would wait for
// (and during a capture break) a blocking stream the application captures
// on. One stream per device, for the life of the process.
ncclResult_t privateStream(cudaStream_t* out) {
  static std::mutex& mu = *new std::mutex();   // never destroyed: used until the process ends
  static std::map<int, cudaStream_t>& streams = *new std::map<int, cudaStream_t>();
  int dev = 0;
  CUDA_TRY(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  auto it = streams.find(dev);
  if (it == streams.end()) {
    cudaStream_t s = nullptr;
    CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    it = streams.emplace(dev, s).first;
  }
  *out = it->second;
  return ncclSuccess;
}
}  // namespace

// ------------------------------------------------------------------ devices
ncclResult_t getDeviceCount(int* count) {
  CUDA_TRY(cudaGetDeviceCount(count));
  return ncclSuccess;
}
ncclResult_t getDevice(int* dev) {
  CUDA_TRY(cudaGetDevice(dev));
  return ncclSuccess;
}
ncclResult_t setDevice(int dev) {
  CUDA_TRY(cudaSetDevice(dev));
  return ncclSuccess;
}

// Not finding the device is an expected answer (a peer's GPU hidden from
// this process), so it returns ncclInvalidArgument without a WARN.
ncclResult_t deviceGetByBusId(const char* busId, int* dev) {
  cudaError_t e = cudaDeviceGetByPCIBusId(dev, busId);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t getDeviceProps(int dev, DeviceProps* props) {
  cudaDeviceProp p;
  CUDA_TRY(cudaGetDeviceProperties(&p, dev));
  DeviceProps out{};
  static_assert(sizeof(out.name) <= sizeof(p.name), "name buffer");
  std::memcpy(out.name, p.name, sizeof(out.name));
  out.name[sizeof(out.name) - 1] = '\0';
  out.multiProcessorCount = p.multiProcessorCount;
  out.warpSize = p.warpSize;
  out.timerRateKHz = 1000000;   // %globaltimer counts nanoseconds
  out.computeMajor = p.major;
  out.computeMinor = p.minor;
  // Volta and later deliver a warp's aligned 128-byte store to an NVLink
  // peer as one unit (NCCL's LL128 assumption; device/port.h).
  out.lineStoreAtomic128 = p.major >= 7 ? 1 : 0;
  out.totalGlobalMem = p.totalGlobalMem;
  out.pciDomain = p.pciDomainID;
  out.pciBus = p.pciBusID;
  out.pciDevice = p.pciDeviceID;
  out.canMapHostMemory = p.canMapHostMemory;
  out.concurrentManagedAccess = p.concurrentManagedAccess;
  CUDA_TRY(cudaDeviceGetPCIBusId(out.busId, sizeof(out.busId), dev));
  for (char* c = out.busId; *c; ++c) *c = (char)std::tolower((unsigned char)*c);
  *props = out;
  return ncclSuccess;
}

ncclResult_t canAccessPeer(int dev, int peer, bool* can) {
  int v = 0;
  CUDA_TRY(cudaDeviceCanAccessPeer(&v, dev, peer));
  *can = v != 0;
  return ncclSuccess;
}

ncclResult_t p2pLinkKeepsLines(int dev, int peer, bool* whole) {
  // Native P2P atomics: NVLink (and NVSwitch); PCIe P2P answers 0.
  int v = 0;
  CUDA_TRY(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrNativeAtomicSupported, dev, peer));
  *whole = v != 0;
  return ncclSuccess;
}

ncclResult_t peerLinkKind(int dev, int peer, int* kind, int* count) {
  int can = 0, atomics = 0;
  CUDA_TRY(cudaDeviceCanAccessPeer(&can, dev, peer));
  if (can != 0) CUDA_TRY(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, dev, peer));
  *kind = can == 0 ? kPeerLinkNone : atomics != 0 ? kPeerLinkSwitch : kPeerLinkPcie;
  *count = 0;   // NVLink lanes need NVML
  return ncclSuccess;
}

ncclResult_t enablePeerAccess(int peer) {
  RelaxedCapture relaxed;
  cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
    return ncclSuccess;
  }
  if (err != cudaSuccess) return fail("cudaDeviceEnablePeerAccess", err);
  return ncclSuccess;
}

// ------------------------------------------------------------------ streams
ncclResult_t streamCreate(Stream* s) {
  RelaxedCapture relaxed;  // may come during a capture (the side stream, core/side_stream.h)
  cudaStream_t st;
  CUDA_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  *s = st;
  return ncclSuccess;
}
ncclResult_t streamDestroy(Stream s) {
  CUDA_TRY(cudaStreamDestroy((cudaStream_t)s));
  return ncclSuccess;
}
ncclResult_t streamSynchronize(Stream s) {
  CUDA_TRY(cudaStreamSynchronize((cudaStream_t)s));
  return ncclSuccess;
}
ncclResult_t streamWaitEvent(Stream s, Event e) {
  CUDA_TRY(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0));
  return ncclSuccess;
}

ncclResult_t streamGetCaptureInfo(Stream s, CaptureInfo* info) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaGraph_t graph = nullptr;
  CUDA_TRY(cudaStreamGetCaptureInfo((cudaStream_t)s, &status, &id, &graph));
  CaptureInfo out{};
  switch (status) {
    case cudaStreamCaptureStatusActive: out.status = CaptureStatus::Active; break;
    case cudaStreamCaptureStatusInvalidated: out.status = CaptureStatus::Invalidated; break;
    default: out.status = CaptureStatus::None; break;
  }
  out.graphId = out.status == CaptureStatus::None ? 0 : id;
  out.graph = out.status == CaptureStatus::Active ? graph : nullptr;
  *info = out;
  return ncclSuccess;
}

bool graphCaptureSupported(const char** why) {
  *why = nullptr;
  return true;
}

// ------------------------------------------------------------------- events
ncclResult_t eventCreate(Event* e, unsigned flags) {
  RelaxedCapture relaxed;
  unsigned f = cudaEventDefault;
  if (flags & kEventDisableTiming) f |= cudaEventDisableTiming;
  if (flags & kEventInterprocess) f |= cudaEventInterprocess;
  if (flags & kEventBlockingSync) f |= cudaEventBlockingSync;
  cudaEvent_t ev;
  CUDA_TRY(cudaEventCreateWithFlags(&ev, f));
  *e = ev;
  return ncclSuccess;
}
ncclResult_t eventDestroy(Event e) {
  CUDA_TRY(cudaEventDestroy((cudaEvent_t)e));
  return ncclSuccess;
}
ncclResult_t eventRecord(Event e, Stream s) {
  CUDA_TRY(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s));
  return ncclSuccess;
}
ncclResult_t eventQuery(Event e) {
  RelaxedCapture relaxed;
  cudaError_t err = cudaEventQuery((cudaEvent_t)e);
  if (err == cudaSuccess) return ncclSuccess;
  if (err == cudaErrorNotReady) return ncclInProgress;  // not an error: nothing to clear
  return fail("cudaEventQuery", err);
}
ncclResult_t eventSynchronize(Event e) {
  CUDA_TRY(cudaEventSynchronize((cudaEvent_t)e));
  return ncclSuccess;
}

// ------------------------------------------------------------------- memory
ncclResult_t deviceAlloc(void** ptr, size_t bytes) {
  RelaxedCapture relaxed;
  CUDA_TRY(cudaMalloc(ptr, bytes));
  return ncclSuccess;
}
// NVIDIA GPUs keep peer-visible device memory coherent through L2 (the
// kernels' .sys fences and .cg loads do the rest): ordinary memory.
ncclResult_t deviceAllocPolled(void** ptr, size_t bytes) { return deviceAlloc(ptr, bytes); }
ncclResult_t deviceFree(void* ptr) {
  RelaxedCapture relaxed;
  CUDA_TRY(cudaFree(ptr));
  return ncclSuccess;
}
ncclResult_t hostAllocMapped(void** hostPtr, void** devPtr, size_t bytes) {
  RelaxedCapture relaxed;
  void* h = nullptr;
  cudaError_t err = cudaHostAlloc(&h, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  if (err != cudaSuccess) return failAlloc("cudaHostAlloc(mapped)", err);
  void* d = nullptr;
  err = cudaHostGetDevicePointer(&d, h, 0);
  if (err != cudaSuccess) {
    ncclResult_t res = fail("cudaHostGetDevicePointer", err);
    (void)cudaFreeHost(h);
    return res;
  }
  *hostPtr = h;
  *devPtr = d;
  return ncclSuccess;
}
ncclResult_t hostFree(void* ptr) {
  RelaxedCapture relaxed;
  CUDA_TRY(cudaFreeHost(ptr));
  return ncclSuccess;
}
ncclResult_t hostRegister(void* ptr, size_t bytes, void** devPtr) {
  RelaxedCapture relaxed;
  CUDA_TRY(cudaHostRegister(ptr, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  void* d = nullptr;
  cudaError_t err = cudaHostGetDevicePointer(&d, ptr, 0);
  if (err != cudaSuccess) {
    ncclResult_t res = fail("cudaHostGetDevicePointer", err);
    (void)cudaHostUnregister(ptr);
    return res;
  }
  *devPtr = d;
  return ncclSuccess;
}
ncclResult_t hostUnregister(void* ptr) {
  RelaxedCapture relaxed;
  CUDA_TRY(cudaHostUnregister(ptr));
  return ncclSuccess;
}
ncclResult_t memcpyAsync(void* dst, const void* src, size_t bytes, Stream s) {
  CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)s));
  return ncclSuccess;
}
ncclResult_t memcpy(void* dst, const void* src, size_t bytes) {
  RelaxedCapture relaxed;
  cudaStream_t s;
  UCHECK(privateStream(&s));
  CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  CUDA_TRY(cudaStreamSynchronize(s));
  return ncclSuccess;
}
ncclResult_t memset(void* dst, int value, size_t bytes) {
  RelaxedCapture relaxed;
  cudaStream_t s;
  UCHECK(privateStream(&s));
  CUDA_TRY(cudaMemsetAsync(dst, value, bytes, s));
  CUDA_TRY(cudaStreamSynchronize(s));
  return ncclSuccess;
}

ncclResult_t pointerGetInfo(const void* ptr, PointerInfo* info) {
  cudaPointerAttributes a;
  CUDA_TRY(cudaPointerGetAttributes(&a, ptr));
  PointerInfo out{MemoryKind::Unregistered, -1};
  switch (a.type) {
    case cudaMemoryTypeHost: out.kind = MemoryKind::Host; break;
    case cudaMemoryTypeDevice: out.kind = MemoryKind::Device; out.device = a.device; break;
    case cudaMemoryTypeManaged: out.kind = MemoryKind::Managed; out.device = a.device; break;
    default: break;
  }
  *info = out;
  return ncclSuccess;
}

// ------------------------------------------------------------ driver calls
// The runtime API has no address-range query and no virtual-memory calls;
// the driver's are reached through the runtime's entry-point lookup so that
// libcuda need not be linked. Looked up once, on first use.
namespace {
struct Driver {
  decltype(&::cuGetErrorString) getErrorString = nullptr;
  decltype(&::cuDeviceGet) deviceGet = nullptr;
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute = nullptr;
  decltype(&::cuMemGetAddressRange) getAddressRange = nullptr;
  decltype(&::cuMemGetAllocationGranularity) getAllocationGranularity = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemExportToShareableHandle) exportToShareableHandle = nullptr;
  decltype(&::cuMemImportFromShareableHandle) importFromShareableHandle = nullptr;
  decltype(&::cuMemRetainAllocationHandle) retainAllocationHandle = nullptr;
  decltype(&::cuMemAddressReserve) addressReserve = nullptr;
  decltype(&::cuMemAddressFree) addressFree = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemSetAccess) setAccess = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  const char* missing = nullptr;   // the first virtual-memory entry point not found (nullptr: all found)
  char why[192] = {};              // VmmInfo::why when one is missing
};

template <typename Fn>
bool lookup(const char* symbol, Fn* out) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  *out = reinterpret_cast<Fn>(p);
  return true;
}

const Driver& driver() {
  static const Driver d = [] {
    Driver r;
    lookup("cuGetErrorString", &r.getErrorString);
    lookup("cuMemGetAddressRange", &r.getAddressRange);
    struct Entry { const char* name; bool found; };
    const Entry vmm[] = {
        {"cuDeviceGet", lookup("cuDeviceGet", &r.deviceGet)},
        {"cuDeviceGetAttribute", lookup("cuDeviceGetAttribute", &r.deviceGetAttribute)},
        {"cuMemGetAllocationGranularity", lookup("cuMemGetAllocationGranularity", &r.getAllocationGranularity)},
        {"cuMemCreate", lookup("cuMemCreate", &r.create)},
        {"cuMemRelease", lookup("cuMemRelease", &r.release)},
        {"cuMemExportToShareableHandle", lookup("cuMemExportToShareableHandle", &r.exportToShareableHandle)},
        {"cuMemImportFromShareableHandle", lookup("cuMemImportFromShareableHandle", &r.importFromShareableHandle)},
        {"cuMemRetainAllocationHandle", lookup("cuMemRetainAllocationHandle", &r.retainAllocationHandle)},
        {"cuMemAddressReserve", lookup("cuMemAddressReserve", &r.addressReserve)},
        {"cuMemAddressFree", lookup("cuMemAddressFree", &r.addressFree)},
        {"cuMemMap", lookup("cuMemMap", &r.map)},
        {"cuMemSetAccess", lookup("cuMemSetAccess", &r.setAccess)},
        {"cuMemUnmap", lookup("cuMemUnmap", &r.unmap)},
        {"cuMemGetAddressRange", r.getAddressRange != nullptr},
    };
    for (const Entry& e : vmm) {
      if (!e.found) {
        r.missing = e.name;
        std::snprintf(r.why, sizeof(r.why), "the CUDA driver has no %s entry point (driver too old for virtual "
                      "memory management)", e.name);
        break;
      }
    }
    return r;
  }();
  return d;
}

// Logs a failed driver call once, where it happened.
ncclResult_t cuFail(const char* call, CUresult r) {
  const char* msg = nullptr;
  if (driver().getErrorString == nullptr || driver().getErrorString(r, &msg) != CUDA_SUCCESS || msg == nullptr)
    msg = "unknown error";
  WARN("%s failed: %s (CUresult %d)", call, msg, (int)r);
  return ncclUnhandledCudaError;
}

// Driver calls act on the calling thread's current context. The runtime makes
// the device's primary context current only at its first call that needs one,
// so a thread that has only asked cudaGetDevice (a group's worker running a
// window registration for its communicator) has none yet, and the driver
// answers CUDA_ERROR_INVALID_CONTEXT. cudaSetDevice makes it current (CUDA 12).
ncclResult_t bindThreadContext() {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaSetDevice(dev);
  if (e != cudaSuccess) {
    WARN("binding the current GPU's context to this thread failed: %s", cudaGetErrorString(e));
    (void)cudaGetLastError();
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

// The virtual-memory entry points, or a WARN naming the one the driver lacks;
// the calling thread's context bound.
ncclResult_t vmmDriver(const char* call, const Driver** out) {
  const Driver& d = driver();
  if (d.missing != nullptr) {
    WARN("%s: %s", call, d.why);
    return ncclUnhandledCudaError;
  }
  UCHECK(bindThreadContext());
  *out = &d;
  return ncclSuccess;
}

// What memCreate asks for on `dev`: pinned device memory, exportable as a
// POSIX file descriptor and registrable for GPUDirect RDMA where the device
// supports each.
ncclResult_t allocationProp(const Driver& d, int dev, CUmemAllocationProp* prop, bool* fdExport) {
  CUdevice cuDev = 0;
  int fd = 0, rdma = 0;
  CUresult r = d.deviceGet(&cuDev, dev);
  if (r != CUDA_SUCCESS) return cuFail("cuDeviceGet", r);
  r = d.deviceGetAttribute(&fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, cuDev);
  if (r != CUDA_SUCCESS) return cuFail("cuDeviceGetAttribute(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)", r);
  r = d.deviceGetAttribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, cuDev);
  if (r != CUDA_SUCCESS) return cuFail("cuDeviceGetAttribute(GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED)", r);
  CUmemAllocationProp p = {};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = dev;
  p.requestedHandleTypes = fd != 0 ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  p.allocFlags.gpuDirectRDMACapable = rdma != 0 ? 1 : 0;
  *prop = p;
  *fdExport = fd != 0;
  return ncclSuccess;
}
}  // namespace

#define CU_TRY(call)                                 \
  do {                                               \
    CUresult uniccl_cu_ = (call);                    \
    if (uniccl_cu_ != CUDA_SUCCESS) return cuFail(#call, uniccl_cu_); \
  } while (0)

ncclResult_t memGetAddressRange(const void* ptr, void** base, size_t* size) {
  const Driver& d = driver();
  if (d.getAddressRange == nullptr) {
    WARN("cudaGetDriverEntryPointByVersion(cuMemGetAddressRange) failed: driver entry point not found");
    return ncclUnhandledCudaError;
  }
  UCHECK(bindThreadContext());
  CUdeviceptr b = 0;
  size_t n = 0;
  CUresult r = d.getAddressRange(&b, &n, (CUdeviceptr)(uintptr_t)ptr);
  if (r != CUDA_SUCCESS) {
    WARN("cuMemGetAddressRange(%p) failed: CUresult %d", ptr, (int)r);
    return ncclUnhandledCudaError;
  }
  *base = (void*)(uintptr_t)b;
  *size = n;
  return ncclSuccess;
}

// ---------------------------------------------------------- virtual memory
ncclResult_t vmmQuery(int dev, VmmInfo* info) {
  const Driver& d = driver();
  if (d.missing != nullptr) {
    *info = VmmInfo{false, false, 0, d.why};
    return ncclSuccess;
  }
  CUdevice cuDev = 0;
  int vmm = 0;
  CU_TRY(d.deviceGet(&cuDev, dev));
  CU_TRY(d.deviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cuDev));
  if (vmm == 0) {
    *info = VmmInfo{false, false, 0, "the GPU or its driver does not support virtual memory management "
                    "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0)"};
    return ncclSuccess;
  }
  CUmemAllocationProp prop;
  bool fd = false;
  UCHECK(allocationProp(d, dev, &prop, &fd));
  size_t granularity = 0;
  CU_TRY(d.getAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  *info = VmmInfo{true, fd, granularity,
                  fd ? nullptr : "the driver cannot export this GPU's allocations as POSIX file descriptors "
                                 "(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED is 0)"};
  info->polled = true;   // ordinary device memory is what peers poll on CUDA
  return ncclSuccess;
}

ncclResult_t memCreate(MemHandle* handle, size_t bytes, int dev, bool /*polled: any memory on CUDA*/) {
  RelaxedCapture relaxed;
  const Driver* d;
  UCHECK(vmmDriver("memCreate", &d));
  CUmemAllocationProp prop;
  bool fd = false;
  UCHECK(allocationProp(*d, dev, &prop, &fd));
  CUmemGenericAllocationHandle h = 0;
  CU_TRY(d->create(&h, bytes, &prop, 0));
  *handle = (MemHandle)h;
  return ncclSuccess;
}

ncclResult_t memRelease(MemHandle handle) {
  RelaxedCapture relaxed;
  const Driver* d;
  UCHECK(vmmDriver("memRelease", &d));
  CU_TRY(d->release((CUmemGenericAllocationHandle)handle));
  return ncclSuccess;
}

ncclResult_t memExportFd(MemHandle handle, int* fd) {
  const Driver* d;
  UCHECK(vmmDriver("memExportFd", &d));
  int out = -1;
  CU_TRY(d->exportToShareableHandle(&out, (CUmemGenericAllocationHandle)handle,
                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  *fd = out;
  return ncclSuccess;
}

ncclResult_t memImportFd(int fd, MemHandle* handle) {
  const Driver* d;
  UCHECK(vmmDriver("memImportFd", &d));
  CUmemGenericAllocationHandle h = 0;
  CU_TRY(d->importFromShareableHandle(&h, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  *handle = (MemHandle)h;
  return ncclSuccess;
}

bool memRetainAnyAddress() { return true; }   // see memRetainFromAddress's answers below

// CUDA_ERROR_INVALID_VALUE is the driver's answer for an address outside
// every VMM mapping (cudaMalloc memory, host memory), NOT_SUPPORTED where the
// device has no VMM at all: answers, not failures (nor is a driver without
// the entry points).
ncclResult_t memRetainFromAddress(const void* ptr, MemHandle* handle, void** mapBase, size_t* mapBytes) {
  const Driver* d = &driver();
  if (d->missing != nullptr) return ncclInvalidArgument;   // no VMM in this driver: nothing is mapped
  UCHECK(bindThreadContext());
  CUmemGenericAllocationHandle h = 0;
  CUresult r = d->retainAllocationHandle(&h, const_cast<void*>(ptr));
  if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_NOT_SUPPORTED) return ncclInvalidArgument;
  if (r != CUDA_SUCCESS) return cuFail("cuMemRetainAllocationHandle", r);
  CUdeviceptr b = 0;
  size_t n = 0;
  r = d->getAddressRange(&b, &n, (CUdeviceptr)(uintptr_t)ptr);
  if (r != CUDA_SUCCESS) {
    ncclResult_t res = cuFail("cuMemGetAddressRange", r);
    (void)d->release(h);
    return res;
  }
  *handle = (MemHandle)h;
  *mapBase = (void*)(uintptr_t)b;
  *mapBytes = n;
  return ncclSuccess;
}

ncclResult_t addressReserve(void** va, size_t bytes, size_t align) {
  RelaxedCapture relaxed;
  const Driver* d;
  UCHECK(vmmDriver("addressReserve", &d));
  CUdeviceptr p = 0;
  CU_TRY(d->addressReserve(&p, bytes, align, 0, 0));
  *va = (void*)(uintptr_t)p;
  return ncclSuccess;
}

ncclResult_t addressFree(void* va, size_t bytes) {
  RelaxedCapture relaxed;
  const Driver* d;
  UCHECK(vmmDriver("addressFree", &d));
  CU_TRY(d->addressFree((CUdeviceptr)(uintptr_t)va, bytes));
  return ncclSuccess;
}

ncclResult_t memMap(void* va, size_t bytes, MemHandle handle, int dev) {
  RelaxedCapture relaxed;
  const Driver* d;
  UCHECK(vmmDriver("memMap", &d));
  const CUdeviceptr p = (CUdeviceptr)(uintptr_t)va;
  CU_TRY(d->map(p, bytes, 0, (CUmemGenericAllocationHandle)handle, 0));
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUresult r = d->setAccess(p, bytes, &access, 1);
  if (r != CUDA_SUCCESS) {
    ncclResult_t res = cuFail("cuMemSetAccess", r);
    (void)d->unmap(p, bytes);
    return res;
  }
  return ncclSuccess;
}

ncclResult_t memSetAccess(void* va, size_t bytes, int dev) {
  RelaxedCapture relaxed;
  const Driver* d;
  UCHECK(vmmDriver("memSetAccess", &d));
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU_TRY(d->setAccess((CUdeviceptr)(uintptr_t)va, bytes, &access, 1));
  return ncclSuccess;
}

ncclResult_t memUnmap(void* va, size_t bytes) {
  RelaxedCapture relaxed;
  const Driver* d;
  UCHECK(vmmDriver("memUnmap", &d));
  CU_TRY(d->unmap((CUdeviceptr)(uintptr_t)va, bytes));
  return ncclSuccess;
}

// -------------------------------------------------------------- IPC handles
ncclResult_t ipcGetMemHandle(IpcMemHandle* handle, void* devPtr) {
  RelaxedCapture relaxed;
  cudaIpcMemHandle_t h;
  CUDA_TRY(cudaIpcGetMemHandle(&h, devPtr));
  IpcMemHandle out{};
  std::memcpy(out.bytes, &h, sizeof(h));
  *handle = out;
  return ncclSuccess;
}
ncclResult_t ipcOpenMemHandle(void** devPtr, const IpcMemHandle& handle) {
  RelaxedCapture relaxed;
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.bytes, sizeof(h));
  CUDA_TRY(cudaIpcOpenMemHandle(devPtr, h, cudaIpcMemLazyEnablePeerAccess));
  return ncclSuccess;
}
ncclResult_t ipcCloseMemHandle(void* devPtr) {
  RelaxedCapture relaxed;
  CUDA_TRY(cudaIpcCloseMemHandle(devPtr));
  return ncclSuccess;
}

// ------------------------------------------------------------------ kernels
ncclResult_t launchKernel(const void* kernel, const LaunchConfig& cfg, void** args, Event done) {
  if (cfg.programmatic) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3(cfg.gridX);
    lc.blockDim = dim3(cfg.blockX);
    lc.dynamicSmemBytes = cfg.sharedMemBytes;
    lc.stream = (cudaStream_t)cfg.stream;
    lc.attrs = attr;
    lc.numAttrs = 1;
    CUDA_TRY(cudaLaunchKernelExC(&lc, kernel, args));
  } else {
    CUDA_TRY(cudaLaunchKernel(kernel, dim3(cfg.gridX), dim3(cfg.blockX), args, cfg.sharedMemBytes,
                              (cudaStream_t)cfg.stream));
  }
  if (done != nullptr) CUDA_TRY(cudaEventRecord((cudaEvent_t)done, (cudaStream_t)cfg.stream));
  return ncclSuccess;
}
ncclResult_t preloadKernel(const void* kernel) {
  cudaFuncAttributes attr;
  CUDA_TRY(cudaFuncGetAttributes(&attr, kernel));
  // A launch that needs more per-thread local memory (stack) than the
  // context has reserved makes the driver grow the reservation first, which
  // waits for the kernels running on this GPU: a collective kernel spinning
  // on a peer whose kernel this thread has yet to launch (one thread driving
  // several GPUs) then never ends. Reserve the largest need up front, as NCCL
  // does (found on 2x H200: a group of 8 collectives of 8 datatypes hung in
  // one process).
  size_t stack = 0;
  CUDA_TRY(cudaDeviceGetLimit(&stack, cudaLimitStackSize));
  if (attr.localSizeBytes > stack) CUDA_TRY(cudaDeviceSetLimit(cudaLimitStackSize, attr.localSizeBytes));
  return ncclSuccess;
}
ncclResult_t programmaticLaunchSupported(const void* kernel, bool* supported) {
  *supported = false;
  int dev = 0, major = 0;
  CUDA_TRY(cudaGetDevice(&dev));
  CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  cudaFuncAttributes attr;
  CUDA_TRY(cudaFuncGetAttributes(&attr, kernel));
  // ptxVersion: the virtual architecture the kernel was compiled from (a
  // kernel JIT-compiled from compute_80 PTX has no griddepcontrol.wait).
  *supported = major >= 9 && attr.ptxVersion >= 90;
  return ncclSuccess;
}
ncclResult_t kernelResidentBlocks(const void* kernel, unsigned blockThreads, int* blocks) {
  int dev = 0, perSm = 0, sms = 0;
  CUDA_TRY(cudaGetDevice(&dev));
  CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, (int)blockThreads, 0));
  *blocks = perSm * sms;
  return ncclSuccess;
}
namespace {
#define UNICCL_KNOB UNICCL_KNOB_CONSTANT
#include "cuda/knobs.def"
#undef UNICCL_KNOB
}  // namespace

WorkQueues workQueues() {
  // The runtime reads the variable when it creates the context; 8 is its default.
  const KnobSpec& k = kCUDA_DEVICE_MAX_CONNECTIONS;
  const char* v = knobValue(k);
  int n = v != nullptr ? atoi(v) : (int)k.intDefault;
  return WorkQueues{n > 0 ? n : (int)k.intDefault, k.name};
}
ncclResult_t processesShareDevice(bool* concurrent, const char** how) {
  // A client of an MPS server finds the server through its pipe directory;
  // the control daemon keeps a "control" pipe there while it runs.
  // The documented default is the runtime's directory itself.
  const char* dir = knobValue(kCUDA_MPS_PIPE_DIRECTORY);
  std::string control = std::string(dir != nullptr && *dir ? dir : kCUDA_MPS_PIPE_DIRECTORY.defaultDoc) + "/control";
  *concurrent = access(control.c_str(), F_OK) == 0;
  *how = *concurrent ? "an MPS control daemon runs" : "no MPS control daemon (CUDA_MPS_PIPE_DIRECTORY/control)";
  return ncclSuccess;
}

// ------------------------------------------------------------------- graphs
// Ownership of `arg` always passes to this call: destroy(arg) runs exactly
// once, when the graph goes away or, if retaining fails, when the runtime
// drops the object we release here (asynchronously, on a runtime thread).
ncclResult_t graphRetainNewUserObject(Graph g, void (*destroy)(void*), void* arg) {
  cudaUserObject_t obj = nullptr;
  cudaError_t err = cudaUserObjectCreate(&obj, arg, destroy, 1, cudaUserObjectNoDestructorSync);
  if (err != cudaSuccess) {
    ncclResult_t res = fail("cudaUserObjectCreate", err);
    destroy(arg);
    return res;
  }
  err = cudaGraphRetainUserObject((cudaGraph_t)g, obj, 1, cudaGraphUserObjectMove);
  if (err != cudaSuccess) {
    ncclResult_t res = fail("cudaGraphRetainUserObject", err);
    (void)cudaUserObjectRelease(obj, 1);
    return res;
  }
  return ncclSuccess;
}

}  // namespace uniccl::gpu
