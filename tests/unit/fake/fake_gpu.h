// Control API of the scripted fake GPU backend (fake_gpu.cc implements all of
// src/common/gpu.h in host memory). Host unit tests link it instead of the
// real backend and script what "the GPU" does: which events have completed,
// which calls fail, what a blocking wait does. Everything is thread-safe (one
// mutex), so a watchdog thread may poll while the test thread scripts.
//
// The model: a recorded event is Pending until the script completes it
// (completeEvent / completeOldest / completeEventsUpTo / auto-complete) or
// fails it. Every record gets a global serial number in record order, which
// stands for "GPU order". Kernels never run; each launch is logged (and can
// trigger a hook that plays the GPU). Host functions run at once (or, inside
// a capture, when the captured graph is replayed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/gpu.h"

namespace uniccl::fake {

// Forgets everything: frees all fake objects, clears scripts, hooks and logs,
// restores defaults (1 device, no auto-complete, 5 s sync timeout).
void reset();

// ------------------------------------------------------------------ devices
void setDeviceCount(int n);                 // getDeviceCount answers n (0: "no GPU")
void setPeerAccess(bool canAccess);         // canAccessPeer answer for dev != peer
void setResidentBlocks(int n);              // kernelResidentBlocks answer (default 256)
void setWorkQueues(int n);                  // workQueues().count (default 8)
void setProcessesShareDevice(bool on);      // processesShareDevice answer (default no)

// ------------------------------------------------------------------- events
enum class EventState {
  NotRecorded,  // created, never recorded: queries succeed (as CUDA does)
  Pending,      // recorded, the GPU has not reached it yet
  Completed,
  Failed,       // the tracked work failed: query/sync return the failure code
};
EventState eventState(gpu::Event e);
void setEventState(gpu::Event e, EventState s);
// Serial of the event's latest record (0 when never recorded).
uint64_t eventSerial(gpu::Event e);
// The flags the event was created with (gpu::EventFlags).
unsigned eventFlags(gpu::Event e);
uint64_t lastSerial();                      // serial of the most recent record
void completeEvent(gpu::Event e);
// Completes the oldest pending record(s); returns how many were completed.
size_t completeOldest(size_t n = 1);
// Completes every pending record whose serial <= serial.
size_t completeEventsUpTo(uint64_t serial);
size_t pendingEventCount();
void failEvent(gpu::Event e, ncclResult_t err = ncclUnhandledCudaError);
// When on, records complete immediately.
void setAutoComplete(bool on);

// Called by eventSynchronize(e) when e is Pending, without the fake's lock
// held ("the GPU finishes the oldest launch now"). After the hook,
// eventSynchronize waits (for another thread to complete e) up to the sync
// timeout, then returns ncclInternalError instead of deadlocking.
void setSyncHook(std::function<void(gpu::Event)> hook);
void setSyncTimeoutMs(int ms);

// ------------------------------------------------------------------ launches
struct Launch {
  const void* kernel;
  unsigned gridX, blockX;
  size_t sharedMemBytes;
  gpu::Stream stream;
  gpu::Event done;
  uint64_t doneSerial;                 // serial of the done-event record (0: none)
  bool captured;                       // replayed from a graph
  std::vector<unsigned char> args;     // first N bytes of *args[0] (see setLaunchArgBytes)
};
// How many bytes of the first kernel argument each launch keeps (default 0).
void setLaunchArgBytes(size_t n);
std::vector<Launch> launches();
size_t launchCount();
// Called after each launch is logged, without the lock (may complete events).
void setLaunchHook(std::function<void(const Launch&)> hook);

// ------------------------------------------------------------ graph capture
// Starts capturing on `s` (streamGetCaptureInfo then says Active with a fresh
// nonzero id); kernels issued on `s` become nodes of the graph instead of
// executing.
gpu::Graph beginCapture(gpu::Stream s);
gpu::Graph endCapture(gpu::Stream s);
void invalidateCapture(gpu::Stream s);
// graphCaptureSupported's answer (default yes; no stands for ROCm < 5.3).
void setCaptureSupported(bool on);
// Runs the graph's nodes in order: its kernels are logged.
void replayGraph(gpu::Graph g);
// Destroys the graph: the destructors of its user objects run.
void destroyGraph(gpu::Graph g);

// --------------------------------------------------------- injected failures
// The next `times` calls of gpu::<call> (e.g. "eventQuery") return err.
void failNext(const std::string& call, ncclResult_t err = ncclUnhandledCudaError, int times = 1);
// How many times gpu::<call> was called since reset().
uint64_t callCount(const std::string& call);

// ------------------------------------------------------------ memory kinds
// Whether p lies in memory others may spin on: an allocation of
// deviceAllocPolled or hostAllocMapped (not deviceAlloc, hostAllocPinned), or
// a mapping of memCreate(..., polled = true)'s memory (also a peer's, imported).
bool isPolledMemory(const void* p);

// ----------------------------------------------------------- virtual memory
// The virtual-memory calls (gpu.h's memCreate .. memUnmap) work on real host
// memory: a physical allocation is a memfd, memExportFd/memImportFd dup it,
// a reservation is PROT_NONE address space and memMap a MAP_SHARED view, so
// two maps of one handle show the same bytes. Mapped ranges are device
// memory of the allocation's device (pointerGetInfo, memGetAddressRange).
// vmmQuery's answer (default: supported, fd export, 64 KiB granularity);
// memCreate and addressReserve fail while unsupported.
void setVmm(bool supported, bool fdExport = true, size_t granularity = size_t(64) << 10);
// ROCm's virtual-memory answers where they differ from CUDA's (default off:
// CUDA's). On: gpu::memRetainAnyAddress() says no, and memRetainFromAddress
// on an address outside every mapping aborts the process, as ROCm 6.2+'s
// hipMemRetainAllocationHandle follows a null pointer for a hipMalloc
// address. A core path that asks about memory it did not map fails its test.
void setRocmVmmSemantics(bool on);
// VmmInfo::polled (default yes, as CUDA): off stands for ROCm before 7.2,
// which has no uncached VMM memory; memCreate(..., polled = true) then fails.
void setVmmPolled(bool available);

// ----------------------------------------------------- leak accounting
struct Live {
  size_t events, streams, deviceAllocs, hostAllocs, registrations, ipcOpens, graphs, userObjects;
  size_t physAllocs;     // memCreate'd or imported allocations still held by a handle or a mapping
  size_t mappings;       // memMap'ed ranges
  size_t reservations;   // addressReserve'd ranges
};
Live live();

// Bytes of the live allocations: device (deviceAlloc, deviceAllocPolled and
// memCreate'd physical memory) and host (hostAllocPinned, hostAllocMapped),
// as the library asked for them (what a GPU would hold), whether or not the
// fake backed them with host pages. Allocations of 256 KiB and more are
// anonymous mappings whose memset(0) drops the pages, so memory nobody
// writes stays out of the process's RSS.
struct Bytes {
  size_t device, host;
};
Bytes liveBytes();

}  // namespace uniccl::fake
