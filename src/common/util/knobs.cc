#include "common/util/knobs.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "common/util/param.h"

namespace uniccl {
namespace {

constexpr bool stringKnobsDocumentTheirDefault() {
  for (const KnobSpec& k : kKnobSpecs)
    if (k.type == KnobType::Str && k.defaultDoc == nullptr) return false;
  return true;
}
static_assert(stringKnobsDocumentTheirDefault(), "a Str knob needs DEFAULT_DOC (the docs show it)");

}  // namespace

const char* knobValue(const KnobSpec& k) {
  return k.source == KnobSource::Env ? getenv(k.name) : getEnv(k.name);
}

int64_t knobInt(const KnobSpec& k) { return knobInt(k, k.intDefault); }

int64_t knobInt(const KnobSpec& k, int64_t dflt) { return paramIntValue(k.name, knobValue(k), dflt); }

const char* knobDefaultText(const KnobSpec& k, char* buf, int bufBytes) {
  if (k.defaultDoc != nullptr) return k.defaultDoc;
  snprintf(buf, (size_t)bufBytes, "%" PRId64, k.intDefault);
  return buf;
}

}  // namespace uniccl
