// The NICs this host shows in sysfs (/sys/class/infiniband, then the
// network interfaces of /sys/class/net that sit on a PCI device) and their
// PCI distance to a GPU: the hops from each device up to the deepest bridge
// the two share in /sys/devices (different root complexes: the sum of both
// depths, the farthest).
#pragma once

#include <string>
#include <vector>

namespace uniccl::topo {

struct LocalNic {
  std::string name;
  int distance;   // PCI hops to the GPU; -1: unknown (the GPU or the NIC is not in sysfs)
};

// At most `maxNics` NICs, InfiniBand devices first. `sysRoot` is "/sys" but
// for tests.
std::vector<LocalNic> localNics(const std::string& gpuBusId, int maxNics, const std::string& sysRoot = "/sys");

// PCI hops between two resolved /sys/devices paths (exposed for tests).
int pciDistance(const std::string& a, const std::string& b);

}  // namespace uniccl::topo
