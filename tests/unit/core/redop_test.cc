// Reduction-operator lowering and the host-side narrow-float encoder that
// builds ncclAvg's scalar.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "common/core/redop.h"

namespace uniccl {
namespace {

TEST(RedOp, BuiltinsLower) {
  RedOpTable t;
  LoweredOp l;
  ASSERT_EQ(t.lower(ncclSum, ncclFloat32, 4, &l), ncclSuccess);
  EXPECT_EQ(l.op, dev::kOpSum);
  ASSERT_EQ(t.lower(ncclMax, ncclInt8, 4, &l), ncclSuccess);
  EXPECT_EQ(l.op, dev::kOpMax);
  ASSERT_EQ(t.lower(ncclMin, ncclUint64, 4, &l), ncclSuccess);
  EXPECT_EQ(l.op, dev::kOpMin);
  ASSERT_EQ(t.lower(ncclProd, ncclFloat64, 4, &l), ncclSuccess);
  EXPECT_EQ(l.op, dev::kOpProd);
}

TEST(RedOp, AvgIsPreMulSumForFloatsAndPostDivForIntegers) {
  RedOpTable t;
  LoweredOp l;
  ASSERT_EQ(t.lower(ncclAvg, ncclFloat32, 4, &l), ncclSuccess);
  EXPECT_EQ(l.op, dev::kOpPreMulSum);
  float f;
  uint32_t bits = (uint32_t)l.scalar;
  memcpy(&f, &bits, 4);
  EXPECT_EQ(f, 0.25f);
  ASSERT_EQ(t.lower(ncclAvg, ncclInt32, 3, &l), ncclSuccess);
  EXPECT_EQ(l.op, dev::kOpSumPostDiv);
  EXPECT_EQ(l.scalar, 3u);
  ASSERT_EQ(t.lower(ncclAvg, ncclFloat64, 8, &l), ncclSuccess);
  double d;
  memcpy(&d, &l.scalar, 8);
  EXPECT_EQ(d, 0.125);
  EXPECT_EQ(l.scalarKind, dev::kScalarBits);
}

// fp8's encoding depends on the GPU target (OCP, or FNUZ on MI300: device/
// port.h), so the host passes n and the kernels make 1/n themselves.
TEST(RedOp, Fp8AvgLeavesTheInverseToTheKernels) {
  RedOpTable t;
  LoweredOp l;
  for (ncclDataType_t dt : {ncclFloat8e4m3, ncclFloat8e5m2}) {
    ASSERT_EQ(t.lower(ncclAvg, dt, 3, &l), ncclSuccess);
    EXPECT_EQ(l.op, dev::kOpPreMulSum);
    EXPECT_EQ(l.scalarKind, dev::kScalarInvRanks);
    EXPECT_EQ(l.scalar, 3u);
  }
  // A user's PreMulSum scalar stays the bits the user gave (in the GPU's encoding).
  ncclRedOp_t op;
  uint8_t bits = 0x40;
  ASSERT_EQ(t.create(&op, &bits, ncclFloat8e4m3, ncclScalarHostImmediate), ncclSuccess);
  ASSERT_EQ(t.lower(op, ncclFloat8e4m3, 3, &l), ncclSuccess);
  EXPECT_EQ(l.scalarKind, dev::kScalarBits);
  EXPECT_EQ(l.scalar, 0x40u);
}

TEST(RedOp, UserOpsCreateLowerDestroy) {
  RedOpTable t;
  ncclRedOp_t op;
  double scalar = 2.5;
  ASSERT_EQ(t.create(&op, &scalar, ncclFloat64, ncclScalarHostImmediate), ncclSuccess);
  EXPECT_GE((int)op, (int)ncclNumOps);
  LoweredOp l;
  ASSERT_EQ(t.lower(op, ncclFloat64, 2, &l), ncclSuccess);
  EXPECT_EQ(l.op, dev::kOpPreMulSum);
  EXPECT_EQ(l.scalarKind, dev::kScalarBits);
  double back;
  memcpy(&back, &l.scalar, 8);
  EXPECT_EQ(back, 2.5);
  // Wrong datatype for the op.
  EXPECT_EQ(t.lower(op, ncclFloat32, 2, &l), ncclInvalidArgument);
  // Device residence keeps the pointer.
  ncclRedOp_t op2;
  ASSERT_EQ(t.create(&op2, &scalar, ncclFloat64, ncclScalarDevice), ncclSuccess);
  ASSERT_EQ(t.lower(op2, ncclFloat64, 2, &l), ncclSuccess);
  EXPECT_EQ(l.scalarKind, dev::kScalarPtr);
  EXPECT_EQ(l.scalar, reinterpret_cast<uint64_t>(&scalar));
  ASSERT_EQ(t.destroy(op), ncclSuccess);
  EXPECT_EQ(t.lower(op, ncclFloat64, 2, &l), ncclInvalidArgument);
  EXPECT_EQ(t.destroy(op), ncclInvalidArgument);   // twice
  EXPECT_EQ(t.destroy(ncclSum), ncclInvalidArgument);
  EXPECT_EQ(t.lower((ncclRedOp_t)99, ncclFloat64, 2, &l), ncclInvalidArgument);
  // A freed slot is reused.
  ncclRedOp_t op3;
  ASSERT_EQ(t.create(&op3, &scalar, ncclFloat64, ncclScalarHostImmediate), ncclSuccess);
  EXPECT_EQ(op3, op);
}

// Reference decoders for the narrow formats.
double decode(uint32_t bits, int expBits, int mant, bool fnNoInf) {
  int bias = (1 << (expBits - 1)) - 1;
  uint32_t sign = bits >> (expBits + mant);
  uint32_t e = (bits >> mant) & ((1u << expBits) - 1);
  uint32_t m = bits & ((1u << mant) - 1);
  double v;
  if (e == 0) {
    v = std::ldexp((double)m, 1 - bias - mant);
  } else if (!fnNoInf && e == (1u << expBits) - 1) {
    v = m ? NAN : INFINITY;
  } else {
    v = std::ldexp(1.0 + (double)m / (1 << mant), (int)e - bias);
  }
  return sign ? -v : v;
}

TEST(FloatingBits, ExactValuesRoundTrip) {
  const double values[] = {0.0, 1.0, -1.0, 0.5, 0.25, 0.125, 2.0, -3.0, 1.5};
  for (double v : values) {
    EXPECT_EQ(decode((uint32_t)floatingBits(v, ncclFloat16), 5, 10, false), v);
    EXPECT_EQ(decode((uint32_t)floatingBits(v, ncclBfloat16), 8, 7, false), v);
    EXPECT_EQ(decode((uint32_t)floatingBits(v, ncclFloat8e4m3), 4, 3, true), v);
    EXPECT_EQ(decode((uint32_t)floatingBits(v, ncclFloat8e5m2), 5, 2, false), v);
  }
}

TEST(FloatingBits, RoundsToNearestRepresentable) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<double> dist(-8.0, 8.0);
  for (int i = 0; i < 20000; i++) {
    double v = dist(rng);
    struct Fmt { ncclDataType_t t; int e, m; bool fn; } fmts[] = {
        {ncclFloat16, 5, 10, false}, {ncclBfloat16, 8, 7, false}, {ncclFloat8e4m3, 4, 3, true},
        {ncclFloat8e5m2, 5, 2, false}};
    for (const Fmt& f : fmts) {
      uint32_t bits = (uint32_t)floatingBits(v, f.t);
      double got = decode(bits, f.e, f.m, f.fn);
      // Neighbours one ulp away must not be closer.
      double up = decode(bits + 1, f.e, f.m, f.fn);
      double down = bits & ((1u << (f.e + f.m)) - 1) ? decode(bits - 1, f.e, f.m, f.fn) : got;
      if (!std::isnan(up)) {
        EXPECT_LE(std::fabs(got - v), std::fabs(up - v) + 1e-12) << v;
      }
      if (!std::isnan(down)) {
        EXPECT_LE(std::fabs(got - v), std::fabs(down - v) + 1e-12) << v;
      }
    }
  }
}

TEST(FloatingBits, SaturationAndSpecials) {
  EXPECT_EQ(floatingBits(1e6, ncclFloat8e4m3), 0x7eu);          // FN: saturates to 448
  EXPECT_EQ(floatingBits(-1e6, ncclFloat8e4m3), 0xfeu);
  EXPECT_EQ(floatingBits(1e6, ncclFloat16), 0x7c00u);           // +inf
  EXPECT_EQ(floatingBits(1e6, ncclFloat8e5m2), 0x7cu);
  EXPECT_EQ(floatingBits(NAN, ncclFloat16) & 0x7c00u, 0x7c00u);
}

TEST(DataTypes, SizesAndNames) {
  EXPECT_EQ(dataTypeSize(ncclInt8), 1u);
  EXPECT_EQ(dataTypeSize(ncclBfloat16), 2u);
  EXPECT_EQ(dataTypeSize(ncclFloat8e5m2), 1u);
  EXPECT_EQ(dataTypeSize(ncclUint64), 8u);
  EXPECT_STREQ(dataTypeName(ncclFloat32), "float");
  EXPECT_EQ(dataTypeSize((ncclDataType_t)12), 0u);
}

}  // namespace
}  // namespace uniccl
