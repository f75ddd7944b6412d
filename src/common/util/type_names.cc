#include "common/util/type_names.h"

namespace uniccl {

const char* dataTypeName(ncclDataType_t dtype) {
  static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  static_assert(sizeof(names) / sizeof(names[0]) == ncclNumTypes, "a name per datatype");
  return (int)dtype >= 0 && (int)dtype < ncclNumTypes ? names[dtype] : "invalid";
}

}  // namespace uniccl
