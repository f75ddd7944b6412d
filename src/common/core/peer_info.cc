#include "common/core/peer_info.h"

#include <unistd.h>

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

// Hostname plus boot id: two containers with the same hostname on different
// machines still differ; UNICCL_HOSTID overrides it for unusual setups.
uint64_t hostHash() {
  if (const char* id = knobValue(Knob::UNICCL_HOSTID)) return fnv1a(id, strlen(id));
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

}  // namespace uniccl
