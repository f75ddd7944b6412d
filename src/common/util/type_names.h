// Names of the NCCL datatypes for messages ("float", "bfloat16", ...):
// a service of its own so that every part may name a datatype.
#pragma once

#include "uniccl.h"

namespace uniccl {

const char* dataTypeName(ncclDataType_t dtype);   // "invalid" for a value outside the enum

}  // namespace uniccl
