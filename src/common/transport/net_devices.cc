#include "common/transport/net_devices.h"

namespace uniccl {

std::vector<int> channelNetDevices(const std::vector<topo::ChannelNic>& nics, const std::vector<std::string>& devices,
                                   int gpuDev) {
  const int ndev = (int)devices.size();
  std::vector<int> out(nics.size(), 0);
  if (ndev < 1) return out;
  const int fallback = gpuDev >= 0 ? gpuDev % ndev : 0;
  for (size_t c = 0; c < nics.size(); c++) {
    const topo::ChannelNic& nic = nics[c];
    int dev = -1;
    for (int d = 0; d < ndev && dev < 0 && !nic.name.empty(); d++)
      if (devices[d] == nic.name) dev = d;
    if (dev < 0) dev = nic.index >= 0 ? nic.index % ndev : fallback;
    out[c] = dev;
  }
  return out;
}

}  // namespace uniccl
