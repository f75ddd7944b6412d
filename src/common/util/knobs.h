// The registry of knobs: every environment variable the library reads is
// declared once, in knobs.def (name, type, default, one-line doc), and read
// through the readers below. The backends declare their vendor runtime's
// variables the same way in their own knobs.def (src/<backend>/knobs.def)
// and read them with the same readers; docs/environment.md must agree with
// all of them (test knob-docs, tools/check_knobs.py).
//
// Where a value comes from: the environment, then NCCL's configuration files
// (param.h), for every knob but those of source Env (read from the
// environment only: NCCL_CONF_FILE itself, and the variables a vendor runtime
// reads, which it takes from the environment alone).
//
// The readers read the value again at every call, as the code always did:
// whether a setting counts once per process (a function-local static at the
// call site: hot paths, process-wide threads) or again per communicator
// (read during init, as NCCL does) stays the caller's choice; knobs.def says
// which for each knob.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uniccl {

enum class KnobType : uint8_t {
  Int,  // an integer (decimal, or hex with 0x)
  Str,  // a string (its meaning is the reader's)
};

enum class KnobSource : uint8_t {
  Conf,  // the environment, then the configuration files
  Env,   // the environment only
};

struct KnobSpec {
  const char* name;
  KnobType type;
  KnobSource source;
  int64_t intDefault;      // Int: what knobInt gives when the knob is unset
  const char* defaultDoc;  // the default as docs/environment.md shows it; nullptr: intDefault in decimal
  const char* doc;         // one line
};

// The library's knobs, one enumerator per line of knobs.def, named as the variable.
enum class Knob : uint16_t {
#define UNICCL_KNOB(NAME, TYPE, SOURCE, DEFAULT, DEFAULT_DOC, DOC) NAME,
#include "common/util/knobs.def"
#undef UNICCL_KNOB
};

constexpr int kNumKnobs = 0
#define UNICCL_KNOB(NAME, TYPE, SOURCE, DEFAULT, DEFAULT_DOC, DOC) +1
#include "common/util/knobs.def"
#undef UNICCL_KNOB
    ;

// All of the library's knobs, in knobs.def's order.
inline constexpr KnobSpec kKnobSpecs[] = {
#define UNICCL_KNOB(NAME, TYPE, SOURCE, DEFAULT, DEFAULT_DOC, DOC) \
  {#NAME, KnobType::TYPE, KnobSource::SOURCE, (int64_t)(DEFAULT), DEFAULT_DOC, DOC},
#include "common/util/knobs.def"
#undef UNICCL_KNOB
};
static_assert(sizeof(kKnobSpecs) / sizeof(kKnobSpecs[0]) == (std::size_t)kNumKnobs, "one spec per enumerator");

// constexpr, so that code can check a default against its own constant.
constexpr const KnobSpec& knobSpec(Knob k) { return kKnobSpecs[(int)k]; }
// [0, kNumKnobs)
constexpr const KnobSpec* allKnobs() { return kKnobSpecs; }

// For knob lists outside this registry (a backend's knobs.def): with
// `#define UNICCL_KNOB UNICCL_KNOB_CONSTANT`, each line declares
// `constexpr KnobSpec kNAME`, read with the same readers.
#define UNICCL_KNOB_CONSTANT(NAME, TYPE, SOURCE, DEFAULT, DEFAULT_DOC, DOC)                    \
  constexpr ::uniccl::KnobSpec k##NAME{#NAME, ::uniccl::KnobType::TYPE, ::uniccl::KnobSource::SOURCE, \
                                       (int64_t)(DEFAULT), DEFAULT_DOC, DOC};

// The raw value: nullptr when the knob is set nowhere. The pointer stays
// valid for the life of the process.
const char* knobValue(const KnobSpec& k);
inline const char* knobValue(Knob k) { return knobValue(knobSpec(k)); }

inline bool knobIsSet(const KnobSpec& k) { return knobValue(k) != nullptr; }
inline bool knobIsSet(Knob k) { return knobValue(k) != nullptr; }

// An Int knob: unset -> its default; a value that is not an integer WARNs and
// gives the default; a value other than the default is logged once (INFO ENV).
int64_t knobInt(const KnobSpec& k);
inline int64_t knobInt(Knob k) { return knobInt(knobSpec(k)); }
// The same with the default computed by the caller, for knobs whose default
// depends on the machine or the communicator (defaultDoc says how).
int64_t knobInt(const KnobSpec& k, int64_t dflt);
inline int64_t knobInt(Knob k, int64_t dflt) { return knobInt(knobSpec(k), dflt); }

// The default of `k` as docs/environment.md shows it (defaultDoc, or the
// integer default in decimal).
const char* knobDefaultText(const KnobSpec& k, char* buf, int bufBytes);

}  // namespace uniccl
