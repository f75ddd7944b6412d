// Host-side numerics of the collective tests: the 12 NCCL datatypes, bit-exact
// conversions of the narrow floats (fp16, bf16, fp8 e4m3 "FN", fp8 e5m2; round
// to nearest even, written here so the reference never depends on a vendor
// header), the tolerances, and the deterministic input generator.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace colltest {

// What the inputs of an operation are for: decides their value range so that
// references are exact (integers) or well conditioned (floats).
enum class Range {
  Sum,   // sum / avg / premulsum: floats in [-1,1], small integers
  Prod,  // floats in [0.5,1.5], integers in [-3,3] (wrapping is computed exactly)
  Any,   // max / min / data movement: floats in [-1,1], integers of every bit pattern
};

struct TypeInfo {
  const char* name;
  size_t size;
  bool isInt;
  bool isSigned;
  double rtol;  // relative tolerance of one reduction hop (0 for integers)
  double atol;  // absolute slack: about one subnormal step of the type
};

const TypeInfo& typeInfo(ncclDataType_t dt);

// Narrow float formats: `exp` exponent bits, `mant` mantissa bits; `fn`
// formats (e4m3) have no infinity and saturate to their largest finite value.
uint32_t encodeNarrow(double v, int exp, int mant, bool fn);
double decodeNarrow(uint32_t bits, int exp, int mant, bool fn);

// Raw bits of `v` in `dt` (rounded to nearest even; integers: truncated and
// wrapped). Writes typeInfo(dt).size bytes.
void encodeValue(ncclDataType_t dt, double v, void* out);
// Value of element `i` of an array of `dt`.
double decodeValue(ncclDataType_t dt, const void* base, size_t i);

// Fast decoders for the narrow formats (tables built once).
double halfToDouble(uint16_t b);
double bf16ToDouble(uint16_t b);
double e4m3ToDouble(uint8_t b);
double e5m2ToDouble(uint8_t b);

// Deterministic pseudo-random elements, never zero: the same (seed, range)
// always gives the same data, in every process.
void generate(ncclDataType_t dt, Range range, uint64_t seed, void* out, size_t count);

// splitmix64: seed mixing for generate() and case seeds.
uint64_t mix64(uint64_t x);
uint64_t hashString(const char* s);

}  // namespace colltest
