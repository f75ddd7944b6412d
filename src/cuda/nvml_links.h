// NVLink lanes from NVML: how many of a GPU's active links reach an NVSwitch
// and how many reach a given peer GPU directly. The CUDA runtime tells only
// that two GPUs have native P2P atomics (NVLink of some kind), not through
// what or how many lanes; NCCL reads the same from NVML. NVML is loaded at
// first use (libnvidia-ml.so.1, shipped with the driver) and never linked,
// so a machine without it still runs: the counts are then unknown.
#pragma once

namespace uniccl::gpu::nvml {

struct NvlinkCounts {
  int toSwitch = 0;   // active links of the GPU whose far end is an NVSwitch
  int toPeer = 0;     // active links of the GPU whose far end is the peer GPU
};

// Counts for the GPU with PCI bus id `busId` ("0000:19:00.0", as the CUDA
// runtime writes it) towards `peerBusId`. False when NVML is missing, does
// not know the GPU, or answers with an error (nothing is counted then).
bool nvlinkCounts(const char* busId, const char* peerBusId, NvlinkCounts* out);

}  // namespace uniccl::gpu::nvml
