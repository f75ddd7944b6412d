#include "common/util/plugin_library.h"

#include <dlfcn.h>

#include <vector>

namespace uniccl {

void* openPluginLibrary(const char* envValue, const char* family, std::string* opened, std::string* errors) {
  std::vector<std::string> names;
  if (envValue != nullptr && envValue[0] != '\0') {
    names.push_back(envValue);
    names.push_back(std::string(family) + "-" + envValue + ".so");
  } else {
    names.push_back(std::string(family) + ".so");
  }
  errors->clear();
  for (const std::string& name : names) {
    void* dl = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (dl != nullptr) {
      *opened = name;
      return dl;
    }
    const char* e = dlerror();
    *errors += "\n  " + name + ": " + (e ? e : "not found");
  }
  return nullptr;
}

}  // namespace uniccl
