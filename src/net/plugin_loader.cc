// Chooses the network: an external NCCL net plugin (dlopen) or a built-in
// transport, under NCCL_NET_PLUGIN and NCCL_NET.
//
//   NCCL_NET_PLUGIN  unset: try libnccl-net.so, silently use built-ins when absent;
//                    "none": no plugin; NAME: try NAME, then libnccl-net-NAME.so
//   NCCL_NET         "Socket", "IB" or a plugin's name (case-insensitive); unset:
//                    the plugin if one loaded, else IB where built, else Socket
//
// Plugins export ncclNetPlugin_v8 or ncclNetPlugin_v7 (newest is tried first);
// v7 tables are adapted to v8 here, so the rest of uniccl sees one table type.
#include <dlfcn.h>
#include <strings.h>

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/util/debug.h"
#include "common/util/plugin_library.h"
#include "common/util/knobs.h"
#include "net/net.h"
#include "net/socket_transport.h"

namespace uniccl {

#ifdef UNICCL_NET_IB
const NetApi* ibNetApi();  // src/net/ib/ib_entry.cc, built with ibverbs
#endif

namespace {

// Built-in transports, preferred first when NCCL_NET is unset.
using BuiltinNetFn = const NetApi* (*)();
const BuiltinNetFn kBuiltinNets[] = {
#ifdef UNICCL_NET_IB
    ibNetApi,
#endif
    socketNetApi,
};

// Forwards plugin log lines to uniccl's logging (NCCL_DEBUG, NCCL_DEBUG_SUBSYS).
void pluginLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  if (level == NCCL_LOG_INFO && (detail::gInfoMask.load(std::memory_order_relaxed) & flags) == 0) return;
  if (level == NCCL_LOG_TRACE && (detail::gTraceMask.load(std::memory_order_relaxed) & flags) == 0) return;
  if (level == NCCL_LOG_NONE) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  detail::logMessage((int)level, (uint64_t)flags, file ? file : "plugin", line, "%s", buf);
}

// --------------------------------------------------------- v7 -> v8 adapter
// One v7 plugin at most is loaded per process, so a global table suffices.
const ncclNet_v7_t* gV7 = nullptr;

ncclResult_t v7GetProperties(int dev, ncclNetProperties_v8_t* props) {
  ncclNetProperties_v7_t p7;
  memset(&p7, 0, sizeof(p7));
  UCHECK(gV7->getProperties(dev, &p7));
  memset(props, 0, sizeof(*props));
  props->name = p7.name;
  props->pciPath = p7.pciPath;
  props->guid = p7.guid;
  props->ptrSupport = p7.ptrSupport;
  props->regIsGlobal = 0;
  props->speed = p7.speed;
  props->port = p7.port;
  props->latency = p7.latency;
  props->maxComms = p7.maxComms;
  props->maxRecvs = p7.maxRecvs;
  props->netDeviceType = p7.netDeviceType;
  props->netDeviceVersion = p7.netDeviceVersion;
  return ncclSuccess;
}

ncclResult_t v7RegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (size > (size_t)INT_MAX) {
    WARN("NET/%s: cannot register %zu bytes: the plugin speaks net API v7, whose regMr takes an int size",
         gV7->name, size);
    return ncclInvalidArgument;
  }
  return gV7->regMr(comm, data, (int)size, type, mhandle);
}

NetApi adaptV7(const ncclNet_v7_t* v7) {
  gV7 = v7;
  NetApi n;
  n.name = v7->name;
  n.init = v7->init;
  n.devices = v7->devices;
  n.getProperties = v7GetProperties;
  n.listen = v7->listen;
  n.connect = v7->connect;
  n.accept = v7->accept;
  n.regMr = v7RegMr;
  n.regMrDmaBuf = v7->regMrDmaBuf;
  n.deregMr = v7->deregMr;
  n.isend = v7->isend;
  n.irecv = v7->irecv;
  n.iflush = v7->iflush;
  n.test = v7->test;
  n.closeSend = v7->closeSend;
  n.closeRecv = v7->closeRecv;
  n.closeListen = v7->closeListen;
  n.getDeviceMr = v7->getDeviceMr;
  n.irecvConsumed = v7->irecvConsumed;
  return n;
}

// ------------------------------------------------------------- selection
struct NetState {
  std::mutex mutex;
  bool loaded = false;    // plugin looked for (once)
  bool selected = false;  // netSelect's choice made (once)
  ncclResult_t result = ncclSuccess;
  const NetApi* api = nullptr;
  void* dl = nullptr;
  const NetApi* plugin = nullptr;  // loaded and initialized
  NetApi v7Table;
};

NetState& state() {
  static NetState* s = new NetState();  // never destroyed: plugins may log at exit
  return *s;
}

void* openPlugin(std::string* openedName) {
  const char* env = knobValue(Knob::NCCL_NET_PLUGIN);
  if (env && strcasecmp(env, "none") == 0) {
    INFO(kSubsysInit | kSubsysNet, "NET/Plugin: disabled by NCCL_NET_PLUGIN=none");
    return nullptr;
  }
  std::string errors;
  if (void* dl = openPluginLibrary(env, "libnccl-net", openedName, &errors)) return dl;
  if (env && env[0] != '\0')
    WARN("NET/Plugin: NCCL_NET_PLUGIN=%s could not be loaded, using the built-in transports:%s", env,
         errors.c_str());
  else
    INFO(kSubsysInit | kSubsysNet, "NET/Plugin: no libnccl-net.so, using the built-in transports");
  return nullptr;
}

// Loads and initializes the external plugin, if any; a plugin that cannot be
// used is skipped with a WARN (uniccl continues with its built-ins).
void loadPlugin(NetState& s) {
  std::string name;
  void* dl = openPlugin(&name);
  if (dl == nullptr) return;
  const NetApi* api = nullptr;
  const char* version = nullptr;
  if (void* sym = dlsym(dl, "ncclNetPlugin_v8")) {
    api = static_cast<const NetApi*>(sym);
    version = "v8";
  } else if (void* sym7 = dlsym(dl, "ncclNetPlugin_v7")) {
    s.v7Table = adaptV7(static_cast<const ncclNet_v7_t*>(sym7));
    api = &s.v7Table;
    version = "v7";
  } else {
    WARN("NET/Plugin: %s exports neither ncclNetPlugin_v8 nor ncclNetPlugin_v7 (uniccl supports net API v7 and "
         "v8): skipped",
         name.c_str());
    dlclose(dl);
    return;
  }
  if (api->name == nullptr || api->init == nullptr) {
    WARN("NET/Plugin: %s: the %s table has no name or init: skipped", name.c_str(), version);
    dlclose(dl);
    return;
  }
  ncclResult_t res = api->init(pluginLogger);
  if (res != ncclSuccess) {
    WARN("NET/Plugin: %s (%s, net API %s) failed to initialize (error %d): skipped", api->name, name.c_str(),
         version, (int)res);
    gV7 = nullptr;
    dlclose(dl);
    return;
  }
  INFO(kSubsysInit | kSubsysNet, "NET/Plugin: loaded %s from %s (net API %s)", api->name, name.c_str(), version);
  s.dl = dl;
  s.plugin = api;
}

int deviceCount(const NetApi* api) {
  int n = 0;
  if (api->devices(&n) != ncclSuccess) return 0;
  return n;
}

std::string availableNames(const NetState& s) {
  std::string out;
  if (s.plugin) out = s.plugin->name;
  for (BuiltinNetFn fn : kBuiltinNets) out += (out.empty() ? "" : ", ") + std::string(fn()->name);
  return out;
}

ncclResult_t initBuiltin(const NetApi* api) {
  ncclResult_t res = api->init(pluginLogger);
  if (res != ncclSuccess) WARN("NET/%s: initialization failed (error %d)", api->name, (int)res);
  return res;
}

ncclResult_t findByName(NetState& s, const char* want, const NetApi** out) {
  if (s.plugin && strcasecmp(want, s.plugin->name) == 0) {
    *out = s.plugin;
    return ncclSuccess;
  }
  for (BuiltinNetFn fn : kBuiltinNets) {
    const NetApi* api = fn();
    if (strcasecmp(want, api->name) != 0) continue;
    UCHECK(initBuiltin(api));
    *out = api;
    return ncclSuccess;
  }
  WARN("NCCL_NET=%s: no such network in this process; available: %s", want, availableNames(s).c_str());
  return ncclInvalidArgument;
}

// NCCL's preference when nothing is asked for: the plugin, then the built-ins in order.
ncclResult_t pickDefault(NetState& s, const NetApi** out) {
  if (s.plugin && deviceCount(s.plugin) > 0) {
    *out = s.plugin;
    return ncclSuccess;
  }
  ncclResult_t last = ncclSystemError;
  for (BuiltinNetFn fn : kBuiltinNets) {
    const NetApi* api = fn();
    last = api->init(pluginLogger);
    if (last == ncclSuccess && deviceCount(api) > 0) {
      *out = api;
      return ncclSuccess;
    }
    INFO(kSubsysInit | kSubsysNet, "NET/%s: not usable here, trying the next transport", api->name);
  }
  WARN("no network transport is usable (%s): check NCCL_SOCKET_IFNAME / NCCL_NET", availableNames(s).c_str());
  return last == ncclSuccess ? ncclSystemError : last;
}

void loadOnce(NetState& s) {
  if (s.loaded) return;
  s.loaded = true;
  loadPlugin(s);
}

}  // namespace

ncclResult_t netSelect(const NetApi** out) {
  NetState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.selected) {
    s.selected = true;
    loadOnce(s);
    const char* want = knobValue(Knob::NCCL_NET);
    s.result = want && want[0] != '\0' ? findByName(s, want, &s.api) : pickDefault(s, &s.api);
    if (s.result == ncclSuccess) INFO(kSubsysInit | kSubsysNet, "Using network %s", s.api->name);
  } else if (s.result != ncclSuccess) {
    WARN("network selection failed earlier in this process (error %d)", (int)s.result);
  }
  if (s.result != ncclSuccess) return s.result;
  *out = s.api;
  return ncclSuccess;
}

ncclResult_t netSelectByName(const char* name, const NetApi** out) {
  if (name == nullptr || name[0] == '\0') return netSelect(out);
  NetState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  loadOnce(s);
  return findByName(s, name, out);
}

void netUnloadForTesting() {
  NetState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.dl) dlclose(s.dl);
  s.dl = nullptr;
  s.plugin = nullptr;
  s.api = nullptr;
  s.loaded = false;
  s.selected = false;
  s.result = ncclSuccess;
  gV7 = nullptr;
}

}  // namespace uniccl
