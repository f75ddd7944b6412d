// What every rank tells every other rank at init (bootstrap allgather), and
// the second exchange: which peers' GPUs this rank can address directly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/util/socket_address.h"
#include "uniccl.h"

namespace uniccl {

struct PeerInfo {
  uint64_t hostHash;      // hostname + boot id: equal means same machine
  uint64_t processHash;   // hostHash + pid: equal means same process (raw pointers work)
  int32_t pid;
  int32_t gpuDev;        // device index in that rank's own process
  int64_t busIdNum;       // PCI bus id as a number (dup-GPU detection)
  char busId[32];         // "0000:3b:00.0"
  char hostName[64];      // the host identity as text (hostname, or NCCL_HOSTID / UNICCL_HOSTID, or a topology file's host)
  uint64_t memCapacity;   // device memory, for diagnostics
  int32_t smCount;        // multiprocessors: the default channel count needs one per channel on every GPU
  // Several ranks on one GPU (core/gpu_sharing.h): what each rank's process
  // says about its GPU, so that every rank takes the same decision.
  int32_t residentBlocks; // collective blocks this GPU holds resident at once (occupancy)
  int32_t shareLimit;     // ranks this rank accepts on its GPU (1: refuse duplicates)
  int32_t virtualId;      // ncclCommInitRankMulti's id, -1 otherwise
  int32_t workQueues;     // host-to-device work queues of its process
  uint8_t processesShare; // kernels of different processes run at once on its GPU (MPS)
  uint8_t warpSize;       // threads of a warp/wavefront on its GPU (32, or 64 on CDNA)
  uint8_t lineStoreAtomic128;  // its GPU delivers a warp's aligned 128-byte store whole (LL128)
  uint8_t pad[5];
  SocketAddress livenessListen;  // where its ring predecessor's liveness link connects (common/liveness)
};

// Fills the caller's own entry.
[[nodiscard]] ncclResult_t fillLocalPeerInfo(int gpuDev, PeerInfo* info);

// Makes `name` the host identity of `info` (hostHash, processHash,
// hostName), as UNICCL_HOSTID=name would (a topology file's host).
void setPeerHost(const char* name, PeerInfo* info);

// Tests that simulate a cluster in one process (tests/unit/scale): the host
// identity of the rank on GPU `gpuDev`, written into name[cap] as
// UNICCL_HOSTID would give it; false leaves the usual identity. Without a
// hook (the default) nothing changes. Set before any init starts.
using HostIdHook = bool (*)(int gpuDev, char* name, size_t cap);
void setHostIdHookForTesting(HostIdHook hook);

}  // namespace uniccl
