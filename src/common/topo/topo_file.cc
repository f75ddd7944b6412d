#include "common/topo/topo_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "common/util/debug.h"

namespace uniccl::topo {

namespace {

constexpr const char* kMagic = "uniccl-topology";
constexpr int kVersion = 1;

bool sameLink(const Link& a, const Link& b) { return a.cls == b.cls && a.count == b.count; }

// Grows host h's link table to its GPU count, keeping what is set.
void resizeLinks(Host* host) {
  const size_t g = host->gpus.size(), old = g - 1;
  std::vector<Link> links(g * g);
  for (size_t a = 0; a < old; a++)
    for (size_t b = 0; b < old; b++) links[a * g + b] = host->links[a * old + b];
  links[(g - 1) * g + (g - 1)] = Link{LinkClass::Self, 0};
  host->links.swap(links);
}

bool parseInt(const std::string& s, int* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long v = strtol(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < -1 || v > 1000000) return false;
  *out = (int)v;
  return true;
}

bool parseDistances(const std::string& s, std::vector<int>* out) {
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    int d = -1;
    if (item != "-" && (!parseInt(item, &d) || d < 0)) return false;
    out->push_back(d);
  }
  return true;
}

}  // namespace

std::string formatTopology(const System& sys) {
  std::ostringstream o;
  o << kMagic << ' ' << kVersion << '\n';
  for (const Host& h : sys.hosts) {
    o << "host " << h.name << '\n';
    for (const Gpu& g : h.gpus) o << "gpu " << g.busId << '\n';
    const int g = h.gpuCount();
    bool uniform = g > 1;
    for (int a = 0; a < g; a++)
      for (int b = 0; b < g; b++)
        if (a != b && !sameLink(h.link(a, b), h.link(0, 1))) uniform = false;
    if (uniform) {
      o << "links " << linkClassName(h.link(0, 1).cls) << ' ' << h.link(0, 1).count << '\n';
    } else {
      for (int a = 0; a < g; a++)
        for (int b = 0; b < g; b++)
          if (a != b && (h.link(a, b).cls != LinkClass::None || h.link(a, b).count != 0))
            o << "link " << a << ' ' << b << ' ' << linkClassName(h.link(a, b).cls) << ' ' << h.link(a, b).count
              << '\n';
    }
    for (const Nic& n : h.nics) {
      o << "nic " << n.name;
      for (size_t i = 0; i < n.distance.size(); i++) {
        o << (i == 0 ? ' ' : ',');
        if (n.distance[i] < 0) o << '-';
        else o << n.distance[i];
      }
      o << '\n';
    }
  }
  for (int r = 0; r < sys.nRanks(); r++)
    o << "rank " << r << ' ' << sys.hosts[sys.ranks[r].host].name << ' ' << sys.ranks[r].gpu << '\n';
  return o.str();
}

bool looksLikeXml(const std::string& text) {
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    return c == '<';
  }
  return false;
}

bool parseTopology(const std::string& text, System* out, std::string* error) {
  System sys;
  std::map<std::string, int> hostIndex;
  std::map<int, RankPlace> ranks;
  std::istringstream in(text);
  std::string line;
  int lineNo = 0;
  bool magic = false;
  auto fail = [&](const std::string& why) {
    *error = "line " + std::to_string(lineNo) + ": " + why;
    return false;
  };
  while (std::getline(in, line)) {
    lineNo++;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    if (w.empty()) continue;
    if (!magic) {
      int v = 0;
      if (w.size() != 2 || w[0] != kMagic || !parseInt(w[1], &v))
        return fail(std::string("the first line must be '") + kMagic + " " + std::to_string(kVersion) + "'");
      if (v != kVersion) return fail("version " + w[1] + " is not supported (this library reads version 1)");
      magic = true;
      continue;
    }
    Host* host = sys.hosts.empty() ? nullptr : &sys.hosts.back();
    const std::string& kw = w[0];
    if (kw == "host") {
      if (w.size() != 2) return fail("expected 'host NAME'");
      if (hostIndex.count(w[1])) return fail("host " + w[1] + " appears twice");
      hostIndex[w[1]] = sys.nHosts();
      sys.hosts.push_back(Host{});
      sys.hosts.back().name = w[1];
    } else if (kw == "gpu" || kw == "link" || kw == "links" || kw == "nic") {
      if (host == nullptr) return fail("'" + kw + "' before any 'host' line");
      if (kw == "gpu") {
        if (w.size() != 2) return fail("expected 'gpu BUSID'");
        if (!host->nics.empty()) return fail("'gpu' after 'nic' in host " + host->name + ": list the GPUs first");
        host->gpus.push_back(Gpu{w[1]});
        resizeLinks(host);
      } else if (kw == "link" || kw == "links") {
        const size_t at = kw == "link" ? 3 : 1;
        if (w.size() != at + 1 && w.size() != at + 2)
          return fail(kw == "link" ? "expected 'link GPU GPU CLASS [COUNT]'" : "expected 'links CLASS [COUNT]'");
        Link l;
        if (!parseLinkClass(w[at], &l.cls) || l.cls == LinkClass::Self)
          return fail("unknown link class '" + w[at] + "' (none, pcie, direct, switch)");
        if (w.size() == at + 2 && (!parseInt(w[at + 1], &l.count) || l.count < 0))
          return fail("bad link count '" + w[at + 1] + "'");
        const int g = host->gpuCount();
        if (kw == "links") {
          for (int a = 0; a < g; a++)
            for (int b = 0; b < g; b++)
              if (a != b) host->setLink(a, b, l);
        } else {
          int a = -1, b = -1;
          if (!parseInt(w[1], &a) || !parseInt(w[2], &b) || a < 0 || b < 0 || a >= g || b >= g || a == b)
            return fail("link between GPUs '" + w[1] + "' and '" + w[2] + "': host " + host->name + " has GPUs 0.." +
                        std::to_string(g - 1) + " declared so far, and a link joins two different ones");
          host->setLink(a, b, l);
          host->setLink(b, a, l);
        }
      } else {
        if (w.size() != 2 && w.size() != 3) return fail("expected 'nic NAME [DISTANCES]'");
        Nic nic;
        nic.name = w[1];
        if (w.size() == 3 && !parseDistances(w[2], &nic.distance))
          return fail("bad distance list '" + w[2] + "' (comma-separated numbers >= 0 or '-')");
        if (w.size() == 2) nic.distance.assign(host->gpus.size(), -1);
        if (nic.distance.size() != host->gpus.size())
          return fail("NIC " + nic.name + " lists " + std::to_string(nic.distance.size()) + " distances, host " +
                      host->name + " has " + std::to_string(host->gpus.size()) + " GPUs");
        host->nics.push_back(nic);
      }
    } else if (kw == "rank") {
      int r = -1, g = -1;
      if (w.size() != 4 || !parseInt(w[1], &r) || r < 0 || !parseInt(w[3], &g))
        return fail("expected 'rank RANK HOST GPU'");
      auto it = hostIndex.find(w[2]);
      if (it == hostIndex.end()) return fail("rank " + w[1] + " on host " + w[2] + ", which no 'host' line declares");
      if (ranks.count(r)) return fail("rank " + w[1] + " placed twice");
      ranks[r] = RankPlace{it->second, g};
    } else {
      return fail("unknown keyword '" + kw + "'");
    }
  }
  if (!magic) {
    lineNo = 0;
    return fail("empty topology");
  }
  for (const auto& kv : ranks) {
    if (kv.first != (int)sys.ranks.size()) {
      *error = "rank " + std::to_string(sys.ranks.size()) + " is not placed (ranks must be 0..n-1)";
      return false;
    }
    sys.ranks.push_back(kv.second);
  }
  const std::string bad = sys.check();
  if (!bad.empty()) {
    *error = bad;
    return false;
  }
  *out = std::move(sys);
  return true;
}

ncclResult_t readTopologyFile(const char* path, System* out) {
  std::ifstream f(path);
  if (!f) {
    WARN("Topology file %s cannot be read: %s", path, strerror(errno));
    return ncclSystemError;
  }
  std::stringstream text;
  text << f.rdbuf();
  std::string error;
  if (!parseTopology(text.str(), out, &error)) {
    WARN("Topology file %s: %s (format: docs/topology.md)", path, error.c_str());
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t writeTopologyFile(const char* path, const System& sys) {
  FILE* f = fopen(path, "w");
  if (f == nullptr) {
    WARN("Topology dump %s cannot be written: %s", path, strerror(errno));
    return ncclSystemError;
  }
  const std::string text = formatTopology(sys);
  const bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
  if (fclose(f) != 0 || !ok) {
    WARN("Topology dump %s: writing failed: %s", path, strerror(errno));
    return ncclSystemError;
  }
  return ncclSuccess;
}

}  // namespace uniccl::topo
