// The emulator's kernel runner: runs a CPU-compiled uniccl kernel
// (src/device with -DUNICCL_DEV_CPU, see src/device/port_cpu.h) as gridX
// blocks of OS threads (one per GPU thread), with per-block shared memory and
// named barriers. Installed into the emulated GPU backend (emu_gpu.h), which
// calls it on a stream's worker thread.
#pragma once

namespace uniccl::emu {

// Runs `kernel` (a void(dev::KernelArgs) compiled for the CPU) to completion.
// blockX is ignored: the CPU build's dev::kThreadsPerBlock is what the
// kernel code was compiled for (the host library asks for the GPU build's).
void runCpuKernel(const void* kernel, unsigned gridX, unsigned blockX, const void* argBytes);

// The same as gridX blocks of blockX threads, as the launch asks: for Device
// API test kernels (include/nccl_device/impl/port.h's emulator branch reads
// the block size at run time). blockX must be whole wavefronts, at most 1024
// threads (else abort).
void runSizedCpuKernel(const void* kernel, unsigned gridX, unsigned blockX, const void* argBytes);

// Installs runCpuKernel / runSizedCpuKernel as the emulated backend's kernel
// runner (idempotent; the last one installed runs later launches).
void installCpuKernelRunner();
void installSizedCpuKernelRunner();

}  // namespace uniccl::emu
