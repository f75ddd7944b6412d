// NVLink lanes from NVML (nvml_links.h). The few NVML entry points used are
// declared here with the types of NVML's C API (nvml.h is not part of the
// CUDA toolkit everywhere uniccl builds) and resolved with dlsym.
#include "cuda/nvml_links.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>

#include "common/util/debug.h"

namespace uniccl::gpu::nvml {

namespace {

using nvmlReturn_t = int;               // NVML_SUCCESS = 0
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlEnableState_t = int;          // NVML_FEATURE_ENABLED = 1
using nvmlIntNvLinkDeviceType_t = int;  // NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
constexpr nvmlEnableState_t kFeatureEnabled = 1;
constexpr nvmlIntNvLinkDeviceType_t kRemoteSwitch = 2;
// NVML_NVLINK_MAX_LINKS: 18 from Hopper on; a link index past a GPU's last
// answers an error, which ends the count.
constexpr unsigned kMaxLinks = 18;

// nvmlPciInfo_t (NVML's PCI identification of a device).
struct PciInfo {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};

struct Api {
  bool ok = false;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*handleByBusId)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*linkState)(nvmlDevice_t, unsigned int, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*remotePci)(nvmlDevice_t, unsigned int, PciInfo*) = nullptr;
  nvmlReturn_t (*remoteType)(nvmlDevice_t, unsigned int, nvmlIntNvLinkDeviceType_t*) = nullptr;   // optional
};

template <typename F>
bool resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

// Loaded once per process and kept: NVML stays initialized for the
// process's life (as NCCL keeps it), so no shutdown races a later caller.
const Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      INFO(kSubsysInit, "NVML not found (%s): NVLink lane counts unknown", dlerror());
      return;
    }
    const bool all = resolve(lib, "nvmlInit_v2", &a.init) &&
                     resolve(lib, "nvmlDeviceGetHandleByPciBusId_v2", &a.handleByBusId) &&
                     resolve(lib, "nvmlDeviceGetNvLinkState", &a.linkState) &&
                     resolve(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &a.remotePci);
    resolve(lib, "nvmlDeviceGetNvLinkRemoteDeviceType", &a.remoteType);
    if (!all || a.init() != 0) {
      INFO(kSubsysInit, "NVML lacks an NVLink query or failed to initialize: NVLink lane counts unknown");
      return;
    }
    a.ok = true;
  });
  return a;
}

// Domain, bus and device of a bus id in either spelling ("0000:19:00.0",
// "00000000:19:00.0").
bool parseBusId(const char* s, unsigned* domain, unsigned* bus, unsigned* device) {
  unsigned fn = 0;
  return sscanf(s, "%x:%x:%x.%x", domain, bus, device, &fn) == 4;
}

}  // namespace

bool nvlinkCounts(const char* busId, const char* peerBusId, NvlinkCounts* out) {
  *out = NvlinkCounts{};
  const Api& a = api();
  unsigned pd = 0, pb = 0, pv = 0;
  if (!a.ok || !parseBusId(peerBusId, &pd, &pb, &pv)) return false;
  nvmlDevice_t dev = nullptr;
  if (a.handleByBusId(busId, &dev) != 0) return false;
  for (unsigned link = 0; link < kMaxLinks; link++) {
    nvmlEnableState_t active = 0;
    if (a.linkState(dev, link, &active) != 0) break;   // past this GPU's links
    if (active != kFeatureEnabled) continue;
    nvmlIntNvLinkDeviceType_t type = -1;
    if (a.remoteType != nullptr && a.remoteType(dev, link, &type) == 0 && type == kRemoteSwitch) {
      out->toSwitch++;
      continue;
    }
    PciInfo far{};
    if (a.remotePci(dev, link, &far) != 0) continue;
    if (far.domain == pd && far.bus == pb && far.device == pv) out->toPeer++;
  }
  return true;
}

}  // namespace uniccl::gpu::nvml
