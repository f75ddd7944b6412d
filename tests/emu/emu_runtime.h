// The emulator's kernel runner: runs a CPU-compiled uniccl kernel
// (src/device with -DUNICCL_DEV_CPU, see src/device/port_cpu.h) as gridX
// blocks of dev::kThreadsPerBlock OS threads, with per-block shared memory and
// named barriers. Installed into the emulated GPU backend (emu_gpu.h), which
// calls it on a stream's worker thread.
#pragma once

namespace uniccl::emu {

// Runs `kernel` (a void(dev::KernelArgs) compiled for the CPU) to completion.
// blockX is ignored: the CPU build's dev::kThreadsPerBlock is what the
// kernel code was compiled for.
void runCpuKernel(const void* kernel, unsigned gridX, unsigned blockX, const void* argBytes);

// Installs runCpuKernel as the emulated backend's kernel runner (idempotent).
void installCpuKernelRunner();

}  // namespace uniccl::emu
