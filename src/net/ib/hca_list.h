// NCCL_IB_HCA: which devices and ports the IB transport may use, in NCCL's
// syntax: a comma list of `name[:port]` entries; names are prefixes unless the
// list starts with '='; a leading '^' excludes the listed ones instead
// ("^=mlx5_1:2" excludes exactly port 2 of mlx5_1). Unset or empty: all.
#pragma once

#include <string>
#include <vector>

#include "uniccl.h"

namespace uniccl {
namespace ib {

struct HcaEntry {
  std::string name;
  int port = -1;  // -1: any port
};

struct HcaFilter {
  bool exclude = false;  // '^'
  bool exact = false;    // '='
  std::vector<HcaEntry> entries;
};

// Parses the NCCL_IB_HCA value (nullptr or "" = no filter). A port that is not
// a positive number WARNs and fails with ncclInvalidArgument.
ncclResult_t parseHcaList(const char* spec, HcaFilter* out);

// Whether port `port` of device `name` may be used under `filter`.
bool hcaMatches(const HcaFilter& filter, const std::string& name, int port);

}  // namespace ib
}  // namespace uniccl
