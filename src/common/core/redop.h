// Reduction operators: the built-in ones and those made by
// ncclRedOpCreatePreMulSum, lowered to what the kernels understand.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "common/util/type_names.h"   // dataTypeName, with the other names here
#include "device/dev_types.h"
#include "uniccl.h"

namespace uniccl {

struct LoweredOp {
  dev::RedOp op;
  dev::ScalarKind scalarKind;
  uint64_t scalar;   // raw bits in the datatype's format, a device pointer, or n (dev::kScalarInvRanks)
};

struct UserRedOp {
  bool inUse = false;
  ncclDataType_t dtype = ncclFloat32;
  bool scalarIsPtr = false;
  uint64_t scalar = 0;
};

class RedOpTable {
 public:
  [[nodiscard]] ncclResult_t create(ncclRedOp_t* op, const void* scalar, ncclDataType_t dtype,
                      ncclScalarResidence_t residence);
  [[nodiscard]] ncclResult_t destroy(ncclRedOp_t op);
  // Lowers `op` for a collective of `dtype` over nRanks ranks.
  [[nodiscard]] ncclResult_t lower(ncclRedOp_t op, ncclDataType_t dtype, int nRanks, LoweredOp* out) const;

 private:
  mutable std::mutex mutex_;   // ops may be created from another thread than the one enqueuing
  std::vector<UserRedOp> ops_; // index i is ncclRedOp_t (ncclNumOps + i)
};

// Bytes per element (0: not a datatype). Inline: every call on the enqueue
// path asks it, several times.
inline size_t dataTypeSize(ncclDataType_t dtype) {
  switch (dtype) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}
const char* redOpName(ncclRedOp_t op);
bool isFloatingType(ncclDataType_t dtype);

// Raw bits of `value` in the given floating datatype's format
// (round to nearest even), for scalars built on the host (ncclAvg of fp16,
// bf16, fp32, fp64). fp8: OCP's encodings, which AMD targets with FNUZ fp8
// do not use: fp8 ncclAvg leaves 1/n to the kernels (dev::kScalarInvRanks).
uint64_t floatingBits(double value, ncclDataType_t dtype);

}  // namespace uniccl
