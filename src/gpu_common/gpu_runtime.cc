// The part of src/common/gpu.h that CUDA and HIP answer the same way, written
// once over the vendor names (vendor_alias.h) and compiled into each backend
// library; src/cuda and src/hip hold only what differs (peer links, polled
// memory, pointer attributes, virtual memory, IPC of VMM memory, launches).
// Thin by design, as the backends: each function translates arguments and
// result codes and nothing more.
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "common/gpu.h"
#include "gpu_common/relaxed_capture.h"
#include "gpu_common/runtime_check.h"
#include "gpu_common/vendor_hooks.h"

namespace uniccl::gpu {

using backend::fail;
using backend::failAlloc;
using backend::RelaxedCapture;

static_assert(sizeof(gpuIpcMemHandle_t) <= kIpcHandleBytes, "IpcMemHandle must hold the runtime's IPC handle");

namespace {
// Synchronous copies and fills run on a private non-blocking stream of the
// current device, then wait for it: on the legacy stream they would wait for
// (and during a capture break) a blocking stream the application captures
// on. One stream per device, for the life of the process.
ncclResult_t privateStream(gpuStream_t* out) {
  static std::mutex& mu = *new std::mutex();   // never destroyed: used until the process ends
  static std::map<int, gpuStream_t>& streams = *new std::map<int, gpuStream_t>();
  int dev = 0;
  GPU_TRY(gpuGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  auto it = streams.find(dev);
  if (it == streams.end()) {
    gpuStream_t s = nullptr;
    GPU_TRY(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking));
    it = streams.emplace(dev, s).first;
  }
  *out = it->second;
  return ncclSuccess;
}
}  // namespace

// ------------------------------------------------------------------ devices
ncclResult_t getDeviceCount(int* count) {
  GPU_TRY(gpuGetDeviceCount(count));
  return ncclSuccess;
}
ncclResult_t getDevice(int* dev) {
  GPU_TRY(gpuGetDevice(dev));
  return ncclSuccess;
}
ncclResult_t setDevice(int dev) {
  GPU_TRY(gpuSetDevice(dev));
  return ncclSuccess;
}

// Not finding the device is an expected answer (a peer's GPU hidden from
// this process), so it returns ncclInvalidArgument without a WARN.
ncclResult_t deviceGetByBusId(const char* busId, int* dev) {
  gpuError_t e = gpuDeviceGetByPCIBusId(dev, busId);
  if (e != gpuSuccess) {
    (void)gpuGetLastError();
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t getDeviceProps(int dev, DeviceProps* props) {
  gpuDeviceProp_t p;
  GPU_TRY(gpuGetDeviceProperties(&p, dev));
  DeviceProps out{};
  static_assert(sizeof(out.name) <= sizeof(p.name), "name buffer");
  std::memcpy(out.name, p.name, sizeof(out.name));
  out.name[sizeof(out.name) - 1] = '\0';
  out.multiProcessorCount = p.multiProcessorCount;
  out.warpSize = p.warpSize;
  UCHECK(backend::vendorDeviceProps(dev, p, &out));
  out.computeMajor = p.major;
  out.computeMinor = p.minor;
  out.totalGlobalMem = p.totalGlobalMem;
  out.pciDomain = p.pciDomainID;
  out.pciBus = p.pciBusID;
  out.pciDevice = p.pciDeviceID;
  out.canMapHostMemory = p.canMapHostMemory;
  out.concurrentManagedAccess = p.concurrentManagedAccess;
  GPU_TRY(gpuDeviceGetPCIBusId(out.busId, sizeof(out.busId), dev));
  for (char* c = out.busId; *c; ++c) *c = (char)std::tolower((unsigned char)*c);
  *props = out;
  return ncclSuccess;
}

ncclResult_t enablePeerAccess(int peer) {
  RelaxedCapture relaxed;
  gpuError_t err = gpuDeviceEnablePeerAccess(peer, 0);
  if (err == gpuErrorPeerAccessAlreadyEnabled) {
    (void)gpuGetLastError();
    return ncclSuccess;
  }
  if (err != gpuSuccess) return fail(GPU_CALL_NAME(gpuDeviceEnablePeerAccess), err);
  return ncclSuccess;
}

// ------------------------------------------------------------------ streams
ncclResult_t streamCreate(Stream* s) {
  RelaxedCapture relaxed;  // may come during a capture (the side stream, core/side_stream.h)
  gpuStream_t st;
  GPU_TRY(gpuStreamCreateWithFlags(&st, gpuStreamNonBlocking));
  *s = st;
  return ncclSuccess;
}
ncclResult_t streamDestroy(Stream s) {
  GPU_TRY(gpuStreamDestroy((gpuStream_t)s));
  return ncclSuccess;
}
ncclResult_t streamSynchronize(Stream s) {
  GPU_TRY(gpuStreamSynchronize((gpuStream_t)s));
  return ncclSuccess;
}
ncclResult_t streamWaitEvent(Stream s, Event e) {
  GPU_TRY(gpuStreamWaitEvent((gpuStream_t)s, (gpuEvent_t)e, 0));
  return ncclSuccess;
}

ncclResult_t streamGetCaptureInfo(Stream s, CaptureInfo* info) {
  gpuStreamCaptureStatus status = gpuStreamCaptureStatusNone;
  unsigned long long id = 0;
  gpuGraph_t graph = nullptr;
  GPU_TRY(gpuStreamGetCaptureInfo((gpuStream_t)s, &status, &id, &graph));
  CaptureInfo out{};
  switch (status) {
    case gpuStreamCaptureStatusActive: out.status = CaptureStatus::Active; break;
    case gpuStreamCaptureStatusInvalidated: out.status = CaptureStatus::Invalidated; break;
    default: out.status = CaptureStatus::None; break;
  }
  out.graphId = out.status == CaptureStatus::None ? 0 : id;
  out.graph = out.status == CaptureStatus::Active ? graph : nullptr;
  *info = out;
  return ncclSuccess;
}

// ------------------------------------------------------------------- events
ncclResult_t eventCreate(Event* e, unsigned flags) {
  RelaxedCapture relaxed;
  unsigned f = gpuEventDefault;
  if (flags & kEventDisableTiming) f |= gpuEventDisableTiming;
  if (flags & kEventInterprocess) f |= gpuEventInterprocess;
  if (flags & kEventBlockingSync) f |= gpuEventBlockingSync;
  gpuEvent_t ev;
  GPU_TRY(gpuEventCreateWithFlags(&ev, f));
  *e = ev;
  return ncclSuccess;
}
ncclResult_t eventDestroy(Event e) {
  GPU_TRY(gpuEventDestroy((gpuEvent_t)e));
  return ncclSuccess;
}
ncclResult_t eventRecord(Event e, Stream s) {
  GPU_TRY(gpuEventRecord((gpuEvent_t)e, (gpuStream_t)s));
  return ncclSuccess;
}
ncclResult_t eventQuery(Event e) {
  RelaxedCapture relaxed;
  gpuError_t err = gpuEventQuery((gpuEvent_t)e);
  if (err == gpuSuccess) return ncclSuccess;
  if (err == gpuErrorNotReady) return ncclInProgress;  // not an error: nothing to clear
  return fail(GPU_CALL_NAME(gpuEventQuery), err);
}
ncclResult_t eventSynchronize(Event e) {
  GPU_TRY(gpuEventSynchronize((gpuEvent_t)e));
  return ncclSuccess;
}

// ------------------------------------------------------------------- memory
ncclResult_t deviceAlloc(void** ptr, size_t bytes) {
  RelaxedCapture relaxed;
  GPU_TRY(gpuMalloc(ptr, bytes));
  return ncclSuccess;
}
ncclResult_t deviceFree(void* ptr) {
  RelaxedCapture relaxed;
  GPU_TRY(gpuFree(ptr));
  return ncclSuccess;
}
ncclResult_t hostAllocMapped(void** hostPtr, void** devPtr, size_t bytes) {
  RelaxedCapture relaxed;
  void* h = nullptr;
  gpuError_t err = gpuHostAlloc(&h, bytes, gpuHostAllocMappedFlags);
  if (err != gpuSuccess) return failAlloc(GPU_CALL_NAME(gpuHostAlloc) "(mapped)", err);
  void* d = nullptr;
  err = gpuHostGetDevicePointer(&d, h, 0);
  if (err != gpuSuccess) {
    ncclResult_t res = fail(GPU_CALL_NAME(gpuHostGetDevicePointer), err);
    (void)gpuFreeHost(h);
    return res;
  }
  *hostPtr = h;
  *devPtr = d;
  return ncclSuccess;
}
ncclResult_t hostFree(void* ptr) {
  RelaxedCapture relaxed;
  GPU_TRY(gpuFreeHost(ptr));
  return ncclSuccess;
}
ncclResult_t hostRegister(void* ptr, size_t bytes, void** devPtr) {
  RelaxedCapture relaxed;
  GPU_TRY(gpuHostRegister(ptr, bytes, gpuHostRegisterMapped | gpuHostRegisterPortable));
  void* d = nullptr;
  gpuError_t err = gpuHostGetDevicePointer(&d, ptr, 0);
  if (err != gpuSuccess) {
    ncclResult_t res = fail(GPU_CALL_NAME(gpuHostGetDevicePointer), err);
    (void)gpuHostUnregister(ptr);
    return res;
  }
  *devPtr = d;
  return ncclSuccess;
}
ncclResult_t hostUnregister(void* ptr) {
  RelaxedCapture relaxed;
  GPU_TRY(gpuHostUnregister(ptr));
  return ncclSuccess;
}
ncclResult_t memcpyAsync(void* dst, const void* src, size_t bytes, Stream s) {
  GPU_TRY(gpuMemcpyAsync(dst, src, bytes, gpuMemcpyDefault, (gpuStream_t)s));
  return ncclSuccess;
}
ncclResult_t memcpy(void* dst, const void* src, size_t bytes) {
  RelaxedCapture relaxed;
  gpuStream_t s;
  UCHECK(privateStream(&s));
  GPU_TRY(gpuMemcpyAsync(dst, src, bytes, gpuMemcpyDefault, s));
  GPU_TRY(gpuStreamSynchronize(s));
  return ncclSuccess;
}
ncclResult_t memset(void* dst, int value, size_t bytes) {
  RelaxedCapture relaxed;
  gpuStream_t s;
  UCHECK(privateStream(&s));
  GPU_TRY(gpuMemsetAsync(dst, value, bytes, s));
  GPU_TRY(gpuStreamSynchronize(s));
  return ncclSuccess;
}

// -------------------------------------------------------------- IPC handles
ncclResult_t ipcGetMemHandle(IpcMemHandle* handle, void* devPtr) {
  RelaxedCapture relaxed;
  gpuIpcMemHandle_t h;
  GPU_TRY(gpuIpcGetMemHandle(&h, devPtr));
  IpcMemHandle out{};
  std::memcpy(out.bytes, &h, sizeof(h));
  *handle = out;
  return ncclSuccess;
}
ncclResult_t ipcOpenMemHandle(void** devPtr, const IpcMemHandle& handle) {
  RelaxedCapture relaxed;
  gpuIpcMemHandle_t h;
  std::memcpy(&h, handle.bytes, sizeof(h));
  GPU_TRY(gpuIpcOpenMemHandle(devPtr, h, gpuIpcMemLazyEnablePeerAccess));
  return ncclSuccess;
}
ncclResult_t ipcCloseMemHandle(void* devPtr) {
  RelaxedCapture relaxed;
  GPU_TRY(gpuIpcCloseMemHandle(devPtr));
  return ncclSuccess;
}

// ------------------------------------------------------------------ kernels
ncclResult_t preloadKernel(const void* kernel) {
  gpuFuncAttributes attr;
  GPU_TRY(gpuFuncGetAttributes(&attr, kernel));
#if UNICCL_GPU_HAS_STACK_LIMIT
  // A launch that needs more per-thread local memory (stack) than the
  // context has reserved makes the driver grow the reservation first, which
  // waits for the kernels running on this GPU: a collective kernel spinning
  // on a peer whose kernel this thread has yet to launch (one thread driving
  // several GPUs) then never ends. Reserve the largest need up front, as NCCL
  // does (found on 2x H200: a group of 8 collectives of 8 datatypes hung in
  // one process). Runtimes without the limit (ROCm before 6.0) reserve nothing.
  size_t stack = 0;
  GPU_TRY(gpuDeviceGetLimit(&stack, gpuLimitStackSize));
  if ((size_t)attr.localSizeBytes > stack) GPU_TRY(gpuDeviceSetLimit(gpuLimitStackSize, attr.localSizeBytes));
#endif
  return ncclSuccess;
}
ncclResult_t kernelResidentBlocks(const void* kernel, unsigned blockThreads, int* blocks) {
  int dev = 0, perMultiprocessor = 0, multiprocessors = 0;
  GPU_TRY(gpuGetDevice(&dev));
  GPU_TRY(gpuDeviceGetAttribute(&multiprocessors, gpuDevAttrMultiProcessorCount, dev));
  GPU_TRY(gpuOccupancyMaxActiveBlocksPerMultiprocessor(&perMultiprocessor, kernel, (int)blockThreads, 0));
  *blocks = perMultiprocessor * multiprocessors;
  return ncclSuccess;
}

WorkQueues workQueues() {
  // The runtime reads its variable when it creates the context; the knob's
  // default is the runtime's (8 on CUDA, 4 on HIP).
  const KnobSpec& k = backend::workQueuesKnob();
  const char* v = knobValue(k);
  int n = v != nullptr ? atoi(v) : (int)k.intDefault;
  return WorkQueues{n > 0 ? n : (int)k.intDefault, k.name};
}

// ------------------------------------------------------------------- graphs
#if UNICCL_GPU_HAS_USER_OBJECTS
// Ownership of `arg` always passes to this call: destroy(arg) runs exactly
// once, when the graph goes away or, if retaining fails, when the runtime
// drops the object we release here (asynchronously, on a runtime thread), or
// by the time this returns when the object could not be made.
ncclResult_t graphRetainNewUserObject(Graph g, void (*destroy)(void*), void* arg) {
  gpuUserObject_t obj = nullptr;
  gpuError_t err = gpuUserObjectCreate(&obj, arg, destroy, 1, gpuUserObjectNoDestructorSync);
  if (err != gpuSuccess) {
    ncclResult_t res = fail(GPU_CALL_NAME(gpuUserObjectCreate), err);
    destroy(arg);
    return res;
  }
  err = gpuGraphRetainUserObject((gpuGraph_t)g, obj, 1, gpuGraphUserObjectMove);
  if (err != gpuSuccess) {
    ncclResult_t res = fail(GPU_CALL_NAME(gpuGraphRetainUserObject), err);
    (void)gpuUserObjectRelease(obj, 1);
    return res;
  }
  return ncclSuccess;
}
#endif

}  // namespace uniccl::gpu
