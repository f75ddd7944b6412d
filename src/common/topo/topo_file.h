// The topology as text (docs/topology.md has the format): written on request
// (NCCL_TOPO_DUMP_FILE) and read back (NCCL_TOPO_FILE), so that systems this
// machine is not (a GPU mesh, many hosts with several NICs) can be described
// and run on the emulator.
#pragma once

#include <string>

#include "common/topo/system.h"
#include "uniccl.h"

namespace uniccl::topo {

// The text of `sys`; parseTopology reads it back to an equal value.
std::string formatTopology(const System& sys);

// false, with `error` saying which line and why, when `text` is not a valid
// topology; `out` is written only on success.
bool parseTopology(const std::string& text, System* out, std::string* error);

// Whether `text` looks like NCCL's XML topology (which uniccl does not read).
bool looksLikeXml(const std::string& text);

// File wrappers: a clear WARN (and ncclInvalidArgument / ncclSystemError) on failure.
[[nodiscard]] ncclResult_t readTopologyFile(const char* path, System* out);
[[nodiscard]] ncclResult_t writeTopologyFile(const char* path, const System& sys);

}  // namespace uniccl::topo
