#include "common/core/peer_info.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/check.h"
#include "common/gpu.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl {

namespace {

uint64_t fnv1a(const char* s, size_t n, uint64_t h = 1469598103934665603ULL) {
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ULL;
  }
  return h;
}

std::atomic<HostIdHook> hostIdHook{nullptr};

// The host identity set by the user, if any: UNICCL_HOSTID, then NCCL's name.
const char* hostIdKnob() {
  if (const char* id = knobValue(Knob::UNICCL_HOSTID)) return id;
  return knobValue(Knob::NCCL_HOSTID);
}

// Hostname plus boot id: two containers with the same hostname on different
// machines still differ; UNICCL_HOSTID / NCCL_HOSTID override it (unusual
// setups, several "hosts" on one machine).
uint64_t hostHash() {
  if (const char* id = hostIdKnob()) return fnv1a(id, strlen(id));
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string key(host);
  if (FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {0};
    if (fgets(boot, sizeof(boot), f)) key += boot;
    fclose(f);
  }
  return fnv1a(key.data(), key.size());
}

}  // namespace

ncclResult_t fillLocalPeerInfo(int gpuDev, PeerInfo* info) {
  memset(info, 0, sizeof(*info));
  info->hostHash = hostHash();
  info->pid = (int32_t)getpid();
  uint64_t pid = (uint64_t)info->pid;
  info->processHash = fnv1a(reinterpret_cast<const char*>(&pid), sizeof(pid), info->hostHash);
  char simulated[sizeof(info->hostName)];
  const HostIdHook hook = hostIdHook.load(std::memory_order_acquire);
  if (hook != nullptr && hook(gpuDev, simulated, sizeof(simulated))) {
    simulated[sizeof(simulated) - 1] = '\0';
    setPeerHost(simulated, info);
  } else if (const char* id = hostIdKnob()) {
    snprintf(info->hostName, sizeof(info->hostName), "%s", id);
  } else if (gethostname(info->hostName, sizeof(info->hostName) - 1) != 0) {
    snprintf(info->hostName, sizeof(info->hostName), "unknown");
  }
  info->gpuDev = gpuDev;
  gpu::DeviceProps props;
  UCHECK(gpu::getDeviceProps(gpuDev, &props));
  snprintf(info->busId, sizeof(info->busId), "%s", props.busId);
  info->busIdNum = ((int64_t)props.pciDomain << 32) | ((int64_t)props.pciBus << 8) | props.pciDevice;
  info->memCapacity = props.totalGlobalMem;
  info->smCount = props.multiProcessorCount;
  info->warpSize = (uint8_t)(props.warpSize > 0 && props.warpSize <= 64 ? props.warpSize : 32);
  info->lineStoreAtomic128 = props.lineStoreAtomic128 != 0 ? 1 : 0;
  return ncclSuccess;
}

void setPeerHost(const char* name, PeerInfo* info) {
  info->hostHash = fnv1a(name, strlen(name));
  uint64_t pid = (uint64_t)info->pid;
  info->processHash = fnv1a(reinterpret_cast<const char*>(&pid), sizeof(pid), info->hostHash);
  snprintf(info->hostName, sizeof(info->hostName), "%s", name);
}

void setHostIdHookForTesting(HostIdHook hook) { hostIdHook.store(hook, std::memory_order_release); }

}  // namespace uniccl
