// The GPU backend interface: everything the vendor-neutral core asks of a GPU
// runtime. src/cuda and src/hip implement it thinly (no logic); unit tests
// link a scripted fake instead. Handles are opaque pointers so that no vendor
// type leaks into src/common. Every call returns ncclSuccess or an
// ncclUnhandledCudaError/ncclSystemError with the vendor's message logged
// once (WARN), and clears a sticky-free vendor error so it is not reported twice.
#pragma once

#include <cstddef>
#include <cstdint>

#include "uniccl.h"

namespace uniccl::gpu {

using Stream = void*;    // cudaStream_t / hipStream_t (nullptr = legacy default stream)
using Event = void*;     // cudaEvent_t / hipEvent_t
using Graph = void*;     // cudaGraph_t / hipGraph_t
using UserObject = void*;

// ------------------------------------------------------------------ devices
[[nodiscard]] ncclResult_t getDeviceCount(int* count);
[[nodiscard]] ncclResult_t getDevice(int* dev);
[[nodiscard]] ncclResult_t setDevice(int dev);

struct DeviceProps {
  char name[256];
  int multiProcessorCount;
  int warpSize;
  int computeMajor, computeMinor;
  size_t totalGlobalMem;
  int pciDomain, pciBus, pciDevice;
  char busId[32];           // "0000:3b:00.0", lower case, as NCCL prints it
  int canMapHostMemory;
  int concurrentManagedAccess;
  // Ticks per millisecond of device/port.h's globalTimer() on this device
  // (1000000: nanoseconds, CUDA's %globaltimer; HIP: the wall-clock rate,
  // 100 MHz = 100000 on current AMD GPUs). 0 is read as 1000000.
  int64_t timerRateKHz;
  // 1: a warp's aligned 128-byte store reaches a peer GPU (P2P) as one unit
  // and a warp's 128-byte load sees it whole, which LL128 relies on
  // (device/port.h): NVIDIA sm_70+ (NVLink). 0 on HIP (docs/amd.md) and on
  // older GPUs: LL128 stays off.
  int lineStoreAtomic128;
};
[[nodiscard]] ncclResult_t getDeviceProps(int dev, DeviceProps* props);
// Index, in this process, of the device with PCI bus id `busId`
// ("0000:3b:00.0"); ncclInvalidArgument (no log) when it is not visible here.
[[nodiscard]] ncclResult_t deviceGetByBusId(const char* busId, int* dev);
// Whether `dev` can address `peer`'s memory directly in a way the P2P
// transport can use (NVLink/PCIe P2P on CUDA; XGMI only on HIP: PCIe peers
// would need an HDP flush per post, which uniccl does not do).
[[nodiscard]] ncclResult_t canAccessPeer(int dev, int peer, bool* can);
// Whether the P2P link from `dev` to `peer` carries a warp's aligned 128-byte
// store as one unit, as LL128 needs (device/port.h; both GPUs must also
// report DeviceProps::lineStoreAtomic128). CUDA: a link with native P2P
// atomics, i.e. NVLink (PCIe P2P has none, and NCCL keeps LL128 to NVLink);
// HIP: never (docs/amd.md).
[[nodiscard]] ncclResult_t p2pLinkKeepsLines(int dev, int peer, bool* whole);
// The kind of the path between two GPUs of this process, for the topology
// (common/topo/system.h, LinkClass): kPeerLinkNone (no peer access),
// kPeerLinkPcie, kPeerLinkDirect (a point-to-point GPU link: xGMI on HIP,
// NVLinks joining the two GPUs on CUDA), kPeerLinkSwitch (a GPU fabric:
// NVSwitch; on CUDA also any NVLink when NVML is missing, as the runtime
// cannot tell the two apart), and *count links (0: not known).
enum PeerLinkKind : int { kPeerLinkNone = 0, kPeerLinkPcie = 1, kPeerLinkDirect = 2, kPeerLinkSwitch = 3 };
[[nodiscard]] ncclResult_t peerLinkKind(int dev, int peer, int* kind, int* count);
// Enables access from the current device to `peer`; already-enabled is success.
[[nodiscard]] ncclResult_t enablePeerAccess(int peer);

// ------------------------------------------------------------------ streams
[[nodiscard]] ncclResult_t streamCreate(Stream* s);          // non-blocking stream
[[nodiscard]] ncclResult_t streamDestroy(Stream s);
[[nodiscard]] ncclResult_t streamSynchronize(Stream s);
[[nodiscard]] ncclResult_t streamWaitEvent(Stream s, Event e);

enum class CaptureStatus { None, Active, Invalidated };
struct CaptureInfo {
  CaptureStatus status;
  uint64_t graphId;   // unique id of the graph being captured (0 when none)
  Graph graph;        // the graph being captured (nullptr when none)
};
[[nodiscard]] ncclResult_t streamGetCaptureInfo(Stream s, CaptureInfo* info);
// Whether uniccl's work can be captured into a graph with this runtime.
// False on ROCm before 5.3: a launch into a capturing stream is not
// recorded (hipExtLaunchKernel on 5.2), so the graph would silently lack
// the collective, and graph user objects are missing. `why` says so, for
// the caller's message.
bool graphCaptureSupported(const char** why);

// ------------------------------------------------------------------- events
enum EventFlags : unsigned {
  kEventDefault = 0,
  kEventDisableTiming = 1,   // cheaper; the default for done events
  kEventInterprocess = 2,    // requires kEventDisableTiming
  kEventBlockingSync = 4,
};
[[nodiscard]] ncclResult_t eventCreate(Event* e, unsigned flags = kEventDisableTiming);
[[nodiscard]] ncclResult_t eventDestroy(Event e);
[[nodiscard]] ncclResult_t eventRecord(Event e, Stream s);
// ncclSuccess when the event completed, ncclInProgress when not yet; an error
// when the work it tracks failed. Safe to call while another stream of the
// thread is capturing (it runs in relaxed capture mode).
[[nodiscard]] ncclResult_t eventQuery(Event e);
[[nodiscard]] ncclResult_t eventSynchronize(Event e);

// ------------------------------------------------------------------- memory
[[nodiscard]] ncclResult_t deviceAlloc(void** ptr, size_t bytes);
// Polled memory: device memory that another device or the host spins on
// while kernels run (connection counters, LL and Simple slots, flags). CUDA:
// ordinary device memory. HIP: uncached (fine-grained before ROCm 5.7), as
// RCCL allocates it; plain hipMalloc memory is coarse-grained, and a peer's
// polling loads may never see the stores sitting in this GPU's L2. Freed
// with deviceFree. Fails (WARN) where the runtime cannot give that kind;
// nothing falls back to ordinary memory.
[[nodiscard]] ncclResult_t deviceAllocPolled(void** ptr, size_t bytes);
[[nodiscard]] ncclResult_t deviceFree(void* ptr);
// Pinned + device-visible, and coherent while kernels run (HIP: asked for
// explicitly): every use of it is polled by the host or by a kernel (abort
// flag, work FIFO, conn FIFOs, progress words, profiler stamps).
[[nodiscard]] ncclResult_t hostAllocMapped(void** hostPtr, void** devPtr, size_t bytes);
[[nodiscard]] ncclResult_t hostFree(void* ptr);
// Pins and maps existing host memory (e.g. a shared-memory segment) for the
// current device; devPtr receives the device-side address.
[[nodiscard]] ncclResult_t hostRegister(void* ptr, size_t bytes, void** devPtr);
[[nodiscard]] ncclResult_t hostUnregister(void* ptr);
[[nodiscard]] ncclResult_t memcpyAsync(void* dst, const void* src, size_t bytes, Stream s);  // any direction (UVA)
// Stores `value` into the 4 bytes at devAddr (a device address: device
// memory or the device view of hostAllocMapped memory) once the work queued
// on s before it has completed. A host thread that waits for a stream's
// copies polls that word: one load, where an event costs a runtime call per
// query. ncclInvalidUsage (nothing logged) where the runtime cannot write
// values from a stream; callers then use events.
[[nodiscard]] ncclResult_t streamWriteValue32(Stream s, void* devAddr, uint32_t value);
// Synchronous: on a private non-blocking stream of the current device, then
// waited for, so they neither wait for nor break an application's capture.
[[nodiscard]] ncclResult_t memcpy(void* dst, const void* src, size_t bytes);
[[nodiscard]] ncclResult_t memset(void* dst, int value, size_t bytes);

enum class MemoryKind { Unregistered, Host, Device, Managed };
struct PointerInfo {
  MemoryKind kind;
  int device;        // owning device for Device/Managed memory, -1 otherwise
};
[[nodiscard]] ncclResult_t pointerGetInfo(const void* ptr, PointerInfo* info);
// Start and size of the allocation that contains ptr (for registration).
[[nodiscard]] ncclResult_t memGetAddressRange(const void* ptr, void** base, size_t* size);

// ---------------------------------------------------------- virtual memory
// Physical allocations that peers can map (ncclMemAlloc, symmetric memory
// windows): CUDA's cuMem* / HIP's hipMem* virtual-memory calls. A handle is
// opaque (CUmemGenericAllocationHandle, hipMemGenericAllocationHandle_t, or
// the emulator's); it moves between processes of one host as a POSIX file
// descriptor (util/fd_passing.h), inside a process as it is.
using MemHandle = uint64_t;
struct VmmInfo {
  bool supported;       // physical allocation + reserve + map + access work on this device
  bool fdExport;        // handles export as POSIX file descriptors (cross-process windows)
  size_t granularity;   // map/reserve/allocation sizes are multiples of it
  const char* why;      // when !supported (or !fdExport): what is missing, for messages
  // memCreate(..., polled = true) works: physical memory that peers may
  // spin on while kernels run (gpu.h's polled-memory rule, as
  // deviceAllocPolled). CUDA: every allocation. HIP: uncached memory
  // (hipMemAllocationTypeUncached, ROCm 7.2+); the plain pinned type is
  // coarse-grained, where a peer's polls may never see stores that sit in
  // the writer's L2.
  bool polled = false;
  const char* polledWhy = nullptr;   // when supported && !polled: what is missing
};
[[nodiscard]] ncclResult_t vmmQuery(int dev, VmmInfo* info);
// `bytes` (a multiple of the granularity) of physical memory on `dev`,
// exportable as a file descriptor where VmmInfo::fdExport says so; memory
// peers may poll when `polled` (only where VmmInfo::polled; else a WARN and
// ncclInvalidUsage, never ordinary memory instead).
[[nodiscard]] ncclResult_t memCreate(MemHandle* handle, size_t bytes, int dev, bool polled = false);
// Drops this reference; the memory goes when no handle and no mapping holds it.
[[nodiscard]] ncclResult_t memRelease(MemHandle handle);
// A new file descriptor for the handle (the caller closes it).
[[nodiscard]] ncclResult_t memExportFd(MemHandle handle, int* fd);
// A new handle (a reference) for the memory behind `fd`; the fd stays the caller's.
[[nodiscard]] ncclResult_t memImportFd(int fd, MemHandle* handle);
// A new reference to the physical allocation mapped at `ptr` (any address
// inside a VMM mapping), with the mapping's start and size. ncclInvalidArgument
// without a log when ptr is not inside a VMM mapping (ordinary device memory),
// but only where memRetainAnyAddress() says so: ask it about any other
// address only through memory/mem_alloc.h's memRetainMapping.
[[nodiscard]] ncclResult_t memRetainFromAddress(const void* ptr, MemHandle* handle, void** mapBase, size_t* mapBytes);
// Whether memRetainFromAddress may be asked about any address. CUDA: yes
// (cuMemRetainAllocationHandle answers "invalid value" outside a mapping).
// HIP: no. ROCm 6.2 and later follow a null pointer in
// hipMemRetainAllocationHandle for an address the runtime knows but did not
// map with hipMemMap (every hipMalloc address), and no pointer attribute
// tells a VMM mapping apart; the core then asks only about the mappings it
// made itself (ncclMemAlloc's).
bool memRetainAnyAddress();
// Address space only: `bytes` of it, aligned to `align` (0: the granularity).
[[nodiscard]] ncclResult_t addressReserve(void** va, size_t bytes, size_t align);
[[nodiscard]] ncclResult_t addressFree(void* va, size_t bytes);
// Maps all of `handle` (bytes = its size) at va, inside a reservation, then
// gives device `dev` read/write access to it. Unmap before addressFree.
// Mapped memory is device memory of the handle's device for pointerGetInfo
// and memGetAddressRange (the range is the mapping).
[[nodiscard]] ncclResult_t memMap(void* va, size_t bytes, MemHandle handle, int dev);
// Gives one more device, `dev`, read/write access to all of a mapping (va
// and bytes as memMap made it): a peer GPU that loads from, stores to or
// copies into it (ncclMemAlloc grants every GPU that can reach the memory's
// own, as NCCL does: copy engines and kernels of other GPUs need it).
[[nodiscard]] ncclResult_t memSetAccess(void* va, size_t bytes, int dev);
[[nodiscard]] ncclResult_t memUnmap(void* va, size_t bytes);

// -------------------------------------------------------------- IPC handles
constexpr size_t kIpcHandleBytes = 64;
struct IpcMemHandle { char bytes[kIpcHandleBytes]; };
[[nodiscard]] ncclResult_t ipcGetMemHandle(IpcMemHandle* handle, void* devPtr);
[[nodiscard]] ncclResult_t ipcOpenMemHandle(void** devPtr, const IpcMemHandle& handle);  // lazy peer access
[[nodiscard]] ncclResult_t ipcCloseMemHandle(void* devPtr);

// ------------------------------------------------------------------ kernels
struct LaunchConfig {
  unsigned gridX = 1;
  unsigned blockX = 1;
  size_t sharedMemBytes = 0;
  Stream stream = nullptr;
  // Programmatic dependent launch: the kernel may start while the previous
  // kernel of the stream still runs, up to its waitPriorGrids() (device/port.h).
  // Only for kernels that call it first; ignored where unsupported (HIP).
  bool programmatic = false;
};
// Launches `kernel` (a pointer to a __global__ function) with `args` (array
// of pointers to each argument, as cudaLaunchKernel takes them). When `done`
// is not null it completes when the kernel does (HIP: hipExtLaunchKernel with
// the stop event; CUDA: launch, then record `done` on the same stream); most
// launches pass none (core/launch.cc: the watchdog's progress words tell
// when they end), and get an ordinary launch, which graph capture records.
[[nodiscard]] ncclResult_t launchKernel(const void* kernel, const LaunchConfig& cfg, void** args, Event done);
// Loads a kernel's module now and reserves the per-thread stack it needs.
// With lazy module loading (the CUDA default) a first launch may load it, or
// grow the context's stack reservation, while other kernels of the same job
// spin on this GPU's progress; both wait for them, which can deadlock:
// communicators preload every kernel.
[[nodiscard]] ncclResult_t preloadKernel(const void* kernel);
// Whether `kernel` can be launched programmatically on the current device:
// the device supports it and the kernel's code was built for an architecture
// where waitPriorGrids() really waits (CUDA: sm_90+ on both counts).
[[nodiscard]] ncclResult_t programmaticLaunchSupported(const void* kernel, bool* supported);
// How many blocks of `kernel` (blockThreads threads each, no dynamic shared
// memory) the current device holds resident at once: the occupancy per
// multiprocessor times the multiprocessors. Blocks that spin on other blocks
// (collectives of ranks sharing a GPU) must all fit together.
[[nodiscard]] ncclResult_t kernelResidentBlocks(const void* kernel, unsigned blockThreads, int* blocks);
// Work queues between the host and the device that streams are spread over,
// as configured for this process (CUDA_DEVICE_MAX_CONNECTIONS, default 8;
// GPU_MAX_HW_QUEUES on HIP, default 4), and the knob's name for messages.
// Streams that share a queue serialize: a kernel queued behind another
// rank's waiting kernel never starts.
struct WorkQueues {
  int count;
  const char* knob;
};
WorkQueues workQueues();
// Whether kernels of different processes run at the same time on a device
// (CUDA: only through an MPS server; without it the GPU time-slices between
// processes, and kernels that wait for each other across processes crawl or
// hang). `how` says what was found, for messages.
[[nodiscard]] ncclResult_t processesShareDevice(bool* concurrent, const char** how);

// ------------------------------------------------------------------- graphs
// A user object whose destructor (fn(arg)) runs when the last graph (or graph
// exec) that retains it is destroyed. The graph takes the only reference.
[[nodiscard]] ncclResult_t graphRetainNewUserObject(Graph g, void (*destroy)(void*), void* arg);

}  // namespace uniccl::gpu
