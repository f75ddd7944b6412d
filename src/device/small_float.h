// Conversions between float and the narrow floating formats (fp16, bf16,
// fp8 e4m3 "FN", fp8 e5m2) as plain bit manipulation, so both vendors (HIP
// of ROCm 5.2 has no fp8 types) and the host test reference share one
// definition. Rounding is to nearest, ties to even, subnormals included.
// Overflow: fp16/bf16 go to infinity (IEEE); fp8 saturates to the largest
// finite value (NVIDIA's __NV_SATFINITE, what the __nv_fp8 constructors do).
// NaN stays NaN.
#pragma once

#include <cstdint>
#include <cstring>

#include "device/port.h"

namespace uniccl::dev {

UNICCL_HD uint32_t floatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
UNICCL_HD float bitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// Shifts right by `sh` rounding to nearest even (m < 2^25).
UNICCL_HD uint32_t shiftRoundEven(uint32_t m, int sh) {
  if (sh <= 0) return m;
  if (sh >= 26) return 0;
  const uint32_t q = m >> sh;
  const uint32_t rem = m & ((1u << sh) - 1);
  const uint32_t half = 1u << (sh - 1);
  return q + ((rem > half || (rem == half && (q & 1))) ? 1u : 0u);
}

// E exponent bits, M mantissa bits. FN: no infinities, only the all-ones
// code is NaN (e4m3). Saturate: finite overflow clamps to the largest finite.
template <int E, int M, bool FN, bool Saturate>
UNICCL_HD uint32_t floatToSmall(float f) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  constexpr int kEmin = 1 - kBias;
  constexpr uint32_t kNaN = FN ? ((1u << (E + M)) - 1) : (((1u << E) - 1) << M) | (1u << (M - 1));
  constexpr uint32_t kInf = ((1u << E) - 1) << M;
  constexpr uint32_t kMaxFinite = FN ? (1u << (E + M)) - 2 : kInf - 1;
  const uint32_t u = floatBits(f);
  const uint32_t sign = (u >> 31) << (E + M);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | kNaN;
  if (a == 0x7f800000u) return sign | ((FN || Saturate) ? kMaxFinite : kInf);
  if (a < 0x00800000u) return sign;  // float zero/subnormal: below every narrow subnormal
  const int exp = (int)(a >> 23) - 127;
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  uint32_t code;
  if (exp < kEmin) {
    // Subnormal result; a round-up to 1<<M lands exactly on the smallest normal.
    code = shiftRoundEven(mant, 23 - M + (kEmin - exp));
  } else {
    const uint32_t r = shiftRoundEven(mant, 23 - M);        // implicit bit at M (or carried to M+1)
    code = ((uint32_t)(exp + kBias) << M) + r - (1u << M);  // a carry bumps the exponent field
  }
  if (code > kMaxFinite) code = (FN || Saturate) ? kMaxFinite : kInf;
  return sign | code;
}

template <int E, int M, bool FN>
UNICCL_HD float smallToFloat(uint32_t c) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  const uint32_t sign = ((c >> (E + M)) & 1u) << 31;
  const uint32_t e = (c >> M) & ((1u << E) - 1);
  const uint32_t m = c & ((1u << M) - 1);
  if (FN) {
    if (e == (1u << E) - 1 && m == (1u << M) - 1) return bitsFloat(sign | 0x7fc00000u);
  } else if (e == (1u << E) - 1) {
    return bitsFloat(sign | 0x7f800000u | (m ? 0x400000u : 0u));
  }
  if (e == 0) {
    // m * 2^(1 - bias - M), exact in float.
    const float scale = bitsFloat((uint32_t)(127 + 1 - kBias - M) << 23);
    const float v = (float)m * scale;
    return sign ? -v : v;
  }
  return bitsFloat(sign | ((e - kBias + 127) << 23) | (m << (23 - M)));
}

#if defined(UNICCL_HW_FLOAT_CVT)
#define UNICCL_CVT(hw, sw) return hw
#else
#define UNICCL_CVT(hw, sw) return sw
#endif

UNICCL_HD float halfToFloat(uint16_t h) { UNICCL_CVT(hwHalfToFloat(h), (smallToFloat<5, 10, false>(h))); }
UNICCL_HD uint16_t floatToHalf(float f) { UNICCL_CVT(hwFloatToHalf(f), ((uint16_t)floatToSmall<5, 10, false, false>(f))); }
UNICCL_HD float bf16ToFloat(uint16_t h) { return bitsFloat((uint32_t)h << 16); }
UNICCL_HD uint16_t floatToBf16Bits(float f) {
  const uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  // quiet NaN
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
UNICCL_HD uint16_t floatToBf16(float f) { UNICCL_CVT(hwFloatToBf16(f), floatToBf16Bits(f)); }
UNICCL_HD float e4m3ToFloat(uint8_t c) { UNICCL_CVT(hwE4m3ToFloat(c), (smallToFloat<4, 3, true>(c))); }
UNICCL_HD uint8_t floatToE4m3(float f) { UNICCL_CVT(hwFloatToE4m3(f), ((uint8_t)floatToSmall<4, 3, true, true>(f))); }
UNICCL_HD float e5m2ToFloat(uint8_t c) { UNICCL_CVT(hwE5m2ToFloat(c), (smallToFloat<5, 2, false>(c))); }
UNICCL_HD uint8_t floatToE5m2(float f) { UNICCL_CVT(hwFloatToE5m2(f), ((uint8_t)floatToSmall<5, 2, false, true>(f))); }
#undef UNICCL_CVT

}  // namespace uniccl::dev
