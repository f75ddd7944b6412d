#include "net/ib/ib_devices.h"

#include <arpa/inet.h>
#include <strings.h>

#include <cstring>

#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl {
namespace ib {

int portSpeedMbps(int activeSpeed, int activeWidth) {
  int lane;  // Mbps per lane
  switch (activeSpeed) {
    case 1: lane = 2500; break;     // SDR
    case 2: lane = 5000; break;     // DDR
    case 4: lane = 10000; break;    // QDR
    case 8: lane = 10000; break;    // FDR10
    case 16: lane = 14000; break;   // FDR
    case 32: lane = 25000; break;   // EDR
    case 64: lane = 50000; break;   // HDR
    case 128: lane = 100000; break; // NDR
    case 256: lane = 200000; break; // XDR
    default: lane = 10000; break;   // unknown encoding: NCCL's guess
  }
  int lanes;
  switch (activeWidth) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: lanes = 1; break;
  }
  return lane * lanes;
}

const char* linkLayerName(LinkLayer ll) {
  switch (ll) {
    case LinkLayer::kInfiniBand: return "IB";
    case LinkLayer::kEthernet: return "RoCE";
    default: return "unspecified";
  }
}

std::string gidToString(const Gid& gid) {
  char buf[INET6_ADDRSTRLEN];
  if (inet_ntop(AF_INET6, gid.raw, buf, sizeof(buf)) == nullptr) return "?";
  return buf;
}

ncclResult_t discoveryOptionsFromEnv(DiscoveryOptions* opts) {
  *opts = DiscoveryOptions();
  const char* hca = knobValue(Knob::NCCL_IB_HCA);
  if (parseHcaList(hca, &opts->hca) != ncclSuccess) return ncclInvalidArgument;
  opts->gidIndex = (int)knobInt(Knob::NCCL_IB_GID_INDEX);
  opts->roceVersion = (int)knobInt(Knob::NCCL_IB_ROCE_VERSION_NUM);
  if (opts->roceVersion != 1 && opts->roceVersion != 2) {
    WARN("NCCL_IB_ROCE_VERSION_NUM=%d: expected 1 or 2; using 2", opts->roceVersion);
    opts->roceVersion = 2;
  }
  const char* fam = knobValue(Knob::NCCL_IB_ADDR_FAMILY);
  if (fam == nullptr || fam[0] == '\0' || strcasecmp(fam, "AF_INET") == 0) {
    opts->family = AF_INET;
  } else if (strcasecmp(fam, "AF_INET6") == 0) {
    opts->family = AF_INET6;
  } else {
    WARN("NCCL_IB_ADDR_FAMILY=%s: expected AF_INET or AF_INET6; using AF_INET", fam);
    opts->family = AF_INET;
  }
  return ncclSuccess;
}

namespace {

// Adds the usable ports of device `index`; skips (with a WARN) a device that fails.
void addDevicePorts(Verbs* v, DeviceList* list, int index, const DiscoveryOptions& opts,
                    std::vector<IbDevice>* out) {
  std::string name = v->deviceName(list, index);
  // A device whose every port the filter refuses is never opened.
  bool any = false;
  for (int p = 1; p <= 255 && !any; p++) any = hcaMatches(opts.hca, name, p);
  if (!any) {
    INFO(kSubsysInit | kSubsysNet, "NET/IB: %s skipped (NCCL_IB_HCA)", name.c_str());
    return;
  }
  Context* rawCtx = nullptr;
  if (int err = v->openDevice(list, index, &rawCtx)) {
    WARN("NET/IB: cannot open %s: %s (check the device's permissions and that its driver is loaded): skipped",
         name.c_str(), strerror(err));
    return;
  }
  auto dc = std::make_shared<DeviceContext>();
  dc->verbs = v;
  dc->ctx = own<ContextPtr>(v, rawCtx);
  if (int err = v->queryDevice(rawCtx, &dc->attr)) {
    WARN("NET/IB: ibv_query_device on %s failed: %s: skipped", name.c_str(), strerror(err));
    return;
  }
  std::string pci = v->devicePciPath(list, index);
  for (int port = 1; port <= dc->attr.physPortCnt && (int)out->size() < kMaxIbDevices; port++) {
    if (!hcaMatches(opts.hca, name, port)) continue;
    PortAttr pa;
    if (int err = v->queryPort(rawCtx, port, &pa)) {
      WARN("NET/IB: ibv_query_port on %s:%d failed: %s: port skipped", name.c_str(), port, strerror(err));
      continue;
    }
    if (pa.state != kPortActive) {
      INFO(kSubsysInit | kSubsysNet, "NET/IB: %s:%d is not active (state %d): skipped", name.c_str(), port, pa.state);
      continue;
    }
    if (pa.linkLayer != LinkLayer::kInfiniBand && pa.linkLayer != LinkLayer::kEthernet) {
      INFO(kSubsysInit | kSubsysNet, "NET/IB: %s:%d has link layer %d (neither IB nor Ethernet): skipped",
           name.c_str(), port, (int)pa.linkLayer);
      continue;
    }
    std::vector<GidEntry> table;
    for (int g = 0; g < pa.gidTblLen; g++) {
      GidEntry e{};
      if (v->queryGid(rawCtx, port, g, &e.gid) != 0) memset(&e.gid, 0, sizeof(e.gid));  // unreadable: unusable
      if (v->queryGidType(rawCtx, port, g, &e.type) != 0) e.type = GidType::kUnknown;
      table.push_back(e);
    }
    int gidIndex = chooseGidIndex(table, pa.linkLayer, opts.gidIndex, opts.family, opts.roceVersion);
    if (gidIndex < 0) {
      if (opts.gidIndex >= 0)
        WARN("NET/IB: %s:%d has no usable GID at NCCL_IB_GID_INDEX=%d (table of %d entries): port skipped; "
             "unset NCCL_IB_GID_INDEX or pick a populated index (show_gids)",
             name.c_str(), port, opts.gidIndex, pa.gidTblLen);
      else
        WARN("NET/IB: %s:%d has no valid GID (is an IP address configured on its netdev?): port skipped",
             name.c_str(), port);
      continue;
    }
    IbDevice d;
    d.name = name;
    d.port = port;
    d.portAttr = pa;
    d.gidIndex = gidIndex;
    d.gid = table[gidIndex].gid;
    d.gidType = table[gidIndex].type;
    d.speedMbps = portSpeedMbps(pa.activeSpeed, pa.activeWidth);
    d.pciPath = pci;
    d.context = dc;
    INFO(kSubsysInit | kSubsysNet, "NET/IB: device %zu: %s:%d %s, %d Mbps, MTU %d, GID %d (%s, RoCE v%d), LID %u",
         out->size(), name.c_str(), port, linkLayerName(pa.linkLayer), d.speedMbps, mtuBytes(pa.activeMtu),
         gidIndex, gidToString(d.gid).c_str(), roceVersion(d.gidType), (unsigned)pa.lid);
    out->push_back(std::move(d));
  }
  if (dc.use_count() == 1) return;  // no usable port: the context closes here
  Pd* rawPd = nullptr;
  if (int err = v->allocPd(rawCtx, &rawPd)) {
    WARN("NET/IB: ibv_alloc_pd on %s failed: %s: device skipped", name.c_str(), strerror(err));
    while (!out->empty() && out->back().context == dc) out->pop_back();
    return;
  }
  dc->pd = own<PdPtr>(v, rawPd);
}

}  // namespace

ncclResult_t discoverDevices(Verbs* verbs, const DiscoveryOptions& opts, std::vector<IbDevice>* out) {
  out->clear();
  DeviceList* rawList = nullptr;
  int count = 0;
  if (int err = verbs->getDeviceList(&rawList, &count)) {
    INFO(kSubsysInit | kSubsysNet, "NET/IB: no RDMA devices (ibv_get_device_list: %s)", strerror(err));
    return ncclSuccess;
  }
  DeviceListPtr list(rawList, DeviceListDeleter{verbs});
  for (int i = 0; i < count && (int)out->size() < kMaxIbDevices; i++) addDevicePorts(verbs, rawList, i, opts, out);
  return ncclSuccess;
}

}  // namespace ib
}  // namespace uniccl
