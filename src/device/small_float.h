// Conversions between float and the narrow floating formats (fp16, bf16,
// fp8 e4m3 "FN", fp8 e5m2, and AMD's FNUZ fp8 formats) as plain bit
// manipulation, so both vendors (HIP of ROCm 5.2 has no fp8 types) and the
// host test reference share one definition. Rounding is to nearest, ties to
// even, subnormals included. Overflow: fp16/bf16 go to infinity (IEEE); OCP
// fp8 saturates to the largest finite value (NVIDIA's __NV_SATFINITE, what
// the __nv_fp8 constructors do); FNUZ fp8 as RCCL converts (below). NaN
// stays NaN.
//
// e4m3ToFloat / floatToE4m3 (and e5m2) are ncclFloat8e4m3's (e5m2's)
// encoding in the code being compiled: OCP, or FNUZ where device/port.h sets
// UNICCL_FP8_FNUZ for the target (the AMD targets RCCL uses FNUZ on) or the
// emulator's FNUZ build asks for it. The explicit OCP and FNUZ functions
// (e4m3OcpToFloat, e4m3FnuzToFloat, ...) are there for both everywhere.
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

// AMD's FNUZ formats (e4m3fnuz, e5m2fnuz: MI300's fp8): E exponent bits
// with bias 2^(E-1), M mantissa bits, no infinities, no negative zero, 0x80
// the only NaN. Conversion as RCCL's (its software path, and gfx942's
// clamp-then-convert): round to nearest even; a finite value beyond the
// largest finite magnitude saturates to it (240 / 57344, code 0x7f or 0xff);
// NaN and both infinities become 0x80; a result that rounds to zero is +0
// (0x00) whatever its sign.
template <int E, int M>
UNICCL_HD uint32_t floatToFnuz(float f) {
  constexpr int kBias = 1 << (E - 1);
  constexpr int kEmin = 1 - kBias;
  constexpr uint32_t kNaN = 1u << (E + M);
  constexpr uint32_t kMaxFinite = (1u << (E + M)) - 1;
  const uint32_t u = floatBits(f);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return kNaN;   // NaN, +-inf
  if (a < 0x00800000u) return 0;       // float zero/subnormal: below every narrow subnormal
  const int exp = (int)(a >> 23) - 127;
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  uint32_t code;
  if (exp < kEmin) {
    code = shiftRoundEven(mant, 23 - M + (kEmin - exp));
  } else {
    const uint32_t r = shiftRoundEven(mant, 23 - M);
    code = ((uint32_t)(exp + kBias) << M) + r - (1u << M);
  }
  if (code > kMaxFinite) code = kMaxFinite;
  if (code == 0) return 0;             // no negative zero: 0x80 is NaN
  return ((u >> 31) << (E + M)) | code;
}

template <int E, int M>
UNICCL_HD float fnuzToFloat(uint32_t c) {
  constexpr int kBias = 1 << (E - 1);
  if (c == (1u << (E + M))) return bitsFloat(0x7fc00000u);
  const uint32_t sign = ((c >> (E + M)) & 1u) << 31;
  const uint32_t e = (c >> M) & ((1u << E) - 1);
  const uint32_t m = c & ((1u << M) - 1);
  if (e == 0) {
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

// OCP fp8 (NVIDIA's hardware conversions where the GPU has them).
UNICCL_HD float e4m3OcpToFloat(uint8_t c) { UNICCL_CVT(hwE4m3ToFloat(c), (smallToFloat<4, 3, true>(c))); }
UNICCL_HD uint8_t floatToE4m3Ocp(float f) { UNICCL_CVT(hwFloatToE4m3(f), ((uint8_t)floatToSmall<4, 3, true, true>(f))); }
UNICCL_HD float e5m2OcpToFloat(uint8_t c) { UNICCL_CVT(hwE5m2ToFloat(c), (smallToFloat<5, 2, false>(c))); }
UNICCL_HD uint8_t floatToE5m2Ocp(float f) { UNICCL_CVT(hwFloatToE5m2(f), ((uint8_t)floatToSmall<5, 2, false, true>(f))); }
#undef UNICCL_CVT

// FNUZ fp8 (bit manipulation on every target).
UNICCL_HD float e4m3FnuzToFloat(uint8_t c) { return fnuzToFloat<4, 3>(c); }
UNICCL_HD uint8_t floatToE4m3Fnuz(float f) { return (uint8_t)floatToFnuz<4, 3>(f); }
UNICCL_HD float e5m2FnuzToFloat(uint8_t c) { return fnuzToFloat<5, 2>(c); }
UNICCL_HD uint8_t floatToE5m2Fnuz(float f) { return (uint8_t)floatToFnuz<5, 2>(f); }

// ncclFloat8e4m3 / ncclFloat8e5m2 in the code being compiled.
#if defined(UNICCL_FP8_FNUZ)
constexpr bool kFp8Fnuz = true;
UNICCL_HD float e4m3ToFloat(uint8_t c) { return e4m3FnuzToFloat(c); }
UNICCL_HD uint8_t floatToE4m3(float f) { return floatToE4m3Fnuz(f); }
UNICCL_HD float e5m2ToFloat(uint8_t c) { return e5m2FnuzToFloat(c); }
UNICCL_HD uint8_t floatToE5m2(float f) { return floatToE5m2Fnuz(f); }
#else
constexpr bool kFp8Fnuz = false;
UNICCL_HD float e4m3ToFloat(uint8_t c) { return e4m3OcpToFloat(c); }
UNICCL_HD uint8_t floatToE4m3(float f) { return floatToE4m3Ocp(f); }
UNICCL_HD float e5m2ToFloat(uint8_t c) { return e5m2OcpToFloat(c); }
UNICCL_HD uint8_t floatToE5m2(float f) { return floatToE5m2Ocp(f); }
#endif

}  // namespace uniccl::dev
