#include "common/core/redop.h"

#include <cmath>
#include <cstring>

#include "common/util/debug.h"

namespace uniccl {

const char* redOpName(ncclRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return (int)op >= 0 && (int)op < ncclNumOps ? names[op] : "premulsum";
}

bool isFloatingType(ncclDataType_t dtype) {
  return dtype == ncclFloat16 || dtype == ncclFloat32 || dtype == ncclFloat64 || dtype == ncclBfloat16 ||
         dtype == ncclFloat8e4m3 || dtype == ncclFloat8e5m2;
}

namespace {

// Rounds a float to a narrower IEEE-like format with `mant` mantissa bits and
// exponent bias `bias` (round to nearest even), returning its bit pattern.
// `satFinite`: formats without infinity (e4m3 "FN") saturate to max finite.
uint32_t roundFloat(float f, int expBits, int mant, bool satFinite, uint32_t maxFinite) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 31) << (expBits + mant);
  if (std::isnan(f)) return sign | ((1u << (expBits + mant)) - 1);   // all ones: NaN in every format here
  int bias = (1 << (expBits - 1)) - 1;
  float a = std::fabs(f);
  if (a == 0.0f) return sign;
  int e;
  float m = std::frexp(a, &e);        // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1 + bias;             // biased exponent of 1.m form
  double scaled;
  uint32_t bits;
  if (exp <= 0) {                     // subnormal: value = q * 2^(1-bias-mant)
    scaled = std::ldexp((double)a, mant - 1 + bias);
    double q = std::nearbyint(scaled);
    bits = (uint32_t)q;               // may round up into the smallest normal: still correct bits
  } else {
    scaled = std::ldexp((double)m * 2.0, mant);   // in [2^mant, 2^(mant+1))
    double q = std::nearbyint(scaled);
    uint32_t qi = (uint32_t)q;
    if (qi == (1u << (mant + 1))) {
      qi >>= 1;
      exp++;
    }
    bits = ((uint32_t)exp << mant) | (qi & ((1u << mant) - 1));
  }
  uint32_t maxExpField = (1u << expBits) - 1;
  if (!satFinite && (bits >> mant) >= maxExpField) return sign | (maxExpField << mant);   // infinity
  if (satFinite && bits > maxFinite) bits = maxFinite;
  return sign | bits;
}

}  // namespace

uint64_t floatingBits(double value, ncclDataType_t dtype) {
  switch (dtype) {
    case ncclFloat64: {
      uint64_t b;
      memcpy(&b, &value, 8);
      return b;
    }
    case ncclFloat32: {
      float f = (float)value;
      uint32_t b;
      memcpy(&b, &f, 4);
      return b;
    }
    case ncclFloat16: return roundFloat((float)value, 5, 10, false, 0);
    case ncclBfloat16: return roundFloat((float)value, 8, 7, false, 0);
    case ncclFloat8e4m3: return roundFloat((float)value, 4, 3, true, 0x7e);
    case ncclFloat8e5m2: return roundFloat((float)value, 5, 2, false, 0);
    default: return 0;
  }
}

ncclResult_t RedOpTable::create(ncclRedOp_t* op, const void* scalar, ncclDataType_t dtype,
                                ncclScalarResidence_t residence) {
  UserRedOp u;
  u.inUse = true;
  u.dtype = dtype;
  if (residence == ncclScalarHostImmediate) {
    u.scalarIsPtr = false;
    memcpy(&u.scalar, scalar, dataTypeSize(dtype));
  } else {
    u.scalarIsPtr = true;
    u.scalar = reinterpret_cast<uint64_t>(scalar);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  size_t i = 0;
  while (i < ops_.size() && ops_[i].inUse) i++;
  if (i == ops_.size()) {
    if (ops_.size() >= (size_t)(ncclMaxRedOp - ncclNumOps)) {
      WARN("ncclRedOpCreatePreMulSum: too many live reduction operators on this communicator");
      return ncclInvalidUsage;
    }
    ops_.push_back(u);
  } else {
    ops_[i] = u;
  }
  *op = (ncclRedOp_t)(ncclNumOps + i);
  return ncclSuccess;
}

ncclResult_t RedOpTable::destroy(ncclRedOp_t op) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t i = (size_t)op - ncclNumOps;
  if ((int)op < ncclNumOps || i >= ops_.size() || !ops_[i].inUse) {
    WARN("ncclRedOpDestroy: %d is not a reduction operator created on this communicator%s", (int)op,
         (int)op >= 0 && (int)op < ncclNumOps ? " (built-in operators cannot be destroyed)" : "");
    return ncclInvalidArgument;
  }
  ops_[i].inUse = false;
  return ncclSuccess;
}

ncclResult_t RedOpTable::lower(ncclRedOp_t op, ncclDataType_t dtype, int nRanks, LoweredOp* out) const {
  out->scalarKind = dev::kScalarBits;
  out->scalar = 0;
  switch (op) {
    case ncclSum: out->op = dev::kOpSum; return ncclSuccess;
    case ncclProd: out->op = dev::kOpProd; return ncclSuccess;
    case ncclMax: out->op = dev::kOpMax; return ncclSuccess;
    case ncclMin: out->op = dev::kOpMin; return ncclSuccess;
    case ncclAvg:
      if (dtype == ncclFloat8e4m3 || dtype == ncclFloat8e5m2) {
        // The kernels make 1/n in their target's fp8 encoding (OCP on NVIDIA,
        // FNUZ on MI300 and the AMD targets RCCL converts in software).
        out->op = dev::kOpPreMulSum;
        out->scalarKind = dev::kScalarInvRanks;
        out->scalar = (uint64_t)nRanks;
      } else if (isFloatingType(dtype)) {
        out->op = dev::kOpPreMulSum;
        out->scalar = floatingBits(1.0 / nRanks, dtype);
      } else {
        out->op = dev::kOpSumPostDiv;
        out->scalar = (uint64_t)nRanks;
      }
      return ncclSuccess;
    default: break;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  size_t i = (size_t)op - ncclNumOps;
  if ((int)op < ncclNumOps || i >= ops_.size() || !ops_[i].inUse) {
    WARN("Invalid reduction operator %d: not a built-in operator nor one created on this communicator", (int)op);
    return ncclInvalidArgument;
  }
  const UserRedOp& u = ops_[i];
  if (u.dtype != dtype) {
    WARN("Reduction operator %d was created for %s but the collective uses %s", (int)op, dataTypeName(u.dtype),
         dataTypeName(dtype));
    return ncclInvalidArgument;
  }
  out->op = dev::kOpPreMulSum;
  out->scalarKind = u.scalarIsPtr ? dev::kScalarPtr : dev::kScalarBits;
  out->scalar = u.scalar;
  return ncclSuccess;
}

}  // namespace uniccl
