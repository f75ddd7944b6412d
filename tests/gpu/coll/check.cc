#include "check.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <type_traits>

namespace colltest {

void Report::line(const char* fmt, ...) {
  if (printed++ >= limit) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  fprintf(stderr, "  FAIL %s: %s\n", prefix.c_str(), buf);
}

double tolerance(ncclDataType_t dt, int nranks) {
  const TypeInfo& t = typeInfo(dt);
  if (t.isInt) return 0;
  // float/double round once per rank; the narrow formats reduce in float and
  // round once per hop, which the (looser) base tolerance already allows for
  // two ranks.
  if (dt == ncclFloat32 || dt == ncclFloat64) return t.rtol * nranks;
  return t.rtol * std::max(1.0, nranks / 2.0);
}

std::string toleranceSummary() {
  return "integers, max, min and data movement: exact (bitwise); sum/avg/premulsum/prod: |got-ref| <= rtol*sum|terms| + atol "
         "with rtol float 1e-5*n, double 1e-12*n, half 1e-2*h, bf16 2e-2*h, f8e4m3 0.13*h, f8e5m2 0.26*h "
         "(n = ranks, h = max(1, n/2)), atol = about one subnormal step of the type";
}

namespace {

template <int DT> struct T;
template <> struct T<ncclInt8> { using S = int8_t; };
template <> struct T<ncclUint8> { using S = uint8_t; };
template <> struct T<ncclInt32> { using S = int32_t; };
template <> struct T<ncclUint32> { using S = uint32_t; };
template <> struct T<ncclInt64> { using S = int64_t; };
template <> struct T<ncclUint64> { using S = uint64_t; };
template <> struct T<ncclFloat32> { using S = float; };
template <> struct T<ncclFloat64> { using S = double; };
template <> struct T<ncclFloat16> { using S = uint16_t; };
template <> struct T<ncclBfloat16> { using S = uint16_t; };
template <> struct T<ncclFloat8e4m3> { using S = uint8_t; };
template <> struct T<ncclFloat8e5m2> { using S = uint8_t; };

template <int DT> constexpr bool kIsInt = DT <= ncclUint64;

template <int DT> double toD(typename T<DT>::S v) {
  if constexpr (DT == ncclFloat16) return halfToDouble(v);
  else if constexpr (DT == ncclBfloat16) return bf16ToDouble(v);
  else if constexpr (DT == ncclFloat8e4m3) return e4m3ToDouble(v);
  else if constexpr (DT == ncclFloat8e5m2) return e5m2ToDouble(v);
  else return (double)v;
}

const uint8_t* poisonBlock() {
  static uint8_t block[1 << 16];
  static bool filled = (memset(block, kPoison, sizeof(block)), true);
  (void)filled;
  return block;
}

bool isPoison(const uint8_t* p, size_t bytes) {
  const uint8_t* block = poisonBlock();
  while (bytes > 0) {
    size_t n = std::min(bytes, (size_t)(1 << 16));
    if (memcmp(p, block, n) != 0) return false;
    p += n;
    bytes -= n;
  }
  return true;
}

// The element-typed part of the check.
template <int DT>
class Checker {
  using S = typename T<DT>::S;

 public:
  Checker(const OpSpec& op, int n, const std::vector<const uint8_t*>& inputs, const char* bufName, Report& rep)
      : op_(op), n_(n), name_(bufName), rep_(rep) {
    for (const uint8_t* p : inputs) in_.push_back(reinterpret_cast<const S*>(p));
    tol_ = tolerance((ncclDataType_t)DT, n);
    atol_ = typeInfo((ncclDataType_t)DT).atol;
    for (int q = 0; q < n; q++) {
      S s;
      encodeValue((ncclDataType_t)DT, preMulScalar((ncclDataType_t)DT, q), &s);
      scalar_.push_back(s);
      scalarD_.push_back(toD<DT>(s));
    }
  }

  size_t poison(const S* got, size_t b, size_t e) {
    if (isPoison(reinterpret_cast<const uint8_t*>(got + b), (e - b) * sizeof(S))) return 0;
    size_t bad = 0;
    for (size_t i = b; i < e; i++) {
      if (isPoison(reinterpret_cast<const uint8_t*>(got + i), sizeof(S))) continue;
      if (bad++ == 0) rep_.line("%s[%zu] = %g was written but must stay untouched (poison)", name_, i, toD<DT>(got[i]));
    }
    return bad;
  }

  size_t copy(const S* got, const Segment& s) {
    const S* src = in_[s.src] + s.srcOff;
    if (memcmp(got + s.begin, src, (s.end - s.begin) * sizeof(S)) == 0) return 0;
    size_t bad = 0;
    for (size_t i = s.begin; i < s.end; i++) {
      const S& want = src[i - s.begin];
      if (memcmp(&got[i], &want, sizeof(S)) == 0) continue;
      if (bad++ < 2)
        rep_.line("%s[%zu] = %.9g, expected %.9g (rank %d's input element %zu)", name_, i, toD<DT>(got[i]),
                  toD<DT>(want), s.src, s.srcOff + (i - s.begin));
    }
    if (bad > 2) rep_.line("%s: %zu of %zu copied elements wrong", name_, bad, s.end - s.begin);
    return bad;
  }

  size_t reduce(const S* got, const Segment& s) {
    size_t bad = 0;
    for (size_t i = s.begin; i < s.end; i++) {
      size_t j = s.srcOff + (i - s.begin);
      bool ok;
      double want, bound = 0;
      if constexpr (kIsInt<DT>) {
        S w = reduceInt(j);
        ok = got[i] == w;
        want = (double)w;
      } else if (op_.op == Op::Max || op_.op == Op::Min) {
        S w = extreme(j);  // exactly one of the inputs
        ok = memcmp(&got[i], &w, sizeof(S)) == 0;
        want = toD<DT>(w);
      } else {
        double mag;
        want = reduceFloat(j, &mag);
        bound = tol_ * mag + atol_;
        ok = std::fabs(toD<DT>(got[i]) - want) <= bound;  // false for NaN
      }
      if (!ok && bad++ < 2)
        rep_.line("%s[%zu] = %.9g, expected %.9g (%s over %d ranks, tolerance %.3g)", name_, i, toD<DT>(got[i]), want,
                  opName(op_.op), n_, bound);
    }
    if (bad > 2) rep_.line("%s: %zu of %zu reduced elements wrong", name_, bad, s.end - s.begin);
    return bad;
  }

 private:
  // Integer reductions wrap exactly like the GPU's (unsigned arithmetic).
  S reduceInt(size_t j) const {
    using U = std::make_unsigned_t<S>;
    U acc = op_.op == Op::Prod ? 1 : 0;
    S ext = in_[0][j];
    for (int q = 0; q < n_; q++) {
      S x = in_[q][j];
      switch (op_.op) {
        case Op::Prod: acc = (U)(acc * (U)x); break;
        case Op::Max: ext = x > ext ? x : ext; break;
        case Op::Min: ext = x < ext ? x : ext; break;
        case Op::PreMulHost: case Op::PreMulDevice: acc = (U)(acc + (U)((U)x * (U)scalar_[q])); break;
        default: acc = (U)(acc + (U)x); break;
      }
    }
    if (op_.op == Op::Max || op_.op == Op::Min) return ext;
    if (op_.op == Op::Avg) return (S)((S)acc / (S)n_);
    return (S)acc;
  }

  S extreme(size_t j) const {
    S best = in_[0][j];
    double bv = toD<DT>(best);
    for (int q = 1; q < n_; q++) {
      double v = toD<DT>(in_[q][j]);
      if (op_.op == Op::Max ? v > bv : v < bv) {
        bv = v;
        best = in_[q][j];
      }
    }
    return best;
  }

  double reduceFloat(size_t j, double* mag) const {
    double acc = op_.op == Op::Prod ? 1.0 : 0.0, m = 0;
    for (int q = 0; q < n_; q++) {
      double x = toD<DT>(in_[q][j]);
      switch (op_.op) {
        case Op::Prod: acc *= x; break;
        case Op::PreMulHost: case Op::PreMulDevice: acc += x * scalarD_[q]; m += std::fabs(x * scalarD_[q]); break;
        default: acc += x; m += std::fabs(x); break;
      }
    }
    if (op_.op == Op::Avg) {
      acc /= n_;
      m /= n_;
    }
    *mag = op_.op == Op::Prod ? std::fabs(acc) : m;
    return acc;
  }

  const OpSpec& op_;
  int n_;
  const char* name_;
  Report& rep_;
  std::vector<const S*> in_;
  std::vector<S> scalar_;
  std::vector<double> scalarD_;
  double tol_ = 0, atol_ = 0;
};

template <int DT>
size_t checkTyped(const OpSpec& op, int n, const Buf& b, const uint8_t* span, const std::vector<Segment>& segs,
                  const std::vector<const uint8_t*>& inputs, const char* name, Report& rep) {
  using S = typename T<DT>::S;
  Checker<DT> c(op, n, inputs, name, rep);
  size_t bad = 0;
  const size_t head = kGuard + b.shift, body = b.elems * sizeof(S);
  if (!isPoison(span, head)) {
    bad++;
    rep.line("%s: guard bytes before the buffer were overwritten", name);
  }
  if (!isPoison(span + head + body, kGuard)) {
    bad++;
    rep.line("%s: guard bytes after the buffer (element %zu on) were overwritten", name, b.elems);
  }
  // The data may sit at any byte offset (misaligned placements): work on an
  // aligned copy only when it has to.
  const uint8_t* data = span + head;
  std::vector<S> aligned;
  if (reinterpret_cast<uintptr_t>(data) % alignof(S) != 0) {
    aligned.resize(b.elems);
    memcpy(aligned.data(), data, body);
    data = reinterpret_cast<const uint8_t*>(aligned.data());
  }
  const S* got = reinterpret_cast<const S*>(data);
  std::vector<Segment> sorted = segs;
  std::sort(sorted.begin(), sorted.end(), [](const Segment& x, const Segment& y) { return x.begin < y.begin; });
  size_t at = 0;
  for (const Segment& s : sorted) {
    if (s.begin >= s.end) continue;
    if (s.begin > at) bad += c.poison(got, at, s.begin);
    bad += s.kind == Segment::Copy ? c.copy(got, s) : s.kind == Segment::Reduce ? c.reduce(got, s) : c.poison(got, s.begin, s.end);
    at = s.end;
  }
  if (at < b.elems) bad += c.poison(got, at, b.elems);
  return bad;
}

}  // namespace

size_t checkBuffer(const OpSpec& op, int nranks, const Buf& b, const uint8_t* span, const std::vector<Segment>& segs,
                   const std::vector<const uint8_t*>& inputs, const char* bufName, Report& rep) {
  switch (op.dt) {
    case ncclInt8: return checkTyped<ncclInt8>(op, nranks, b, span, segs, inputs, bufName, rep);
    case ncclUint8: return checkTyped<ncclUint8>(op, nranks, b, span, segs, inputs, bufName, rep);
    case ncclInt32: return checkTyped<ncclInt32>(op, nranks, b, span, segs, inputs, bufName, rep);
    case ncclUint32: return checkTyped<ncclUint32>(op, nranks, b, span, segs, inputs, bufName, rep);
    case ncclInt64: return checkTyped<ncclInt64>(op, nranks, b, span, segs, inputs, bufName, rep);
    case ncclUint64: return checkTyped<ncclUint64>(op, nranks, b, span, segs, inputs, bufName, rep);
    case ncclFloat16: return checkTyped<ncclFloat16>(op, nranks, b, span, segs, inputs, bufName, rep);
    case ncclFloat32: return checkTyped<ncclFloat32>(op, nranks, b, span, segs, inputs, bufName, rep);
    case ncclFloat64: return checkTyped<ncclFloat64>(op, nranks, b, span, segs, inputs, bufName, rep);
    case ncclBfloat16: return checkTyped<ncclBfloat16>(op, nranks, b, span, segs, inputs, bufName, rep);
    case ncclFloat8e4m3: return checkTyped<ncclFloat8e4m3>(op, nranks, b, span, segs, inputs, bufName, rep);
    case ncclFloat8e5m2: return checkTyped<ncclFloat8e5m2>(op, nranks, b, span, segs, inputs, bufName, rep);
    default: rep.line("unknown datatype %d", (int)op.dt); return 1;
  }
}

}  // namespace colltest
