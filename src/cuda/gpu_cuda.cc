// src/common/gpu.h over the CUDA runtime. Thin by design: each function
// translates arguments and result codes and nothing more, so that behaviour
// lives in src/common where both backends (and the unit-test fake) share it.
#include <cuda.h>
#include <cuda_runtime.h>

#include <unistd.h>

#include <cctype>
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

// The runtime API has no address-range query; the driver's is reached through
// the runtime's entry-point lookup so that libcuda need not be linked.
ncclResult_t memGetAddressRange(const void* ptr, void** base, size_t* size) {
  using Fn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  static Fn fn = []() -> Fn {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return reinterpret_cast<Fn>(p);
  }();
  if (fn == nullptr) {
    WARN("cudaGetDriverEntryPointByVersion(cuMemGetAddressRange) failed: driver entry point not found");
    return ncclUnhandledCudaError;
  }
  CUdeviceptr b = 0;
  size_t n = 0;
  CUresult r = fn(&b, &n, (CUdeviceptr)(uintptr_t)ptr);
  if (r != CUDA_SUCCESS) {
    WARN("cuMemGetAddressRange(%p) failed: CUresult %d", ptr, (int)r);
    return ncclUnhandledCudaError;
  }
  *base = (void*)(uintptr_t)b;
  *size = n;
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
