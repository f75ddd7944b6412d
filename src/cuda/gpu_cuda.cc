// What the CUDA runtime answers differently from HIP in src/common/gpu.h:
// device properties' vendor fields, peer links, polled memory, pointer
// attributes, the driver's address ranges and virtual memory, launches,
// MPS; gpu_common/gpu_runtime.cc holds the rest, written once for both
// backends. Thin by design: each function translates arguments and result
// codes and nothing more, so that behaviour lives in src/common where both
// backends (and the unit-test fake) share it.
#include <cuda.h>
#include <cuda_runtime.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/check.h"
#include "common/gpu.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"
#include "cuda/nvml_links.h"
#include "gpu_common/relaxed_capture.h"
#include "gpu_common/runtime_check.h"
#include "gpu_common/vendor_hooks.h"

namespace uniccl::gpu {

using backend::RelaxedCapture;

namespace {
#define UNICCL_KNOB UNICCL_KNOB_CONSTANT
#include "cuda/knobs.def"
#undef UNICCL_KNOB
}  // namespace

// ------------------------------------------------------------------ devices
ncclResult_t backend::vendorDeviceProps(int, const cudaDeviceProp& p, DeviceProps* out) {
  out->timerRateKHz = 1000000;   // %globaltimer counts nanoseconds
  // Volta and later deliver a warp's aligned 128-byte store to an NVLink
  // peer as one unit (NCCL's LL128 assumption; device/port.h).
  out->lineStoreAtomic128 = p.major >= 7 ? 1 : 0;
  return ncclSuccess;
}

ncclResult_t canAccessPeer(int dev, int peer, bool* can) {
  int v = 0;
  GPU_TRY(cudaDeviceCanAccessPeer(&v, dev, peer));
  *can = v != 0;
  return ncclSuccess;
}

ncclResult_t p2pLinkKeepsLines(int dev, int peer, bool* whole) {
  // Native P2P atomics: NVLink (and NVSwitch); PCIe P2P answers 0.
  int v = 0;
  GPU_TRY(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrNativeAtomicSupported, dev, peer));
  *whole = v != 0;
  return ncclSuccess;
}

ncclResult_t peerLinkKind(int dev, int peer, int* kind, int* count) {
  int can = 0, atomics = 0;
  GPU_TRY(cudaDeviceCanAccessPeer(&can, dev, peer));
  if (can != 0) GPU_TRY(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, dev, peer));
  *kind = can == 0 ? kPeerLinkNone : atomics != 0 ? kPeerLinkSwitch : kPeerLinkPcie;
  *count = 0;
  if (*kind != kPeerLinkSwitch) return ncclSuccess;
  // NVLink: NVML tells an NVSwitch fabric (a pair gets the lanes both GPUs
  // have into it) from lanes joining the two GPUs directly. Without NVML
  // the pair stays a fabric of unknown width.
  char a[32], b[32];
  GPU_TRY(cudaDeviceGetPCIBusId(a, sizeof(a), dev));
  GPU_TRY(cudaDeviceGetPCIBusId(b, sizeof(b), peer));
  nvml::NvlinkCounts ab, ba;
  if (!nvml::nvlinkCounts(a, b, &ab) || !nvml::nvlinkCounts(b, a, &ba)) return ncclSuccess;
  if (ab.toPeer > 0) {
    *kind = kPeerLinkDirect;
    *count = ab.toPeer;
  } else if (ab.toSwitch > 0 && ba.toSwitch > 0) {
    *count = ab.toSwitch < ba.toSwitch ? ab.toSwitch : ba.toSwitch;
  }
  return ncclSuccess;
}

bool graphCaptureSupported(const char** why) {
  *why = nullptr;
  return true;
}

// ------------------------------------------------------------------- memory
// NVIDIA GPUs keep peer-visible device memory coherent through L2 (the
// kernels' .sys fences and .cg loads do the rest): ordinary memory.
ncclResult_t deviceAllocPolled(void** ptr, size_t bytes) { return deviceAlloc(ptr, bytes); }

ncclResult_t pointerGetInfo(const void* ptr, PointerInfo* info) {
  cudaPointerAttributes a;
  GPU_TRY(cudaPointerGetAttributes(&a, ptr));
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
  decltype(&::cuStreamWriteValue32) streamWriteValue32 = nullptr;
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
    lookup("cuStreamWriteValue32", &r.streamWriteValue32);
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

ncclResult_t streamWriteValue32(Stream s, void* devAddr, uint32_t value) {
  const Driver& d = driver();
  if (d.streamWriteValue32 == nullptr) return ncclInvalidUsage;
  UCHECK(bindThreadContext());
  // The default flags order the store after the stream's earlier work and
  // make that work's writes visible first (a memory barrier before it).
  const CUresult r = d.streamWriteValue32(static_cast<CUstream>(s), (CUdeviceptr)(uintptr_t)devAddr, value,
                                          CU_STREAM_WRITE_VALUE_DEFAULT);
  if (r == CUDA_ERROR_NOT_SUPPORTED) return ncclInvalidUsage;
  if (r != CUDA_SUCCESS) return cuFail("cuStreamWriteValue32", r);
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
    GPU_TRY(cudaLaunchKernelExC(&lc, kernel, args));
  } else {
    GPU_TRY(cudaLaunchKernel(kernel, dim3(cfg.gridX), dim3(cfg.blockX), args, cfg.sharedMemBytes,
                             (cudaStream_t)cfg.stream));
  }
  if (done != nullptr) GPU_TRY(cudaEventRecord((cudaEvent_t)done, (cudaStream_t)cfg.stream));
  return ncclSuccess;
}
ncclResult_t programmaticLaunchSupported(const void* kernel, bool* supported) {
  *supported = false;
  int dev = 0, major = 0;
  GPU_TRY(cudaGetDevice(&dev));
  GPU_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  cudaFuncAttributes attr;
  GPU_TRY(cudaFuncGetAttributes(&attr, kernel));
  // ptxVersion: the virtual architecture the kernel was compiled from (a
  // kernel JIT-compiled from compute_80 PTX has no griddepcontrol.wait).
  *supported = major >= 9 && attr.ptxVersion >= 90;
  return ncclSuccess;
}

// The runtime reads CUDA_DEVICE_MAX_CONNECTIONS when it creates the context.
const KnobSpec& backend::workQueuesKnob() { return kCUDA_DEVICE_MAX_CONNECTIONS; }

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

}  // namespace uniccl::gpu
