// Prints every knob uniccl declares, one per line, for tools/check_knobs.py
// (test knob-docs): the library's registry (src/common/util/knobs.def), both
// backends' lists (whichever backend this build has) and the trace plugin's.
//
//   NAME <tab> DEFAULT (as the docs show it) <tab> TYPE <tab> SOURCE <tab> WHERE <tab> DOC
#include <cstdio>

#include "common/util/knobs.h"

using namespace uniccl;

namespace {

void print(const KnobSpec& k, const char* where) {
  char buf[32];
  printf("%s\t%s\t%s\t%s\t%s\t%s\n", k.name, knobDefaultText(k, buf, sizeof(buf)),
         k.type == KnobType::Int ? "int" : "string", k.source == KnobSource::Env ? "env" : "env+conf", where, k.doc);
}

#define UNICCL_KNOB UNICCL_KNOB_CONSTANT
namespace cuda {
#include "cuda/knobs.def"
}
namespace hip {
#include "hip/knobs.def"
}
namespace trace {
#include "../../../plugins/trace/knobs.def"
}
#undef UNICCL_KNOB

}  // namespace

int main() {
  for (int i = 0; i < kNumKnobs; i++) print(kKnobSpecs[i], "library");
#define UNICCL_KNOB(NAME, TYPE, SOURCE, DEFAULT, DEFAULT_DOC, DOC) print(cuda::k##NAME, "cuda backend");
#include "cuda/knobs.def"
#undef UNICCL_KNOB
#define UNICCL_KNOB(NAME, TYPE, SOURCE, DEFAULT, DEFAULT_DOC, DOC) print(hip::k##NAME, "hip backend");
#include "hip/knobs.def"
#undef UNICCL_KNOB
#define UNICCL_KNOB(NAME, TYPE, SOURCE, DEFAULT, DEFAULT_DOC, DOC) print(trace::k##NAME, "trace plugin");
#include "../../../plugins/trace/knobs.def"
#undef UNICCL_KNOB
  return 0;
}
