// How each ROCm release reads hipMemImportFromShareableHandle's handle
// argument for a POSIX file descriptor. Free of HIP headers so that a host
// unit test (tests/unit/core/rocm_vmm_test.cc) checks the choice per runtime
// version against models of both readings.
//
// CUDA, and ROCm from 7.1, take the descriptor's value cast to a pointer.
// ROCm 6.2 to 7.0 read the argument as an int* and dereference it (CLR's
// ImportShareableHSAHandle: `*(int*)osHandle`), so the value cast to a
// pointer is an address near 0 there and the process dies. ROCm before 6.2
// answers "not supported" for every import (the backend does not offer fd
// export there: gpu::VmmInfo::fdExport).
#pragma once

#include <cstdint>

namespace uniccl::hipabi {

// HIP_VERSION (major * 10000000 + minor * 100000 + patch) of the first
// runtimes with each behaviour, compared with hipRuntimeGetVersion: the
// runtime loaded decides, not the headers the library was built with.
constexpr int kVmmFdExport = 60200000;          // export/import implemented (Linux)
constexpr int kImportTakesFdValue = 70100000;   // the descriptor by value, as CUDA

// The argument to pass for descriptor *fd to a runtime of `runtimeVersion`.
// *fd must outlive the call (the older runtimes read it during the call).
inline void* shareableFdArgument(int runtimeVersion, int* fd) {
  if (runtimeVersion >= kImportTakesFdValue) return reinterpret_cast<void*>(static_cast<uintptr_t>(*fd));
  return static_cast<void*>(fd);
}

}  // namespace uniccl::hipabi
