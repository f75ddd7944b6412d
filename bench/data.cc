// Input data and the host-side checker.
//
// Inputs are pseudo-random, deterministic from (seed, rank, index), and are
// chosen so the expected result can be recomputed on the host from the seed
// alone and compared tightly:
//   integers   copy/min/max: full random bits (exercises signed compares);
//              sum/avg/premulsum: [0, R) with R small enough that no sum of
//              nranks terms (times the PreMulSum scalar <= 2) overflows;
//              prod: odd random bits (products wrap mod 2^bits on both sides).
//   floats     sum/avg/premulsum: small integers whose every partial sum is
//              exactly representable (as in nccl-tests' verifiable data), so
//              any reduction order gives the exact result
//              (with many ranks of fp8 only the first few ranks add non-zero
//              values, so partial sums stay exact);
//              prod: powers of two 2^{-1,0,1} (exact); copy/min/max: random
//              +-(1 + k/2^m) * 2^{-1,0,1}.
// Tolerance: everything is compared exactly except floating Avg, whose 1/n
// premultiply rounds: |got - expected| <= (n+2) * 2^-(m+1) * sum|terms/n|
// (m = mantissa bits of the datatype, n = nranks): the first-order bound of
// rounding 1/n, the n premultiplies and the n-1 partial sums with unit
// roundoff 2^-(m+1), plus one for second-order terms. It scales with nranks
// and is looser for half/bf16/fp8 through their shorter mantissas.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#include "common.h"

namespace bench {

const std::vector<TypeInfo>& allTypes() {
  static const std::vector<TypeInfo> types = {
      {"int8", ncclInt8, 1, Kind::Signed, 0, 0, 0, false},
      {"uint8", ncclUint8, 1, Kind::Unsigned, 0, 0, 0, false},
      {"int32", ncclInt32, 4, Kind::Signed, 0, 0, 0, false},
      {"uint32", ncclUint32, 4, Kind::Unsigned, 0, 0, 0, false},
      {"int64", ncclInt64, 8, Kind::Signed, 0, 0, 0, false},
      {"uint64", ncclUint64, 8, Kind::Unsigned, 0, 0, 0, false},
      {"half", ncclFloat16, 2, Kind::Float, 5, 10, 15, true},
      {"float", ncclFloat32, 4, Kind::Float, 8, 23, 127, true},
      {"double", ncclFloat64, 8, Kind::Float, 11, 52, 1023, true},
      {"bfloat16", ncclBfloat16, 2, Kind::Float, 8, 7, 127, true},
#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE >= 22400
      {"f8e4m3", ncclFloat8e4m3, 1, Kind::Float, 4, 3, 7, false},
      {"f8e5m2", ncclFloat8e5m2, 1, Kind::Float, 5, 2, 15, true},
#endif
  };
  return types;
}

const TypeInfo* findType(const std::string& name) {
  static const struct { const char* alias; const char* name; } aliases[] = {
      {"char", "int8"}, {"int", "int32"}, {"fp16", "half"}, {"float16", "half"},
      {"fp32", "float"}, {"float32", "float"}, {"fp64", "double"}, {"float64", "double"},
      {"bf16", "bfloat16"}, {"fp8e4m3", "f8e4m3"}, {"fp8e5m2", "f8e5m2"}};
  std::string n = name;
  for (const auto& a : aliases)
    if (n == a.alias) n = a.name;
  for (const auto& t : allTypes())
    if (n == t.name) return &t;
  return nullptr;
}

double decodeFloat(const TypeInfo& t, uint64_t bits) {
  if (t.bytes == 4) { float f; uint32_t b = uint32_t(bits); memcpy(&f, &b, 4); return f; }
  if (t.bytes == 8) { double d; memcpy(&d, &bits, 8); return d; }
  const int total = t.bytes * 8;
  const bool neg = (bits >> (total - 1)) & 1;
  const uint64_t maxE = (1u << t.expBits) - 1;
  const uint64_t e = (bits >> t.manBits) & maxE;
  const uint64_t m = bits & ((uint64_t(1) << t.manBits) - 1);
  double v;
  if (e == 0) {
    v = std::ldexp(double(m), 1 - t.bias - t.manBits);
  } else if (e == maxE && t.hasInf) {
    v = m ? NAN : INFINITY;
  } else if (e == maxE && m == (uint64_t(1) << t.manBits) - 1) {
    v = NAN;  // e4m3fn: only S.1111.111 is NaN
  } else {
    v = std::ldexp(1.0 + std::ldexp(double(m), -t.manBits), int(e) - t.bias);
  }
  return neg ? -v : v;
}

uint64_t encodeFloat(const TypeInfo& t, double v) {
  if (t.bytes == 4) { float f = float(v); uint32_t b; memcpy(&b, &f, 4); return b; }
  if (t.bytes == 8) { uint64_t b; memcpy(&b, &v, 8); return b; }
  const int total = t.bytes * 8;
  const uint64_t sign = std::signbit(v) ? uint64_t(1) << (total - 1) : 0;
  const int64_t maxE = (int64_t(1) << t.expBits) - 1;
  const uint64_t manOne = uint64_t(1) << t.manBits;
  if (std::isnan(v)) return sign | (uint64_t(maxE) << t.manBits) | (manOne - 1);
  const double a = std::fabs(v);
  // Largest finite: e4m3fn keeps exponent 15 except mantissa 111.
  const uint64_t maxFinite = t.hasInf ? ((uint64_t(maxE - 1) << t.manBits) | (manOne - 1))
                                      : ((uint64_t(maxE) << t.manBits) | (manOne - 2));
  if (a == 0) return sign;
  int ex;
  std::frexp(a, &ex);  // a = f * 2^ex, f in [0.5, 1)
  int64_t e = int64_t(ex) - 1 + t.bias;
  uint64_t bits;
  if (e >= 1) {
    double q = std::nearbyint(std::ldexp(a, t.manBits - (ex - 1)));
    if (q >= double(2 * manOne)) { q /= 2; e++; }
    bits = (uint64_t(e) << t.manBits) | (uint64_t(q) - manOne);
  } else {
    double q = std::nearbyint(std::ldexp(a, t.bias - 1 + t.manBits));
    bits = uint64_t(q);  // q == manOne rounds up into the smallest normal
  }
  if (bits > maxFinite || std::isinf(a))
    bits = t.hasInf ? (uint64_t(maxE) << t.manBits) : maxFinite;
  return sign | bits;
}

const char* opName(Op op) {
  switch (op) {
    case Op::None: return "none";
    case Op::Sum: return "sum";
    case Op::Prod: return "prod";
    case Op::Max: return "max";
    case Op::Min: return "min";
    case Op::Avg: return "avg";
    case Op::PreMulSum: return "premulsum";
  }
  return "?";
}

bool parseOp(const std::string& s, std::vector<Op>* out) {
  static const Op ops[] = {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg, Op::PreMulSum};
  if (s == "all") { out->assign(std::begin(ops), std::end(ops)); return true; }
  for (Op op : ops)
    if (s == opName(op)) { out->assign(1, op); return true; }
  return false;
}

// ------------------------------------------------------------------ generator
static inline uint64_t mix(uint64_t seed, int rank, size_t idx) {
  uint64_t x = seed ^ (uint64_t(rank + 1) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(idx) * 0xD1B54A32D192ED03ull);
  x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27; x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static inline uint64_t typeMask(const TypeInfo& t) {
  return t.bytes == 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * t.bytes)) - 1;
}

static bool isSumLike(Op op) { return op == Op::Sum || op == Op::Avg || op == Op::PreMulSum; }

// Largest magnitude up to which every integer is exact (floats) / the largest
// non-negative value (integers).
static uint64_t typeLimit(const TypeInfo& t) {
  if (t.kind == Kind::Float) return uint64_t(1) << std::min(t.manBits + 1, 24);
  return t.kind == Kind::Signed ? typeMask(t) >> 1 : typeMask(t);
}

// Range [0, R) of summed inputs: no overflow (ints) / exact partial sums (floats).
static uint64_t sumRange(const TypeInfo& t, int nranks, Op op) {
  const uint64_t scalarMax = op == Op::PreMulSum ? 2 : 1;
  const uint64_t r = typeLimit(t) / (uint64_t(nranks) * scalarMax * (t.kind == Kind::Float ? 1 : 2));
  return std::max<uint64_t>(r, 2);
}

// Ranks that contribute non-zero summed inputs: all of them, unless even
// inputs {0, 1} could overflow the exact-integer range (fp8 with many ranks),
// then only as many as keep every partial sum exact.
static int activeRanks(const TypeInfo& t, int nranks, Op op) {
  const uint64_t scalarMax = op == Op::PreMulSum ? 2 : 1;
  const uint64_t r = sumRange(t, nranks, op);
  if (t.kind != Kind::Float || uint64_t(nranks) * (r - 1) * scalarMax <= typeLimit(t)) return nranks;
  return int(std::max<uint64_t>(1, typeLimit(t) / ((r - 1) * scalarMax)));
}

// The exact value of a floating input (the checker's side of inputBits).
static inline double floatInput(const DataGen& g, int rank, size_t idx, uint64_t h) {
  const TypeInfo& t = *g.t;
  if (isSumLike(g.op)) return rank < activeRanks(t, g.nranks, g.op) ? double(h % sumRange(t, g.nranks, g.op)) : 0.0;
  if (g.op == Op::Prod) return rank < 8 ? std::ldexp(1.0, int(h % 3) - 1) : 1.0;
  const int mb = std::min(t.manBits, 20);
  double v = std::ldexp(1.0 + std::ldexp(double(h & ((uint64_t(1) << mb) - 1)), -mb), int((h >> 40) % 3) - 1);
  return (h >> 60) & 1 ? -v : v;
}

uint64_t inputBits(const DataGen& g, int rank, size_t idx) {
  const TypeInfo& t = *g.t;
  const uint64_t h = mix(g.seed, rank, idx);
  if (t.kind == Kind::Float) return encodeFloat(t, floatInput(g, rank, idx, h));
  if (isSumLike(g.op)) return h % sumRange(t, g.nranks, g.op);
  if (g.op == Op::Prod) return (h | 1) & typeMask(t);
  return h & typeMask(t);
}

static double preMulScalar(int rank) { return 1.0 + (rank % 2); }

uint64_t preMulScalarBits(const TypeInfo& t, int rank) {
  return t.kind == Kind::Float ? encodeFloat(t, preMulScalar(rank)) : uint64_t(preMulScalar(rank));
}

static inline void store(void* dst, size_t i, int bytes, uint64_t v) {
  switch (bytes) {
    case 1: static_cast<uint8_t*>(dst)[i] = uint8_t(v); break;
    case 2: static_cast<uint16_t*>(dst)[i] = uint16_t(v); break;
    case 4: static_cast<uint32_t*>(dst)[i] = uint32_t(v); break;
    default: static_cast<uint64_t*>(dst)[i] = v; break;
  }
}

static inline uint64_t load(const void* src, size_t i, int bytes) {
  switch (bytes) {
    case 1: return static_cast<const uint8_t*>(src)[i];
    case 2: return static_cast<const uint16_t*>(src)[i];
    case 4: return static_cast<const uint32_t*>(src)[i];
    default: return static_cast<const uint64_t*>(src)[i];
  }
}

void fillInput(const DataGen& g, int rank, void* dst, size_t count) {
  parallelFor(count, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; i++) store(dst, i, g.t->bytes, inputBits(g, rank, i));
  });
}

double toleranceScale(const TypeInfo& t, int nranks, Op op) {
  if (t.kind != Kind::Float || op != Op::Avg) return 0;
  return (nranks + 2) * std::ldexp(1.0, -(t.manBits + 1));
}

// ------------------------------------------------------------------ checker
static inline int64_t signExtend(uint64_t v, int bytes) {
  const int shift = 64 - 8 * bytes;
  return int64_t(v << shift) >> shift;
}

// Expected integer reduction of element k over all ranks, as masked bits.
static uint64_t expectedInt(const DataGen& g, size_t k) {
  const TypeInfo& t = *g.t;
  const uint64_t mask = typeMask(t);
  uint64_t acc = inputBits(g, 0, k);
  if (g.op == Op::PreMulSum) acc *= uint64_t(preMulScalar(0));
  for (int r = 1; r < g.nranks; r++) {
    uint64_t x = inputBits(g, r, k);
    switch (g.op) {
      case Op::Sum: case Op::Avg: acc += x; break;
      case Op::PreMulSum: acc += x * uint64_t(preMulScalar(r)); break;
      case Op::Prod: acc = (acc * x) & mask; break;
      case Op::Max: case Op::Min: {
        bool less = t.kind == Kind::Signed ? signExtend(x, t.bytes) < signExtend(acc, t.bytes) : x < acc;
        if ((g.op == Op::Min) == less) acc = x;
        break;
      }
      default: break;
    }
  }
  if (g.op == Op::Avg) acc /= uint64_t(g.nranks);  // inputs are non-negative: no sign issue
  return acc & mask;
}

// Expected floating reduction of element k; *sumAbs gets sum|terms| for the tolerance.
static double expectedFloat(const DataGen& g, size_t k, double* sumAbs) {
  double acc = 0, abs = 0;
  for (int r = 0; r < g.nranks; r++) {
    double x = floatInput(g, r, k, mix(g.seed, r, k));
    if (g.op == Op::PreMulSum) x *= preMulScalar(r);
    if (r == 0) { acc = x; abs = std::fabs(x); continue; }
    switch (g.op) {
      case Op::Prod: acc *= x; break;
      case Op::Max: acc = std::max(acc, x); break;
      case Op::Min: acc = std::min(acc, x); break;
      default: acc += x; abs += std::fabs(x); break;
    }
  }
  if (g.op == Op::Avg) { acc /= g.nranks; abs /= g.nranks; }
  *sumAbs = isSumLike(g.op) ? abs : 0;
  return acc;
}

CheckResult checkOutput(const DataGen& g, int rank, const Expectation& e, const void* out) {
  const TypeInfo& t = *g.t;
  const double tolScale = toleranceScale(t, g.nranks, g.op);
  std::mutex mu;
  CheckResult total;
  for (const Segment& s : e.segments) {
    parallelFor(s.len, [&](size_t b, size_t end) {
      CheckResult part;
      for (size_t j = b; j < end; j++) {
        const uint64_t got = load(out, s.outStart + j, t.bytes);
        const size_t k = s.srcStart + j;
        if (!s.reduce) {
          if (got != inputBits(g, s.srcRank, k)) part.wrong++;
        } else if (t.kind != Kind::Float) {
          if (got != expectedInt(g, k)) part.wrong++;
        } else {
          double sumAbs;
          const double exp = expectedFloat(g, k, &sumAbs);
          const double err = std::fabs(decodeFloat(t, got) - exp);
          const double tol = tolScale * sumAbs;
          if (!(err <= tol)) part.wrong++;  // NaN counts as wrong
          else if (tol > 0) part.maxError = std::max(part.maxError, err / tol);
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      total.wrong += part.wrong;
      total.maxError = std::max(total.maxError, part.maxError);
    });
  }
  (void)rank;
  return total;
}

// ------------------------------------------------------------------ host threads
static int gHostWorkers = 0;

void setHostWorkers(int n) { gHostWorkers = std::max(1, n); }

void parallelFor(size_t n, const std::function<void(size_t, size_t)>& fn) {
  int workers = gHostWorkers > 0 ? gHostWorkers : int(std::max(1u, std::thread::hardware_concurrency()));
  const size_t minChunk = 1 << 16;
  workers = int(std::min<size_t>(size_t(workers), (n + minChunk - 1) / minChunk));
  if (workers <= 1) { if (n) fn(0, n); return; }
  std::vector<std::thread> pool;
  const size_t chunk = (n + workers - 1) / workers;
  for (int w = 0; w < workers; w++) {
    size_t b = size_t(w) * chunk, e = std::min(n, b + chunk);
    if (b < e) pool.emplace_back(fn, b, e);
  }
  for (auto& th : pool) th.join();
}

}  // namespace bench
