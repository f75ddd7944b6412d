// Where knob values come from: the environment first, then NCCL's
// configuration files, so settings made for NCCL carry over. The library
// reads its knobs through the registry (knobs.h), which uses these; code
// outside util/ calls the registry, not these.
//
// Config files (read once, `NAME=value` lines, `#` comments, whitespace
// trimmed): NCCL_CONF_FILE when set, else ~/.nccl.conf and then /etc/nccl.conf
// (the user's file wins over the system's). The environment wins over both.
#pragma once

#include <cstdint>

namespace uniccl {

// The value of knob `name`, or nullptr when it is set nowhere. The pointer
// stays valid for the life of the process.
const char* getEnv(const char* name);

// Knob `name` as an integer (decimal, or hex with 0x). Unset -> dflt; a value
// that is not a number WARNs and gives dflt. A value other than dflt is logged
// once (INFO ENV).
int64_t paramInt(const char* name, int64_t dflt);
// The same for a value already looked up (nullptr: unset).
int64_t paramIntValue(const char* name, const char* value, int64_t dflt);

// Reads the config files again (after a test changed NCCL_CONF_FILE or HOME).
// Pointers returned earlier stay valid.
void reloadConfigFilesForTesting();

}  // namespace uniccl
