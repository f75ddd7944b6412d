// Finds and loads the profiler plugin library, once per process while any
// communicator uses it (NCCL's rules, so existing settings carry over):
//
//   NCCL_PROFILER_PLUGIN unset          libnccl-profiler.so on the loader path; none: no profiling
//   NCCL_PROFILER_PLUGIN=none           no profiling
//   NCCL_PROFILER_PLUGIN=STATIC_PLUGIN  the symbols are looked up in the program itself
//   NCCL_PROFILER_PLUGIN=NAME           dlopen(NAME) (a path or a soname), then libnccl-profiler-NAME.so
//
// In the library it takes ncclProfiler_v5, else ncclProfiler_v4 (wrapped in an
// adapter so everything else sees the v5 table).
#pragma once

#include <string>

#include "uniccl_profiler.h"

namespace uniccl {

struct ProfilerPlugin {
  const ncclProfiler_v5_t* api = nullptr;  // the plugin's v5 table, or the v4 adapter
  int version = 0;                         // 5 or 4
  std::string name;                        // the plugin's name field
  std::string library;                     // what was opened
};

// Loads the plugin (first user) or shares it; nullptr when there is none.
// Every non-null result is paired with one profilerPluginRelease().
const ProfilerPlugin* profilerPluginAcquire();
// The last release closes the library; the next acquire looks again.
void profilerPluginRelease();

// Forwards plugin log lines to uniccl's logging (NCCL_DEBUG, NCCL_DEBUG_SUBSYS).
void profilerPluginLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                          const char* fmt, ...);

// v4 -> v5 adapter (v4_adapter.cc): the v5 table that forwards to `v4`.
const ncclProfiler_v5_t* adaptProfilerV4(const ncclProfiler_v4_t* v4);

}  // namespace uniccl
