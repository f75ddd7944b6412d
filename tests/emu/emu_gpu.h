// Control API of the emulated GPU backend (emu_gpu.cc implements all of
// src/common/gpu.h on the CPU, in host memory, and the few runtime calls below
// that only tests use). Unlike the scripted fake of
// tests/unit/fake, it behaves like a GPU runtime on its own: every stream is
// an in-order queue run by its own worker thread, events complete when their
// stream reaches them, memory is plain host memory in one address space.
//
// The model, where it differs from a real GPU:
//   - UNICCL_EMU_DEVICES (default 2, 0..128) virtual devices, all peers of each
//     other; device d has PCI bus id "0000:<d+1 in hex, 2 digits>:00.0".
//   - Kernels run through the installed KernelRunner on the stream's worker
//     thread (whose current device is the stream's); without one, launches fail.
//   - Fresh device and pinned host memory is filled with 0xCD, never zeros.
//   - Graph capture is not emulated (streams never capture); IPC handles open
//     only in the process that created them.
//   - A forked child starts with a fresh emulated runtime (the parent's streams,
//     events and allocation records do not carry over; CUDA refuses the child).
//   - Virtual memory (gpu.h's memCreate .. memUnmap) is real on the host: a
//     physical allocation is a memfd ("uniccl-emu-vmm-dev<d>"), exported and
//     imported as a dup of it, so another process (a forked child) maps the
//     same bytes; a reservation is a PROT_NONE anonymous mapping, memMap a
//     MAP_SHARED view of the memfd inside it. The granularity is 64 KiB (the
//     GPUs': 2 MiB). memCreate bytes count as device memory in use; mapped
//     ranges are device memory of the allocation's device for
//     pointerGetInfo and memGetAddressRange; memSetAccess only checks (one
//     address space: every device reaches them).
//   - UNICCL_EMU_ROCM=<major>.<minor> answers the virtual-memory calls as
//     that ROCm release's runtime does (emu_rocm.h): no retain outside a
//     mapping (asking aborts), fd export from 6.2, uncached memory from 7.2.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/gpu.h"

namespace uniccl::emu {

// Runs one kernel launch: `kernel` is the pointer given to
// gpu::launchKernel, `argBytes` a copy (taken at launch time) of the
// launch's single argument, sizeof(uniccl::dev::KernelArgs) bytes. Called on
// the stream's worker thread; the launch completes when it returns.
using KernelRunner = void (*)(const void* kernel, unsigned gridX, unsigned blockX, const void* argBytes);

// Installs the runner used by later launches (nullptr uninstalls it: launches
// then fail with ncclInvalidUsage). Launches already enqueued keep theirs.
void setKernelRunner(KernelRunner runner);

// Objects alive now, for leak checks at the end of a test.
struct Usage {
  size_t deviceAllocs;    // deviceAlloc'ed, not yet freed
  size_t deviceBytes;     // their requested sizes, summed
  size_t hostAllocs;      // hostAllocPinned + hostAllocMapped
  size_t registrations;   // hostRegister'ed ranges
  size_t streams;         // streamCreate'd (default streams not counted)
  size_t events;
  size_t ipcOpens;        // ipcOpenMemHandle'd, not yet closed
  size_t physAllocs;      // physical allocations alive (created or imported; held by a handle or a mapping)
  size_t physBytes;       // bytes of those memCreate made here (device memory in use)
  size_t mappings;        // memMap'ed ranges not yet unmapped
  size_t reservations;    // addressReserve'd ranges not yet freed
};
Usage usage();

// Whether p lies in memory others may poll: deviceAllocPolled's,
// hostAllocMapped's, registered host memory (SHM segments), or a mapping of
// memCreate(..., polled = true)'s memory. [*lo, *hi) is the allocation
// holding p, *kind what it is (also when false).
bool polledRange(const void* p, uintptr_t* lo, uintptr_t* hi, const char** kind);

// Runtime calls the core never makes (src/common/gpu.h has none), for the
// emulator's own tests; each behaves as its CUDA runtime namesake.
ncclResult_t deviceSynchronize();                                  // waits for the current device's streams
ncclResult_t streamGetDevice(gpu::Stream s, int* dev);
ncclResult_t eventElapsedMs(gpu::Event start, gpu::Event end, float* ms);
ncclResult_t hostAllocPinned(void** ptr, size_t bytes);            // freed with gpu::hostFree
ncclResult_t memsetAsync(void* dst, int value, size_t bytes, gpu::Stream s);
ncclResult_t setKernelMaxDynamicShared(const void* kernel, size_t bytes);
ncclResult_t launchHostFunc(gpu::Stream s, void (*fn)(void*), void* arg);   // fn(arg) in stream order
const char* lastErrorString();   // this thread's last failure ("no error": none)
void clearLastError();

}  // namespace uniccl::emu
