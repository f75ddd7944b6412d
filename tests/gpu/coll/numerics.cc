#include "numerics.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace colltest {

namespace {

// Tolerances: what uniccl's per-hop rounding (narrow floats reduce in float
// and round once per hop) can legitimately cost, relative to the magnitude of
// the terms; see check.cc for how they scale with the number of ranks.
const TypeInfo kTypes[ncclNumTypes] = {
    {"int8", 1, true, true, 0, 0},
    {"uint8", 1, true, false, 0, 0},
    {"int32", 4, true, true, 0, 0},
    {"uint32", 4, true, false, 0, 0},
    {"int64", 8, true, true, 0, 0},
    {"uint64", 8, true, false, 0, 0},
    {"half", 2, false, true, 1e-2, 0x1p-23},
    {"float", 4, false, true, 1e-5, 1e-30},
    {"double", 8, false, true, 1e-12, 0},
    {"bf16", 2, false, true, 2e-2, 1e-38},
    {"f8e4m3", 1, false, true, 0.13, 0x1p-8},
    {"f8e5m2", 1, false, true, 0.26, 0x1p-15},
};

struct Rng {
  uint64_t s;
  uint64_t next() { return mix64(s += 0x9E3779B97F4A7C15ull); }
};

double uniform(uint64_t r, double lo, double hi) { return lo + (hi - lo) * ((double)(r >> 11) * 0x1.0p-53); }

struct NarrowFormat {
  int exp, mant;
  bool fn;
};

NarrowFormat narrowFormat(ncclDataType_t dt) {
  switch (dt) {
    case ncclFloat16: return {5, 10, false};
    case ncclBfloat16: return {8, 7, false};
    case ncclFloat8e4m3: return {4, 3, true};
    default: return {5, 2, false};  // ncclFloat8e5m2
  }
}

// Decoding tables of the narrow formats.
struct Tables {
  std::vector<double> half, bf16, e4m3, e5m2;
  Tables() : half(65536), bf16(65536), e4m3(256), e5m2(256) {
    for (uint32_t b = 0; b < 65536; b++) {
      half[b] = decodeNarrow(b, 5, 10, false);
      bf16[b] = decodeNarrow(b, 8, 7, false);
    }
    for (uint32_t b = 0; b < 256; b++) {
      e4m3[b] = decodeNarrow(b, 4, 3, true);
      e5m2[b] = decodeNarrow(b, 5, 2, false);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

// Narrow-float inputs come from 4096 pre-rounded values per (type, range):
// rounding every element of a 64 Mi input would dominate the test's run time.
constexpr size_t kPoolSize = 4096;

const std::vector<uint16_t>& narrowPool(ncclDataType_t dt, Range range) {
  static std::vector<uint16_t> pools[4][2];
  static bool built = false;  // the tests drive every rank of a process from one thread
  if (!built) {
    const ncclDataType_t types[4] = {ncclFloat16, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
    for (int t = 0; t < 4; t++) {
      NarrowFormat f = narrowFormat(types[t]);
      uint32_t signBit = 1u << (f.exp + f.mant);
      for (int r = 0; r < 2; r++) {
        Rng rng{0x5eed0000ull + (uint64_t)(t * 2 + r)};
        double lo = r == 0 ? -1.0 : 0.5, hi = r == 0 ? 1.0 : 1.5;
        while (pools[t][r].size() < kPoolSize) {
          uint32_t b = encodeNarrow(uniform(rng.next(), lo, hi), f.exp, f.mant, f.fn);
          if ((b & ~signBit) != 0) pools[t][r].push_back((uint16_t)b);
        }
      }
    }
    built = true;
  }
  int t = dt == ncclFloat16 ? 0 : dt == ncclBfloat16 ? 1 : dt == ncclFloat8e4m3 ? 2 : 3;
  return pools[t][range == Range::Prod ? 1 : 0];
}

template <typename S>
void generateInt(Range range, Rng& rng, S* out, size_t count) {
  const bool isSigned = (S)-1 < (S)0;
  int64_t lo, hi;
  if (range == Range::Prod) {
    lo = isSigned ? -3 : 1;
    hi = 3;
  } else {
    switch (sizeof(S)) {
      case 1: lo = isSigned ? -8 : 1; hi = isSigned ? 8 : 16; break;
      case 4: lo = isSigned ? -(1 << 20) : 1; hi = isSigned ? (1 << 20) : (1 << 21); break;
      default: lo = isSigned ? -(1ll << 40) : 1; hi = isSigned ? (1ll << 40) : (1ll << 41); break;
    }
  }
  const uint64_t span = (uint64_t)(hi - lo + 1);
  for (size_t i = 0; i < count; i++) {
    uint64_t r = rng.next();
    S v = range == Range::Any ? (S)r : (S)(lo + (int64_t)(r % span));
    out[i] = v == 0 ? (S)1 : v;
  }
}

template <typename F>
void generateFloat(Range range, Rng& rng, F* out, size_t count) {
  double lo = range == Range::Prod ? 0.5 : -1.0, hi = range == Range::Prod ? 1.5 : 1.0;
  for (size_t i = 0; i < count; i++) {
    F v = (F)uniform(rng.next(), lo, hi);
    out[i] = v == 0 ? (F)0.25 : v;
  }
}

}  // namespace

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t hashString(const char* s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
  return mix64(h);
}

const TypeInfo& typeInfo(ncclDataType_t dt) { return kTypes[(int)dt]; }

uint32_t encodeNarrow(double v, int exp, int mant, bool fn) {
  const uint32_t sign = std::signbit(v) ? 1u << (exp + mant) : 0u;
  const int bias = (1 << (exp - 1)) - 1;
  const uint32_t expMax = (1u << exp) - 1;
  const uint32_t mantMask = (1u << mant) - 1;
  // fn formats: the all-ones pattern is NaN, so the largest finite value has
  // mantissa 1..10; IEEE-like ones reserve the top exponent for inf/NaN.
  const uint32_t maxFiniteBits = fn ? (expMax << mant) | (mantMask - 1) : ((expMax - 1) << mant) | mantMask;
  if (std::isnan(v)) return sign | (fn ? (expMax << mant) | mantMask : (expMax << mant) | (1u << (mant - 1)));
  const double maxFinite = fn ? std::ldexp((double)((2u << mant) - 2), (int)expMax - bias - mant)
                              : std::ldexp((double)((2u << mant) - 1), (int)expMax - 1 - bias - mant);
  double a = std::fabs(v);
  if (std::isinf(a)) return sign | (fn ? maxFiniteBits : expMax << mant);
  if (a == 0) return sign;
  int e2;
  (void)std::frexp(a, &e2);
  const int e0 = e2 - 1;  // a in [2^e0, 2^(e0+1))
  const int minNormal = 1 - bias;
  const int quantumExp = (e0 < minNormal ? minNormal : e0) - mant;
  const double q = std::nearbyint(std::ldexp(a, -quantumExp));  // ties to even (default rounding mode)
  const double val = std::ldexp(q, quantumExp);
  if (val > maxFinite) return sign | (fn ? maxFiniteBits : expMax << mant);
  if (q == 0) return sign;
  if (val < std::ldexp(1.0, minNormal)) return sign | (uint32_t)q;  // subnormal: the multiple is the mantissa
  (void)std::frexp(val, &e2);
  const int e1 = e2 - 1;
  const uint32_t m = (uint32_t)std::ldexp(val, mant - e1) - (1u << mant);
  return sign | ((uint32_t)(e1 + bias) << mant) | m;
}

double decodeNarrow(uint32_t bits, int exp, int mant, bool fn) {
  const uint32_t expMax = (1u << exp) - 1, mantMask = (1u << mant) - 1;
  const bool neg = (bits >> (exp + mant)) & 1;
  const uint32_t e = (bits >> mant) & expMax, m = bits & mantMask;
  const int bias = (1 << (exp - 1)) - 1;
  double v;
  if (!fn && e == expMax) {
    v = m ? NAN : INFINITY;
  } else if (fn && e == expMax && m == mantMask) {
    v = NAN;
  } else if (e == 0) {
    v = std::ldexp((double)m, 1 - bias - mant);
  } else {
    v = std::ldexp((double)(m | (1u << mant)), (int)e - bias - mant);
  }
  return neg ? -v : v;
}

double halfToDouble(uint16_t b) { return tables().half[b]; }
double bf16ToDouble(uint16_t b) { return tables().bf16[b]; }
double e4m3ToDouble(uint8_t b) { return tables().e4m3[b]; }
double e5m2ToDouble(uint8_t b) { return tables().e5m2[b]; }

void encodeValue(ncclDataType_t dt, double v, void* out) {
  switch (dt) {
    case ncclInt8: case ncclUint8: { uint8_t x = (uint8_t)(int64_t)v; memcpy(out, &x, 1); break; }
    case ncclInt32: case ncclUint32: { uint32_t x = (uint32_t)(int64_t)v; memcpy(out, &x, 4); break; }
    case ncclInt64: case ncclUint64: { uint64_t x = (uint64_t)(int64_t)v; memcpy(out, &x, 8); break; }
    case ncclFloat32: { float x = (float)v; memcpy(out, &x, 4); break; }
    case ncclFloat64: memcpy(out, &v, 8); break;
    case ncclFloat16: case ncclBfloat16: {
      NarrowFormat f = narrowFormat(dt);
      uint16_t x = (uint16_t)encodeNarrow(v, f.exp, f.mant, f.fn);
      memcpy(out, &x, 2);
      break;
    }
    default: {
      NarrowFormat f = narrowFormat(dt);
      uint8_t x = (uint8_t)encodeNarrow(v, f.exp, f.mant, f.fn);
      memcpy(out, &x, 1);
      break;
    }
  }
}

double decodeValue(ncclDataType_t dt, const void* base, size_t i) {
  const uint8_t* p = static_cast<const uint8_t*>(base) + i * typeInfo(dt).size;
  switch (dt) {
    case ncclInt8: return (double)*(const int8_t*)p;
    case ncclUint8: return (double)*p;
    case ncclInt32: { int32_t x; memcpy(&x, p, 4); return x; }
    case ncclUint32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case ncclInt64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case ncclUint64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
    case ncclFloat32: { float x; memcpy(&x, p, 4); return x; }
    case ncclFloat64: { double x; memcpy(&x, p, 8); return x; }
    case ncclFloat16: { uint16_t x; memcpy(&x, p, 2); return halfToDouble(x); }
    case ncclBfloat16: { uint16_t x; memcpy(&x, p, 2); return bf16ToDouble(x); }
    case ncclFloat8e4m3: return e4m3ToDouble(*p);
    default: return e5m2ToDouble(*p);
  }
}

void generate(ncclDataType_t dt, Range range, uint64_t seed, void* out, size_t count) {
  Rng rng{mix64(seed)};
  switch (dt) {
    case ncclInt8: generateInt(range, rng, (int8_t*)out, count); break;
    case ncclUint8: generateInt(range, rng, (uint8_t*)out, count); break;
    case ncclInt32: generateInt(range, rng, (int32_t*)out, count); break;
    case ncclUint32: generateInt(range, rng, (uint32_t*)out, count); break;
    case ncclInt64: generateInt(range, rng, (int64_t*)out, count); break;
    case ncclUint64: generateInt(range, rng, (uint64_t*)out, count); break;
    case ncclFloat32: generateFloat(range, rng, (float*)out, count); break;
    case ncclFloat64: generateFloat(range, rng, (double*)out, count); break;
    case ncclFloat16: case ncclBfloat16: {
      const std::vector<uint16_t>& pool = narrowPool(dt, range);
      uint16_t* o = (uint16_t*)out;
      for (size_t i = 0; i < count; i++) {
        uint64_t r = rng.next();  // four draws per call of the generator
        o[i] = pool[r & (kPoolSize - 1)];
        if (++i < count) o[i] = pool[(r >> 16) & (kPoolSize - 1)];
        if (++i < count) o[i] = pool[(r >> 32) & (kPoolSize - 1)];
        if (++i < count) o[i] = pool[(r >> 48) & (kPoolSize - 1)];
      }
      break;
    }
    default: {
      const std::vector<uint16_t>& pool = narrowPool(dt, range);
      uint8_t* o = (uint8_t*)out;
      for (size_t i = 0; i < count; i++) {
        uint64_t r = rng.next();
        o[i] = (uint8_t)pool[r & (kPoolSize - 1)];
        if (++i < count) o[i] = (uint8_t)pool[(r >> 16) & (kPoolSize - 1)];
        if (++i < count) o[i] = (uint8_t)pool[(r >> 32) & (kPoolSize - 1)];
        if (++i < count) o[i] = (uint8_t)pool[(r >> 48) & (kPoolSize - 1)];
      }
      break;
    }
  }
}

}  // namespace colltest
