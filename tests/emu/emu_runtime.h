// The emulator's kernel runner: runs a CPU-compiled uniccl kernel
// (src/device with -DUNICCL_DEV_CPU, see src/device/port_cpu.h) as gridX
// blocks of OS threads (one per GPU thread), with per-block shared memory and
// named barriers. Installed into the emulated GPU backend (emu_gpu.h), which
// calls it on a stream's worker thread.
#pragma once

namespace uniccl::emu {

// Runs `kernel` (a void(dev::KernelArgs) compiled for the CPU) to completion
// as gridX blocks of blockX threads: the library's kernels are launched with
// dev::kThreadsPerBlock, what their code was compiled for; Device API test
// kernels (include/nccl_device/impl/port.h's emulator branch) with other
// sizes. blockX must be whole wavefronts, at most 1024 threads (else abort).
void runCpuKernel(const void* kernel, unsigned gridX, unsigned blockX, const void* argBytes);

// Installs runCpuKernel as the emulated backend's kernel runner (idempotent).
void installCpuKernelRunner();

}  // namespace uniccl::emu
