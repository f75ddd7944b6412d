#include "common/core/comm_topology.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "common/check.h"
#include "common/core/comm.h"
#include "common/gpu.h"
#include "common/topo/host_ranks.h"
#include "common/topo/sysfs_nics.h"
#include "common/topo/topo_file.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl::topo {

namespace {

constexpr int kMaxNics = 8;

// What each rank tells the others about its GPU's surroundings.
struct NicReport {
  char name[30];
  int16_t distance;   // PCI hops to this rank's GPU, -1 unknown
};
struct TopoReport {
  uint8_t nicCount;
  uint8_t pad[7];
  NicReport nics[kMaxNics];
  // followed by 2 bytes per rank of this rank's host (HostRanks: by local
  // index, the row as wide as the largest host): the link kind and count
  // from this rank's GPU to that rank's (gpu.h, peerLinkKind). Other hosts'
  // ranks have no link, so the rows stay O(ranks per host).
};

// Host names as the file format takes them: one word, no comment mark.
std::string fileWord(const char* name) {
  std::string s(name);
  if (s.empty()) s = "host";
  for (char& c : s)
    if (c == ' ' || c == '\t' || c == '#' || c == '\n' || c == '\r') c = '_';
  return s;
}

}  // namespace

ncclResult_t localReport(ncclComm* comm, const HostRanks& hosts, std::vector<char>* row) {
  const int n = comm->nRanks;
  row->assign(sizeof(TopoReport) + 2 * (size_t)hosts.rowWidth, 0);
  TopoReport rep;
  memset(&rep, 0, sizeof(rep));
  const PeerInfo& me = comm->peers[comm->rank];
  const std::vector<LocalNic> nics = localNics(me.busId, kMaxNics);
  rep.nicCount = (uint8_t)nics.size();
  for (size_t i = 0; i < nics.size(); i++) {
    snprintf(rep.nics[i].name, sizeof(rep.nics[i].name), "%s", nics[i].name.c_str());
    rep.nics[i].distance = (int16_t)std::min(nics[i].distance, 32767);
  }
  memcpy(row->data(), &rep, sizeof(rep));
  uint8_t* links = reinterpret_cast<uint8_t*>(row->data() + sizeof(rep));
  for (int r = 0; r < n; r++) {
    const PeerInfo& p = comm->peers[r];
    if (!hosts.sameHost(r, comm->rank) || p.busIdNum == me.busIdNum) continue;
    int peerDev = -1;
    if (p.processHash == me.processHash) {
      peerDev = p.gpuDev;
    } else if (gpu::deviceGetByBusId(p.busId, &peerDev) != ncclSuccess) {
      continue;   // not visible in this process: no peer link known
    }
    int kind = gpu::kPeerLinkNone, count = 0;
    if (gpu::peerLinkKind(comm->gpuDev, peerDev, &kind, &count) != ncclSuccess) continue;
    links[2 * hosts.localIndex[r]] = (uint8_t)kind;
    links[2 * hosts.localIndex[r] + 1] = (uint8_t)std::min(count, 255);
  }
  return ncclSuccess;
}

namespace {

// The system every rank's report describes (all: [nRanks][bytes]).
[[nodiscard]] ncclResult_t discover(ncclComm* comm, const HostRanks& hosts, const std::vector<char>& all, size_t bytes,
                                    System* out) {
  const int n = comm->nRanks;
  if (bytes < sizeof(TopoReport) + 2 * (size_t)hosts.rowWidth || all.size() != bytes * n) {
    WARN("Rank %d: topology reports of %zu bytes (%zu in all) for %d ranks and hosts of up to %d", comm->rank, bytes,
         all.size(), n, hosts.rowWidth);
    return ncclInternalError;
  }
  auto report = [&](int r) {
    TopoReport rep;
    memcpy(&rep, all.data() + bytes * r, sizeof(rep));
    return rep;
  };
  // from and to share a host (the ranks of one host's GPUs).
  auto link = [&](int from, int to) {
    const uint8_t* l = reinterpret_cast<const uint8_t*>(all.data() + bytes * from + sizeof(TopoReport));
    const int i = hosts.localIndex[to];
    return Link{(LinkClass)std::min<int>(l[2 * i], (int)LinkClass::Switch), (int)l[2 * i + 1]};
  };

  System sys;
  std::map<uint64_t, int> hostOf;
  std::vector<std::map<int64_t, int>> gpuOf;
  std::vector<std::vector<int>> rankOfGpu;   // host -> GPU -> a rank on it
  sys.ranks.resize(n);
  std::map<std::string, int> names;
  for (int r = 0; r < n; r++) {
    const PeerInfo& p = comm->peers[r];
    auto it = hostOf.find(p.hostHash);
    if (it == hostOf.end()) {
      it = hostOf.emplace(p.hostHash, sys.nHosts()).first;
      Host h;
      h.name = fileWord(p.hostName);
      if (names[h.name]++ > 0) h.name += "-" + std::to_string(sys.nHosts());   // same name, other identity
      sys.hosts.push_back(h);
      gpuOf.emplace_back();
    }
    sys.ranks[r].host = it->second;
  }
  // GPUs of each host by PCI bus id.
  for (int r = 0; r < n; r++) gpuOf[sys.ranks[r].host][comm->peers[r].busIdNum] = 0;
  rankOfGpu.resize(sys.nHosts());
  for (int h = 0; h < sys.nHosts(); h++) {
    int i = 0;
    for (auto& kv : gpuOf[h]) kv.second = i++;
    sys.hosts[h].gpus.resize(i);
    rankOfGpu[h].assign(i, -1);
  }
  for (int r = 0; r < n; r++) {
    const int h = sys.ranks[r].host, g = gpuOf[h][comm->peers[r].busIdNum];
    sys.ranks[r].gpu = g;
    if (rankOfGpu[h][g] < 0) {
      rankOfGpu[h][g] = r;
      sys.hosts[h].gpus[g].busId = comm->peers[r].busId;
    }
  }
  for (int h = 0; h < sys.nHosts(); h++) {
    Host& host = sys.hosts[h];
    const int g = host.gpuCount();
    host.links.assign((size_t)g * g, Link{});
    for (int a = 0; a < g; a++)
      for (int b = 0; b < g; b++)
        host.setLink(a, b, a == b ? Link{LinkClass::Self, 0} : link(rankOfGpu[h][a], rankOfGpu[h][b]));
    // NICs: every name any rank of the host reported, distances from each GPU's report.
    for (int a = 0; a < g; a++) {
      const TopoReport rep = report(rankOfGpu[h][a]);
      for (int k = 0; k < std::min<int>(rep.nicCount, kMaxNics); k++) {
        char name[sizeof(rep.nics[k].name) + 1] = {0};
        memcpy(name, rep.nics[k].name, sizeof(rep.nics[k].name));
        auto nic = std::find_if(host.nics.begin(), host.nics.end(), [&](const Nic& x) { return x.name == name; });
        if (nic == host.nics.end()) {
          host.nics.push_back(Nic{fileWord(name), std::vector<int>(g, -1)});
          nic = host.nics.end() - 1;
        }
        nic->distance[a] = rep.nics[k].distance;
      }
    }
  }
  *out = std::move(sys);
  return ncclSuccess;
}

}  // namespace

ncclResult_t placeFromFile(int rank, int nRanks, PeerInfo* info, System* fromFile) {
  *fromFile = System{};
  const char* path = knobValue(Knob::NCCL_TOPO_FILE);
  if (path == nullptr || *path == '\0') return ncclSuccess;
  std::ifstream f(path);
  if (!f) {
    WARN("NCCL_TOPO_FILE=%s cannot be read: %s", path, strerror(errno));
    return ncclSystemError;
  }
  std::stringstream text;
  text << f.rdbuf();
  if (looksLikeXml(text.str())) {
    static bool told = false;   // benign race: at worst the WARN appears twice
    if (!told) WARN("NCCL_TOPO_FILE=%s is NCCL's XML topology, which uniccl does not read: discovering the topology "
                    "(docs/topology.md has uniccl's format)", path);
    told = true;
    return ncclSuccess;
  }
  System sys;
  std::string error;
  if (!parseTopology(text.str(), &sys, &error)) {
    WARN("NCCL_TOPO_FILE=%s: %s (format: docs/topology.md)", path, error.c_str());
    return ncclInvalidArgument;
  }
  if (sys.nRanks() != nRanks) {
    INFO(kSubsysInit, "NCCL_TOPO_FILE=%s places %d ranks, this communicator has %d: discovering its topology", path,
         sys.nRanks(), nRanks);
    return ncclSuccess;
  }
  setPeerHost(sys.hosts[sys.ranks[rank].host].name.c_str(), info);
  *fromFile = std::move(sys);
  return ncclSuccess;
}

ncclResult_t buildTopology(ncclComm* comm, const HostRanks& hosts, const std::vector<char>& reports, size_t rowBytes,
                           System* sys) {
  const bool fromFile = sys->nRanks() == comm->nRanks;
  if (!fromFile) UCHECK(discover(comm, hosts, reports, rowBytes, sys));
  int meshes = 0;
  for (const Host& h : sys->hosts) meshes += h.directMesh() ? 1 : 0;
  INFO(kSubsysInit, "Rank %d: topology %s: %d hosts, %d with a direct-link GPU mesh; this rank on host %s GPU %d",
       comm->rank, fromFile ? "from NCCL_TOPO_FILE" : "discovered", sys->nHosts(), meshes,
       sys->hosts[sys->ranks[comm->rank].host].name.c_str(), sys->ranks[comm->rank].gpu);
  const char* dump = knobValue(Knob::NCCL_TOPO_DUMP_FILE);
  if (comm->rank == 0 && dump != nullptr && *dump != '\0') UCHECK(writeTopologyFile(dump, *sys));
  return ncclSuccess;
}

}  // namespace uniccl::topo
