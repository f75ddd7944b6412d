#include "common/util/param.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl {
namespace {

using ConfigMap = std::map<std::string, std::string>;

// Maps are never modified after publication, and replaced ones are kept, so
// pointers into them handed out by getEnv stay valid. Leaked on purpose:
// threads may read knobs while static destructors run.
struct ConfigState {
  std::mutex mutex;
  const ConfigMap* current = nullptr;
  std::vector<std::unique_ptr<ConfigMap>> all;
  std::set<std::string> logged;  // "NAME=value" already reported
};

ConfigState& state() {
  static ConfigState* s = new ConfigState();
  return *s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// Values already present win: files are read from the most to least important.
void loadFile(const char* path, ConfigMap* map) {
  FILE* f = fopen(path, "r");
  if (!f) return;
  char line[4096];
  while (fgets(line, sizeof(line), f)) {
    std::string s(line);
    size_t hash = s.find('#');
    if (hash != std::string::npos) s.resize(hash);
    size_t eq = s.find('=');
    if (eq == std::string::npos) continue;
    std::string name = trim(s.substr(0, eq));
    std::string value = trim(s.substr(eq + 1));
    if (name.empty()) continue;
    map->emplace(name, value);
  }
  fclose(f);
}

std::unique_ptr<ConfigMap> readConfigFiles() {
  auto map = std::make_unique<ConfigMap>();
  const char* confFile = knobValue(Knob::NCCL_CONF_FILE);
  if (confFile && confFile[0]) {
    loadFile(confFile, map.get());
  } else {
    const char* home = getenv("HOME");
    if (home && home[0]) loadFile((std::string(home) + "/.nccl.conf").c_str(), map.get());
    loadFile("/etc/nccl.conf", map.get());
  }
  return map;
}

const ConfigMap& config() {
  ConfigState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.current) {
    s.all.push_back(readConfigFiles());
    s.current = s.all.back().get();
  }
  return *s.current;
}

}  // namespace

const char* getEnv(const char* name) {
  if (!name) return nullptr;
  if (const char* v = getenv(name)) return v;
  const ConfigMap& map = config();
  auto it = map.find(name);
  return it == map.end() ? nullptr : it->second.c_str();
}

int64_t paramInt(const char* name, int64_t dflt) { return paramIntValue(name, getEnv(name), dflt); }

int64_t paramIntValue(const char* name, const char* str, int64_t dflt) {
  if (!str) return dflt;
  while (*str == ' ' || *str == '\t') str++;
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(str, &end, 0);
  while (end && (*end == ' ' || *end == '\t')) end++;
  if (str[0] == '\0' || end == str || (end && *end != '\0') || errno == ERANGE) {
    WARN("Invalid value '%s' for %s: expected an integer (decimal or 0x hex); using the default %" PRId64, str, name,
         dflt);
    return dflt;
  }
  if (v != dflt) {
    ConfigState& s = state();
    bool first;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      first = s.logged.insert(std::string(name) + "=" + str).second;
    }
    if (first) INFO(kSubsysEnv, "%s set by environment to %lld", name, v);
  }
  return (int64_t)v;
}

void reloadConfigFilesForTesting() {
  ConfigState& s = state();
  std::unique_ptr<ConfigMap> map = readConfigFiles();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.all.push_back(std::move(map));
  s.current = s.all.back().get();
}

}  // namespace uniccl
