// Which device of the network transport each channel's connections use.
//
// The topology gives every channel one NIC per host (topo/nics.h: the NIC
// nearest to the GPU through which the channel enters the host, spread over
// the NICs). The network transport numbers its own devices (NCCL_SOCKET_IFNAME
// or NCCL_IB_HCA select them), so the NIC is found among them by name; a NIC
// the transport does not list (a topology file describing another machine,
// sysfs names the transport spells differently) maps to the transport's
// devices in turn (index mod devices), which keeps channels spread. Without
// a NIC in the topology a rank uses device (GPU index mod devices) for every
// channel, so that the GPUs of a host share the devices out.
#pragma once

#include <string>
#include <vector>

#include "common/topo/nics.h"

namespace uniccl {

// devices: the transport's device names (index = device number), at least
// one. gpuDev: this rank's GPU index (negative: none). One device per entry
// of `nics`.
std::vector<int> channelNetDevices(const std::vector<topo::ChannelNic>& nics, const std::vector<std::string>& devices,
                                   int gpuDev);

}  // namespace uniccl
