#include "common/profiler/loader.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/util/debug.h"
#include "common/util/plugin_library.h"
#include "common/util/knobs.h"

namespace uniccl {

namespace {

struct LoaderState {
  std::mutex mutex;
  int refs = 0;
  void* dl = nullptr;
  bool dlIsProgram = false;
  ProfilerPlugin plugin;
};

LoaderState& state() {
  static LoaderState* s = new LoaderState();  // never destroyed: contexts may finalize at exit
  return *s;
}

// Opens the library the environment names; nullptr (logged) when none.
void* openLibrary(std::string* opened, bool* isProgram) {
  const char* env = knobValue(Knob::NCCL_PROFILER_PLUGIN);
  *isProgram = false;
  if (env && strcasecmp(env, "none") == 0) {
    INFO(kSubsysInit, "PROFILER/Plugin: disabled by NCCL_PROFILER_PLUGIN=none");
    return nullptr;
  }
  if (env && strcmp(env, "STATIC_PLUGIN") == 0) {
    *isProgram = true;
    *opened = "the program itself (STATIC_PLUGIN)";
    return dlopen(nullptr, RTLD_NOW);
  }
  std::string errors;
  if (void* dl = openPluginLibrary(env, "libnccl-profiler", opened, &errors)) return dl;
  if (env && env[0] != '\0')
    WARN("PROFILER/Plugin: NCCL_PROFILER_PLUGIN=%s could not be loaded, profiling is off:%s", env, errors.c_str());
  else
    INFO(kSubsysInit, "PROFILER/Plugin: no libnccl-profiler.so, profiling is off");
  return nullptr;
}

void closeLibrary(LoaderState& s) {
  if (s.dl != nullptr) dlclose(s.dl);  // the program handle too: dlopen(NULL) is reference counted
  s.dl = nullptr;
  s.plugin = ProfilerPlugin();
}

bool load(LoaderState& s) {
  std::string opened;
  s.dl = openLibrary(&opened, &s.dlIsProgram);
  if (s.dl == nullptr) return false;
  const ncclProfiler_v5_t* api = nullptr;
  int version = 0;
  if (void* v5 = dlsym(s.dl, "ncclProfiler_v5")) {
    api = static_cast<const ncclProfiler_v5_t*>(v5);
    version = 5;
  } else if (void* v4 = dlsym(s.dl, "ncclProfiler_v4")) {
    api = adaptProfilerV4(static_cast<const ncclProfiler_v4_t*>(v4));
    version = 4;
  }
  if (api == nullptr || api->init == nullptr || api->startEvent == nullptr || api->stopEvent == nullptr ||
      api->recordEventState == nullptr || api->finalize == nullptr) {
    WARN("PROFILER/Plugin: %s exports no usable ncclProfiler_v5 or ncclProfiler_v4 (uniccl speaks profiler API v5 "
         "and v4, as NCCL 2.28); profiling is off",
         opened.c_str());
    closeLibrary(s);
    return false;
  }
  s.plugin.api = api;
  s.plugin.version = version;
  s.plugin.name = api->name ? api->name : "(unnamed)";
  s.plugin.library = opened;
  INFO(kSubsysInit, "PROFILER/Plugin: loaded %s (profiler API v%d) from %s", s.plugin.name.c_str(), version,
       opened.c_str());
  return true;
}

}  // namespace

const ProfilerPlugin* profilerPluginAcquire() {
  LoaderState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.refs == 0 && !load(s)) return nullptr;
  s.refs++;
  return &s.plugin;
}

void profilerPluginRelease() {
  LoaderState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.refs <= 0) return;
  if (--s.refs > 0) return;
  INFO(kSubsysInit, "PROFILER/Plugin: closing %s", s.plugin.name.c_str());
  closeLibrary(s);
}

void profilerPluginLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt,
                          ...) {
  if (level == NCCL_LOG_NONE) return;
  if (level == NCCL_LOG_INFO && (detail::gInfoMask.load(std::memory_order_relaxed) & flags) == 0) return;
  if (level == NCCL_LOG_TRACE && (detail::gTraceMask.load(std::memory_order_relaxed) & flags) == 0) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  detail::logMessage((int)level, (uint64_t)flags, file ? file : "profiler-plugin", line, "%s", buf);
}

}  // namespace uniccl
