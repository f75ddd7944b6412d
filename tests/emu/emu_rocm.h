// The emulated runtime's ROCm mode (UNICCL_EMU_ROCM=<major>.<minor>): the
// emulated GPUs answer the virtual-memory calls as that ROCm release's
// runtime does where it differs from CUDA (docs/amd.md, "ROCm versions"),
// so that the whole library on the emulator meets those answers:
//   - any release: memRetainAnyAddress() says no, and memRetainFromAddress
//     on an address outside every VMM mapping aborts the process (ROCm 6.2+
//     follows a null pointer there for a hipMalloc address);
//   - before 6.0: no virtual memory at all;
//   - 6.0, 6.1: virtual memory inside one process only (fd export and
//     import answer "not supported");
//   - before 7.2: no uncached (polled) virtual memory: memCreate(polled) fails.
// Unset or empty: CUDA's answers. Anything else is refused at startup.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace uniccl::emu {

// HIP_VERSION-style (major * 10000000 + minor * 100000) of UNICCL_EMU_ROCM, 0 when unset.
inline int rocmFromEnv() {
  const char* env = std::getenv("UNICCL_EMU_ROCM");
  if (env == nullptr || *env == '\0') return 0;
  int major = -1, minor = -1, used = 0;
  if (std::sscanf(env, "%d.%d%n", &major, &minor, &used) != 2 || env[used] != '\0' || major < 5 || major > 99 ||
      minor < 0 || minor > 99) {
    std::fprintf(stderr, "[emu-gpu] UNICCL_EMU_ROCM=%s is not a ROCm release (<major>.<minor>, 5.0 or newer, e.g. "
                 "6.2): refusing to guess which runtime to emulate\n", env);
    std::exit(2);
  }
  return major * 10000000 + minor * 100000;
}

// What a ROCm release's runtime offers (0: CUDA, everything).
struct RocmVmm {
  bool vmm, fdExport, polled;
};
inline RocmVmm rocmVmm(int rocm) {
  if (rocm == 0) return RocmVmm{true, true, true};
  return RocmVmm{rocm >= 60000000, rocm >= 60200000, rocm >= 70200000};
}

}  // namespace uniccl::emu
