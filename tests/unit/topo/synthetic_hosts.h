// Synthetic systems for the cost model's tests: H alike hosts of G GPUs
// joined by one link class, N NICs each, ranks host by host.
#pragma once

#include <cstdio>
#include <string>

#include "common/topo/system.h"

namespace uniccl::test {

inline topo::System alikeHosts(int hosts, int gpus, topo::LinkClass cls, int nics) {
  topo::System sys;
  for (int h = 0; h < hosts; h++) {
    topo::Host host;
    host.name = "node" + std::to_string(h);
    for (int i = 0; i < gpus; i++) {
      char bus[32];
      snprintf(bus, sizeof(bus), "0000:%02x:00.0", 0x10 + i);
      host.gpus.push_back(topo::Gpu{bus});
    }
    host.links.assign((size_t)gpus * gpus, topo::Link{cls, 1});
    for (int i = 0; i < gpus; i++) host.setLink(i, i, topo::Link{topo::LinkClass::Self, 0});
    for (int k = 0; k < nics; k++) {
      topo::Nic nic;
      nic.name = "nic" + std::to_string(k);
      for (int i = 0; i < gpus; i++) nic.distance.push_back(i * nics / gpus == k ? 1 : 4);
      host.nics.push_back(nic);
    }
    sys.hosts.push_back(host);
  }
  for (int h = 0; h < hosts; h++)
    for (int i = 0; i < gpus; i++) sys.ranks.push_back(topo::RankPlace{h, i});
  return sys;
}

}  // namespace uniccl::test
