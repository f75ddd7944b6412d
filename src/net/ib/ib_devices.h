// Discovery of the IB transport's devices: one net device per active port
// (InfiniBand or Ethernet/RoCE link layer) of every HCA that NCCL_IB_HCA lets
// through, with the GID its QPs will use.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "net/ib/gid_select.h"
#include "net/ib/hca_list.h"
#include "net/ib/verbs_handles.h"

namespace uniccl {
namespace ib {

// One opened HCA with its protection domain, shared by its ports' devices and
// by every comm and registration made on them (the last owner closes it).
struct DeviceContext {
  Verbs* verbs = nullptr;
  ContextPtr ctx;  // declared before pd: destroyed after it
  PdPtr pd;
  DeviceAttr attr;
};

struct IbDevice {
  std::string name;  // HCA name ("mlx5_0")
  int port = 0;
  PortAttr portAttr;
  int gidIndex = 0;
  Gid gid{};
  GidType gidType = GidType::kUnknown;
  int speedMbps = 0;
  std::string pciPath;
  std::shared_ptr<DeviceContext> context;
};

struct DiscoveryOptions {
  HcaFilter hca;
  int gidIndex = -1;  // NCCL_IB_GID_INDEX (-1: choose)
  int family = AF_INET;
  int roceVersion = 2;
};

// Reads NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_IB_ADDR_FAMILY and NCCL_IB_ROCE_VERSION_NUM.
ncclResult_t discoveryOptionsFromEnv(DiscoveryOptions* opts);

// Devices in HCA order, ports ascending, at most kMaxIbDevices. No RDMA
// device (or none that passes the filter) is not an error: *out stays empty.
// A device that cannot be opened or queried is skipped with a WARN.
ncclResult_t discoverDevices(Verbs* verbs, const DiscoveryOptions& opts, std::vector<IbDevice>* out);

constexpr int kMaxIbDevices = 32;

// Port bandwidth in Mbps from ibv_port_attr's encoded active_speed x active_width.
int portSpeedMbps(int activeSpeed, int activeWidth);

const char* linkLayerName(LinkLayer ll);
std::string gidToString(const Gid& gid);

}  // namespace ib
}  // namespace uniccl
