// Finding an NCCL-style plugin library by the name its environment variable
// gives (NCCL_NET_PLUGIN, NCCL_PROFILER_PLUGIN): NAME itself (a path or a
// soname), then lib<family>-NAME.so; unset: lib<family>.so.
#pragma once

#include <string>

namespace uniccl {

// dlopens the first candidate that loads (RTLD_NOW | RTLD_LOCAL); returns
// its handle and name, or nullptr with every candidate's dlerror() text in
// *errors (one "\n  name: reason" line each). `family`: e.g. "libnccl-net".
void* openPluginLibrary(const char* envValue, const char* family, std::string* opened, std::string* errors);

}  // namespace uniccl
