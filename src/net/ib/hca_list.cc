#include "net/ib/hca_list.h"

#include <cerrno>
#include <cstdlib>

#include "common/util/debug.h"
#include "common/util/name_list.h"

namespace uniccl {
namespace ib {

namespace {
constexpr size_t kMaxEntries = 32;  // NCCL's MAX_IB_DEVS
}

ncclResult_t parseHcaList(const char* spec, HcaFilter* out) {
  *out = HcaFilter();
  if (spec == nullptr) return ncclSuccess;
  // Spaces before the marks and around items are dropped; names are
  // prefixes unless '=' (NCCL's parser for NCCL_IB_HCA).
  NameListSyntax syntax;
  syntax.trim = " ";
  syntax.skipLeadingSpaces = true;
  syntax.exactMark = true;
  const NameList list = parseNameList(spec, syntax);
  out->exclude = list.exclude;
  out->exact = list.exact;
  for (const std::string& item : list.items) {
    HcaEntry e;
    size_t colon = item.find(':');
    e.name = item.substr(0, colon);
    if (colon != std::string::npos) {
      std::string port = item.substr(colon + 1);
      char* end = nullptr;
      errno = 0;
      long v = strtol(port.c_str(), &end, 10);
      if (port.empty() || *end != '\0' || errno != 0 || v < 1 || v > 255) {
        WARN("NCCL_IB_HCA=%s: '%s' has a bad port number (expected NAME or NAME:PORT, PORT from 1)", spec,
             item.c_str());
        return ncclInvalidArgument;
      }
      e.port = (int)v;
    }
    if (e.name.empty()) {
      WARN("NCCL_IB_HCA=%s: '%s' has no device name", spec, item.c_str());
      return ncclInvalidArgument;
    }
    if (out->entries.size() == kMaxEntries) {
      WARN("NCCL_IB_HCA=%s: more than %zu entries; the rest are ignored", spec, kMaxEntries);
      break;
    }
    out->entries.push_back(e);
  }
  return ncclSuccess;
}

bool hcaMatches(const HcaFilter& filter, const std::string& name, int port) {
  if (filter.entries.empty()) return true;  // no list (a bare "^" excludes nothing either)
  bool listed = false;
  for (const HcaEntry& e : filter.entries) {
    bool nameOk = filter.exact ? name == e.name : name.compare(0, e.name.size(), e.name) == 0;
    if (nameOk && (e.port == -1 || e.port == port)) {
      listed = true;
      break;
    }
  }
  return filter.exclude ? !listed : listed;
}

}  // namespace ib
}  // namespace uniccl
