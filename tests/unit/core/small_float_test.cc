// The fp8 conversions of device/small_float.h against an independent model:
// AMD's FNUZ formats (e4m3fnuz, e5m2fnuz: what ncclFloat8e4m3 / e5m2 are on
// MI300 and the AMD targets RCCL converts in software, docs/amd.md) and
// OCP's (e4m3fn, e5m2). The model decodes a code from the format's
// definition (ldexp) and encodes a value as the nearest code found by
// search, ties to the even code, saturating as RCCL's conversion does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "device/small_float.h"

namespace uniccl::dev {
namespace {

struct Fnuz {
  int e, m;
  uint8_t (*enc)(float);
  float (*dec)(uint8_t);
};
const Fnuz kE4m3{4, 3, floatToE4m3Fnuz, e4m3FnuzToFloat};
const Fnuz kE5m2{5, 2, floatToE5m2Fnuz, e5m2FnuzToFloat};

// Decoding from the definition: bias 2^(E-1), 0x80 NaN, no infinity.
double refDecode(const Fnuz& f, unsigned c) {
  if (c == 0x80) return std::numeric_limits<double>::quiet_NaN();
  const int bias = 1 << (f.e - 1);
  const unsigned e = (c >> f.m) & ((1u << f.e) - 1), m = c & ((1u << f.m) - 1);
  const double v = e == 0 ? std::ldexp((double)m, 1 - bias - f.m)
                          : std::ldexp(1.0 + (double)m / (1 << f.m), (int)e - bias);
  return (c & 0x80) ? -v : v;
}

// Encoding by search: NaN and +-inf -> 0x80; a finite value clamps to the
// largest magnitude, then takes the nearest code (ties: the even code); a
// zero result is +0.
unsigned refEncode(const Fnuz& f, double x) {
  if (std::isnan(x) || std::isinf(x)) return 0x80;
  const double a = std::min(std::fabs(x), refDecode(f, 0x7f));
  unsigned best = 0;
  for (unsigned c = 1; c <= 0x7f; c++) {
    const double dc = std::fabs(refDecode(f, c) - a), db = std::fabs(refDecode(f, best) - a);
    if (dc < db || (dc == db && (c & 1) == 0)) best = c;
  }
  if (best == 0) return 0;
  return (x < 0 ? 0x80u : 0u) | best;
}

TEST(Fp8Fnuz, EveryCodeDecodesAsDefinedAndRoundTrips) {
  for (const Fnuz* f : {&kE4m3, &kE5m2}) {
    for (unsigned c = 0; c < 256; c++) {
      const float v = f->dec((uint8_t)c);
      const double want = refDecode(*f, c);
      if (c == 0x80) {
        EXPECT_TRUE(std::isnan(v)) << "e" << f->e << " code " << c;
      } else {
        EXPECT_EQ((double)v, want) << "e" << f->e << " code " << c;
      }
      EXPECT_FALSE(std::isinf(v));
      // Every code comes back from its value (0x80: NaN -> 0x80).
      EXPECT_EQ(f->enc(v), c) << "e" << f->e << " code " << c;
    }
  }
}

TEST(Fp8Fnuz, KnownValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  struct K { float x; unsigned e4m3, e5m2; } k[] = {
      {1.0f, 0x40, 0x40},         {-1.0f, 0xc0, 0xc0},         {0.5f, 0x38, 0x3c},
      {57344.0f, 0x7f, 0x7f},
      {240.0f, 0x7f, 0x60},       {-240.0f, 0xff, 0xe0},       // e5m2: tie 224 / 256 -> 256 (even)
      {0x1p-7f, 0x08, 0x24},      {0x1p-10f, 0x01, 0x18},      {0x1p-15f, 0x00, 0x04},
      {0x1p-17f, 0x00, 0x01},     {0x1p-18f, 0x00, 0x00},      // tie between 0 and 2^-17: the even code 0
      {0x1.8p-18f, 0x00, 0x01},   {0.0f, 0x00, 0x00},          {-0.0f, 0x00, 0x00},  // no negative zero
      {-1e-30f, 0x00, 0x00},      {1e6f, 0x7f, 0x7f},          {-1e6f, 0xff, 0xff},  // saturation
      {248.0f, 0x7f, 0x60},       // e4m3: beyond 240 saturates (would round to 256); e5m2: 256
      {232.0f, 0x7e, 0x5f},       // e4m3: tie 224 / 240 -> 224 (even); e5m2: 224 / 256 -> 224
      {inf, 0x80, 0x80},          {-inf, 0x80, 0x80},          {nan, 0x80, 0x80},
      {1.0f / 3.0f, 0x33, 0x39},  // 0.34375, 0.3125: fp8 ncclAvg's scalar on 3 ranks
  };
  for (const K& v : k) {
    EXPECT_EQ(floatToE4m3Fnuz(v.x), v.e4m3) << v.x;
    EXPECT_EQ(floatToE5m2Fnuz(v.x), v.e5m2) << v.x;
    EXPECT_EQ(floatToE4m3Fnuz(v.x), refEncode(kE4m3, v.x)) << v.x;
    EXPECT_EQ(floatToE5m2Fnuz(v.x), refEncode(kE5m2, v.x)) << v.x;
  }
  EXPECT_EQ(e4m3FnuzToFloat(0x7f), 240.0f);
  EXPECT_EQ(e5m2FnuzToFloat(0x7f), 57344.0f);
  EXPECT_EQ(e4m3FnuzToFloat(0x01), 0x1p-10f);
  EXPECT_EQ(e5m2FnuzToFloat(0x01), 0x1p-17f);
  // The same bits mean other values in OCP's e4m3fn (bias 7, max 448).
  EXPECT_EQ(e4m3OcpToFloat(0x40), 2.0f);
  EXPECT_EQ(e4m3FnuzToFloat(0x40), 1.0f);
  EXPECT_TRUE(std::isnan(e4m3OcpToFloat(0x7f)));
  EXPECT_EQ(e4m3OcpToFloat(0x80), 0.0f);   // OCP's -0, FNUZ's NaN
}

// Rounding at and around every midpoint between neighbouring codes, and
// random values over the whole range, against the search.
TEST(Fp8Fnuz, RoundsToNearestEvenAndSaturates) {
  for (const Fnuz* f : {&kE4m3, &kE5m2}) {
    std::vector<float> xs;
    for (unsigned c = 0; c < 0x7f; c++) {
      const float mid = (float)((refDecode(*f, c) + refDecode(*f, c + 1)) / 2);   // exact in float
      for (float s : {1.0f, -1.0f}) {
        xs.push_back(s * mid);
        xs.push_back(s * std::nextafter(mid, 0.0f));
        xs.push_back(s * std::nextafter(mid, 1e30f));
      }
    }
    const float top = (float)refDecode(*f, 0x7f);
    for (float x : {top, std::nextafter(top, 1e30f), top * 1.0625f, top * 1.125f, top * 2, 3e38f}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
    std::mt19937 rng(20261201);
    std::uniform_real_distribution<float> mant(1.0f, 2.0f);
    std::uniform_int_distribution<int> ex(-30, 20);
    for (int i = 0; i < 20000; i++) xs.push_back((i & 1 ? -1 : 1) * std::ldexp(mant(rng), ex(rng)));
    for (float x : xs) EXPECT_EQ(f->enc(x), refEncode(*f, x)) << "e" << f->e << " x " << x;
  }
}

// OCP (NVIDIA's, and ncclFloat8e4m3 in host code): every code but NaN
// round-trips.
TEST(Fp8Ocp, CodesRoundTrip) {
  EXPECT_FALSE(kFp8Fnuz);   // host code: OCP
  for (unsigned c = 0; c < 256; c++) {
    if ((c & 0x7f) != 0x7f) {
      EXPECT_EQ(floatToE4m3Ocp(e4m3OcpToFloat((uint8_t)c)), c) << c;
    }
    if ((c & 0x7f) <= 0x7b) {
      EXPECT_EQ(floatToE5m2Ocp(e5m2OcpToFloat((uint8_t)c)), c) << c;
    }
  }
  EXPECT_EQ(e4m3ToFloat(0x40), 2.0f);
  EXPECT_EQ(floatToE4m3Ocp(1e6f), 0x7e);   // satfinite: 448
}

}  // namespace
}  // namespace uniccl::dev
