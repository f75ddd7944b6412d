#include "common/topo/sysfs_nics.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <sstream>

namespace uniccl::topo {

namespace {

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream in(path);
  for (std::string c; std::getline(in, c, '/');)
    if (!c.empty()) out.push_back(c);
  return out;
}

std::string resolved(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int pciDistance(const std::string& a, const std::string& b) {
  const std::vector<std::string> x = components(a), y = components(b);
  size_t common = 0;
  while (common < x.size() && common < y.size() && x[common] == y[common]) common++;
  return (int)(x.size() - common + y.size() - common);
}

std::vector<LocalNic> localNics(const std::string& gpuBusId, int maxNics, const std::string& sysRoot) {
  std::vector<LocalNic> out;
  const std::string gpu = resolved(sysRoot + "/bus/pci/devices/" + gpuBusId);
  for (const char* cls : {"/class/infiniband/", "/class/net/"}) {
    for (const std::string& name : entries(sysRoot + cls)) {
      if ((int)out.size() >= maxNics) return out;
      const std::string dev = resolved(sysRoot + cls + name + "/device");
      if (dev.empty()) continue;   // virtual interfaces (lo, bridges, veth): no PCI device
      out.push_back(LocalNic{name, gpu.empty() ? -1 : pciDistance(gpu, dev)});
    }
  }
  return out;
}

}  // namespace uniccl::topo
