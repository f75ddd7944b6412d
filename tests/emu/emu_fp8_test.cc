// fp8 reductions end to end on the CPU emulator, in the encoding the
// emulated kernels were built with: AMD's FNUZ formats (e4m3fnuz, e5m2fnuz:
// ncclFloat8e4m3 / e5m2 on MI300 and the AMD targets RCCL converts in
// software; the kernels built with -DUNICCL_EMU_FP8_FNUZ) or OCP's (e4m3fn,
// e5m2: NVIDIA's). AllReduce, ReduceScatter and Reduce with sum, prod, max,
// min, avg (1/n made by the kernels in their encoding) and a PreMulSum op
// on 2 and 3 ranks, every element checked bit for bit against a host model
// of the format written from its definition (decode: ldexp; encode: the
// nearest code by search, ties to the even code, saturating; FNUZ: NaN and
// infinities to 0x80, no negative zero) applied to the kernels' arithmetic
// (each element converted to float, one operation, rounded back).
//
// Inputs are random codes over the whole range (subnormals, the largest
// values so that sums saturate, FNUZ's NaN), so a kernel built with the
// other encoding fails most elements. The reduction order of a ring differs
// by element; on 3 ranks every element therefore has at most two inputs
// that are not the op's identity, so each result is one rounding whatever
// the order. NaN inputs and OCP's -0 stay out of max/min (their result
// depends on the order there) and OCP's NaN and infinities out of every op.
//
//   emu_fp8_test --format=fnuz|ocp   (UNICCL_EMU_DEVICES >= 3; UNICCL_LL_THRESHOLD=1: Simple)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/gpu.h"
#include "emu_runtime.h"
#include "nccl.h"
#include "test_check.h"

using namespace uniccl;

namespace {

int gFailures = 0;
int gChecks = 0;
std::mt19937 gRng(20261202);

// One fp8 format, from its definition.
struct Format {
  const char* name;
  ncclDataType_t type;
  int e, m;
  bool fnuz;
  std::vector<double> value;   // decode(c) for every code

  Format(const char* name_, ncclDataType_t type_, int e_, int m_, bool fnuz_)
      : name(name_), type(type_), e(e_), m(m_), fnuz(fnuz_), value(256) {
    for (unsigned c = 0; c < 256; c++) value[c] = decodeDef(c);
  }
  int bias() const { return fnuz ? 1 << (e - 1) : (1 << (e - 1)) - 1; }
  bool isNaN(unsigned c) const {
    if (fnuz) return c == 0x80;
    if (e == 4) return (c & 0x7f) == 0x7f;                    // e4m3fn: S.1111.111
    return ((c >> 2) & 0x1f) == 0x1f && (c & 3) != 0;         // e5m2: IEEE
  }
  bool isInf(unsigned c) const { return !fnuz && e == 5 && (c & 0x7f) == 0x7c; }
  // Largest finite magnitude's code; the codes 0..maxCode() grow with their value.
  unsigned maxCode() const { return fnuz ? 0x7f : e == 4 ? 0x7e : 0x7b; }
  double decodeDef(unsigned c) const {
    if (isNaN(c)) return std::numeric_limits<double>::quiet_NaN();
    if (isInf(c)) return (c & 0x80) ? -INFINITY : INFINITY;
    const unsigned ef = (c >> m) & ((1u << e) - 1), mf = c & ((1u << m) - 1);
    const double v = ef == 0 ? std::ldexp((double)mf, 1 - bias() - m)
                             : std::ldexp(1.0 + (double)mf / (1 << m), (int)ef - bias());
    return (c & 0x80) ? -v : v;
  }
  double decode(unsigned c) const { return value[c]; }
  // The kernels' conversion: the nearest code, ties to the even code; finite
  // values and (OCP, NVIDIA's satfinite) infinities saturate; FNUZ: NaN and
  // infinities -> 0x80, zero is +0; OCP keeps the sign of zero.
  unsigned encode(double x) const {
    if (std::isnan(x)) return fnuz ? 0x80 : (e == 4 ? 0x7f : 0x7e) | (std::signbit(x) ? 0x80 : 0);
    if (fnuz && std::isinf(x)) return 0x80;
    const double a = std::min(std::fabs(x), value[maxCode()]);
    unsigned hi = 0;   // the first code not below a
    while (value[hi] < a) hi++;
    unsigned best = hi;
    if (hi > 0) {
      const double dl = a - value[hi - 1], dh = value[hi] - a;
      if (dl < dh || (dl == dh && ((hi - 1) & 1) == 0)) best = hi - 1;
    }
    if (fnuz && best == 0) return 0;
    return (std::signbit(x) ? 0x80u : 0u) | best;
  }
  float toF(unsigned c) const { return (float)decode(c); }
};

struct Rank {
  int dev;
  ncclComm_t comm;
  uniccl_stream_t stream;
  uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
};
const size_t kCap = 10 * (3 * 20001 + 64);   // 10 cases of up to 3 x 20001 bytes

void put(Rank& r, uint8_t* dst, const std::vector<uint8_t>& v) {
  NCCL_OK_OR_EXIT(gpu::setDevice(r.dev));
  if (!v.empty()) NCCL_OK_OR_EXIT(gpu::memcpy(dst, v.data(), v.size()));
}
std::vector<uint8_t> get(Rank& r, const uint8_t* src, size_t n) {
  std::vector<uint8_t> v(n);
  NCCL_OK_OR_EXIT(gpu::setDevice(r.dev));
  if (n) NCCL_OK_OR_EXIT(gpu::memcpy(v.data(), src, n));
  return v;
}
void syncAll(std::vector<Rank>& ranks) {
  for (Rank& r : ranks) {
    NCCL_OK_OR_EXIT(gpu::setDevice(r.dev));
    NCCL_OK_OR_EXIT(gpu::streamSynchronize(static_cast<gpu::Stream>(r.stream)));
  }
}

enum Op { kSum, kProd, kMax, kMin, kAvg, kPreMul };
const char* kOpNames[] = {"sum", "prod", "max", "min", "avg", "premulsum"};

// Random inputs of n ranks for `op`: codes over the whole range; on 3+
// ranks each element has a rank holding the op's identity (sum: +0, prod: 1).
std::vector<std::vector<uint8_t>> inputs(const Format& f, Op op, int n, size_t count) {
  std::uniform_int_distribution<int> code(0, 255), who(0, n - 1);
  auto ok = [&](unsigned c) {
    if (!f.fnuz && (f.isNaN(c) || f.isInf(c))) return false;
    if ((op == kMax || op == kMin) && (f.isNaN(c) || (!f.fnuz && c == 0x80))) return false;
    return true;
  };
  std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(count));
  for (size_t i = 0; i < count; i++) {
    const int idle = who(gRng);
    for (int r = 0; r < n; r++) {
      unsigned c;
      do c = (unsigned)code(gRng); while (!ok(c));
      if (n > 2 && r == idle && op != kMax && op != kMin) c = op == kProd ? f.encode(1.0) : 0;
      in[r][i] = (uint8_t)c;
    }
  }
  return in;
}

// The model: element by element, in rank order (one rounding per element
// whatever the order, see the top).
std::vector<uint8_t> model(const Format& f, Op op, const std::vector<std::vector<uint8_t>>& in, size_t off,
                           size_t count, unsigned scalar) {
  const int n = (int)in.size();
  std::vector<uint8_t> out(count);
  for (size_t i = 0; i < count; i++) {
    auto pre = [&](unsigned c) {
      return op == kAvg || op == kPreMul ? f.encode((double)(f.toF(c) * f.toF(scalar))) : c;
    };
    unsigned acc = pre(in[0][off + i]);
    for (int r = 1; r < n; r++) {
      const unsigned b = pre(in[r][off + i]);
      const float x = f.toF(acc), y = f.toF(b);
      switch (op) {
        case kProd: acc = f.encode((double)(x * y)); break;
        case kMax: acc = x < y ? b : acc; break;
        case kMin: acc = y < x ? b : acc; break;
        default: acc = f.encode((double)(x + y)); break;
      }
    }
    out[i] = (uint8_t)acc;
  }
  return out;
}

void compare(const std::string& what, const Format& f, const std::vector<uint8_t>& got,
             const std::vector<uint8_t>& want) {
  gChecks++;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.size(); i++)
    if (got[i] != want[i] && bad++ == 0) first = i;
  if (bad) {
    gFailures++;
    fprintf(stderr, "FAIL %s: %zu of %zu wrong, first at %zu: got 0x%02x (%g) want 0x%02x (%g)\n", what.c_str(),
            bad, want.size(), first, got[first], f.decode(got[first]), want[first], f.decode(want[first]));
  }
}

struct Case {
  const char* coll;
  Op op;
};
// Every case of one format and count in one group per rank (one kernel
// launch for all of them: consecutive collectives of one datatype share a
// launch), each in its own part of the buffers.
void runCases(std::vector<Rank>& ranks, const Format& f, const std::vector<Case>& cases, size_t count) {
  const int n = (int)ranks.size();
  const int root = n - 1;
  const size_t stride = (count * n + 63) / 64 * 64;   // bytes of each case's part (ReduceScatter's input)
  struct Run {
    std::vector<std::vector<uint8_t>> in;
    unsigned scalar;
    std::vector<ncclRedOp_t> ops;
  };
  std::vector<Run> runs(cases.size());
  std::vector<std::vector<uint8_t>> send(n, std::vector<uint8_t>(stride * cases.size())),
      recv(n, std::vector<uint8_t>(stride * cases.size(), 0x5a));
  for (size_t k = 0; k < cases.size(); k++) {
    const Case& c = cases[k];
    Run& u = runs[k];
    const bool rs = !strcmp(c.coll, "ReduceScatter");
    u.in = inputs(f, c.op, n, rs ? count * n : count);
    // avg: 1/n in the format, as the kernels make it; PreMulSum: a user
    // scalar of -0.75 in the format's bits (host immediate).
    u.scalar = c.op == kAvg ? f.encode((double)(float)(1.0 / n)) : f.encode(-0.75);
    u.ops.assign(n, (ncclRedOp_t)(c.op == kAvg ? (int)ncclAvg : (int)c.op));
    for (int r = 0; r < n; r++) {
      std::copy(u.in[r].begin(), u.in[r].end(), send[r].begin() + k * stride);
      if (c.op == kPreMul) {
        uint8_t sc = (uint8_t)u.scalar;
        NCCL_OK_OR_EXIT(ncclRedOpCreatePreMulSum(&u.ops[r], &sc, f.type, ncclScalarHostImmediate, ranks[r].comm));
      }
    }
  }
  for (int r = 0; r < n; r++) {
    put(ranks[r], ranks[r].send, send[r]);
    put(ranks[r], ranks[r].recv, recv[r]);
  }
  NCCL_OK_OR_EXIT(ncclGroupStart());
  for (size_t k = 0; k < cases.size(); k++) {
    for (int r = 0; r < n; r++) {
      Rank& R = ranks[r];
      const uint8_t* s = R.send + k * stride;
      uint8_t* d = R.recv + k * stride;
      const ncclRedOp_t op = runs[k].ops[r];
      if (!strcmp(cases[k].coll, "ReduceScatter")) NCCL_OK_OR_EXIT(ncclReduceScatter(s, d, count, f.type, op, R.comm,
                                                                                     R.stream));
      else if (!strcmp(cases[k].coll, "Reduce")) NCCL_OK_OR_EXIT(ncclReduce(s, d, count, f.type, op, root, R.comm,
                                                                            R.stream));
      else NCCL_OK_OR_EXIT(ncclAllReduce(s, d, count, f.type, op, R.comm, R.stream));
    }
  }
  NCCL_OK_OR_EXIT(ncclGroupEnd());
  syncAll(ranks);
  for (int r = 0; r < n; r++) {
    const std::vector<uint8_t> got = get(ranks[r], ranks[r].recv, stride * cases.size());
    for (size_t k = 0; k < cases.size(); k++) {
      const Case& c = cases[k];
      const bool rs = !strcmp(c.coll, "ReduceScatter");
      if (!strcmp(c.coll, "Reduce") && r != root) continue;
      const std::string name = std::string(f.name) + "/" + c.coll + "/" + kOpNames[c.op] + "/n" + std::to_string(n) +
                               "/c" + std::to_string(count) + "/rank" + std::to_string(r);
      compare(name, f, std::vector<uint8_t>(got.begin() + k * stride, got.begin() + k * stride + count),
              model(f, c.op, runs[k].in, rs ? r * count : 0, count, runs[k].scalar));
      if (c.op == kPreMul) NCCL_OK_OR_EXIT(ncclRedOpDestroy(runs[k].ops[r], ranks[r].comm));
    }
  }
}

void runRanks(int n, bool fnuz) {
  std::vector<int> devs(n);
  for (int i = 0; i < n; i++) devs[i] = i;
  std::vector<ncclComm_t> comms(n);
  NCCL_OK_OR_EXIT(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<Rank> ranks(n);
  for (int r = 0; r < n; r++) {
    Rank& R = ranks[r];
    R.dev = r;
    R.comm = comms[r];
    NCCL_OK_OR_EXIT(gpu::setDevice(r));
    gpu::Stream st = nullptr;
    NCCL_OK_OR_EXIT(gpu::streamCreate(&st));
    R.stream = static_cast<uniccl_stream_t>(st);
    void* p = nullptr;
    NCCL_OK_OR_EXIT(gpu::deviceAlloc(&p, kCap));
    R.send = static_cast<uint8_t*>(p);
    NCCL_OK_OR_EXIT(gpu::deviceAlloc(&p, kCap));
    R.recv = static_cast<uint8_t*>(p);
  }
  const Format formats[] = {Format(fnuz ? "e4m3fnuz" : "e4m3fn", ncclFloat8e4m3, 4, 3, fnuz),
                            Format(fnuz ? "e5m2fnuz" : "e5m2", ncclFloat8e5m2, 5, 2, fnuz)};
  for (const Format& f : formats) {
    const std::vector<Case> cases = {{"AllReduce", kSum},     {"AllReduce", kProd}, {"AllReduce", kMax},
                                     {"AllReduce", kMin},     {"AllReduce", kAvg},  {"AllReduce", kPreMul},
                                     {"ReduceScatter", kSum}, {"ReduceScatter", kAvg}, {"Reduce", kSum},
                                     {"Reduce", kMax}};
    // 7: less than one 16-byte pack; 4099 and 20001: several steps of both
    // protocols (LL up to 1 MiB on P2P: meson runs the test again with
    // UNICCL_LL_THRESHOLD=1 for Simple).
    for (size_t count : {(size_t)7, (size_t)4099, (size_t)20001}) runCases(ranks, f, cases, count);
  }
  for (Rank& R : ranks) {
    NCCL_OK_OR_EXIT(gpu::setDevice(R.dev));
    NCCL_OK_OR_EXIT(ncclCommDestroy(R.comm));
    (void)gpu::deviceFree(R.send);
    (void)gpu::deviceFree(R.recv);
    (void)gpu::streamDestroy(static_cast<gpu::Stream>(R.stream));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int fnuz = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--format=fnuz")) fnuz = 1;
    if (!strcmp(argv[i], "--format=ocp")) fnuz = 0;
  }
  if (fnuz < 0) {
    fprintf(stderr, "usage: emu_fp8_test --format=fnuz|ocp (the encoding the emulated kernels were built with)\n");
    return 2;
  }
  emu::installCpuKernelRunner();
  int ndev = 0;
  NCCL_OK_OR_EXIT(gpu::getDeviceCount(&ndev));
  if (ndev < 3) {
    fprintf(stderr, "emu_fp8_test: %d emulated devices, 3 needed (set UNICCL_EMU_DEVICES=3)\n", ndev);
    return 2;
  }
  for (int n : {2, 3}) runRanks(n, fnuz == 1);
  printf("emu_fp8_test (%s): %d checks, %d failures\n", fnuz ? "FNUZ" : "OCP", gChecks, gFailures);
  return gFailures == 0 && gChecks > 0 ? 0 : 1;
}
