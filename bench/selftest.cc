// `<tool> --self-test`: host-only checks of everything in the benchmarks that
// does not need a GPU: size parsing and sweeps, busbw factors, the datatype
// codecs, and the checker against a naive host model of every collective
// (rounding each reduction step to the datatype, as a GPU would), including
// that a single corrupted element is caught. Exit code 0 = all passed.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common.h"

namespace bench {
namespace {

int gFailures = 0;

#define EXPECT(cond, ...)                                        \
  do {                                                           \
    if (!(cond)) {                                               \
      gFailures++;                                               \
      fprintf(stderr, "self-test FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                              \
      fputc('\n', stderr);                                       \
    }                                                            \
  } while (0)

void testSizes() {
  size_t v = 0;
  EXPECT(parseSize("8", &v) && v == 8, "8 -> %zu", v);
  EXPECT(parseSize("64K", &v) && v == 65536, "64K -> %zu", v);
  EXPECT(parseSize("1m", &v) && v == 1u << 20, "1m -> %zu", v);
  EXPECT(parseSize("1G", &v) && v == 1u << 30, "1G -> %zu", v);
  EXPECT(parseSize("2GB", &v) && v == size_t(2) << 30, "2GB -> %zu", v);
  EXPECT(!parseSize("", &v) && !parseSize("1X", &v) && !parseSize("-1", &v) && !parseSize("K", &v),
         "garbage accepted");
  Args a;
  a.minBytes = 8; a.maxBytes = 64; a.stepFactor = 2;
  EXPECT(sweepSizes(a) == (std::vector<size_t>{8, 16, 32, 64}), "factor sweep");
  a.minBytes = 1 << 20; a.maxBytes = 3 << 20; a.stepFactor = 1; a.stepBytes = 1 << 20;
  EXPECT(sweepSizes(a).size() == 3, "step sweep");
  a.stepBytes = 0;
  EXPECT(sweepSizes(a).size() == 1, "zero step must not loop");

  const char* argv[] = {"x", "-b", "8", "-e", "1G", "-f", "2", "-g", "8", "-d", "all", "-o", "all",
                        "-G", "10", "-C", "1", "-r", "all", "-a", "2", "-J", "out.json"};
  Args p;
  bool self = true;
  EXPECT(parseArgs(int(sizeof argv / sizeof *argv), const_cast<char**>(argv), kAllReduce, &p, &self), "parseArgs");
  EXPECT(!self && p.minBytes == 8 && p.maxBytes == size_t(1) << 30 && p.stepFactor == 2 && p.nGpus == 8 &&
             p.types.size() == allTypes().size() && p.ops.size() == 6 && p.graphLaunches == 10 &&
             p.reportCpu == 1 && p.root == -1 && p.average == 2 && p.jsonPath == "out.json",
         "parsed values");
  const char* bad[] = {"x", "-b", "1G", "-e", "8"};
  fprintf(stderr, "(an error message about -b/-e is expected here)\n");
  EXPECT(!parseArgs(5, const_cast<char**>(bad), kAllReduce, &p, &self), "min > max accepted");
  const char* noop[] = {"x", "-o", "max"};
  p = Args();
  EXPECT(parseArgs(3, const_cast<char**>(noop), kAllGather, &p, &self) && p.ops.size() == 1 && p.ops[0] == Op::None,
         "collectives without an op run with none");
}

void testBusBw() {
  struct { const CollSpec* c; double f8; } want[] = {
      {&kAllReduce, 1.75}, {&kAllGather, 0.875}, {&kReduceScatter, 0.875}, {&kBroadcast, 1},
      {&kReduce, 1}, {&kAlltoAll, 0.875}, {&kSendRecv, 1}, {&kGather, 0.875}, {&kScatter, 0.875}};
  for (auto& w : want) EXPECT(std::fabs(w.c->busbwFactor(8) - w.f8) < 1e-12, "%s busbw factor", w.c->name);
  CollSizes s;
  kAllGather.sizes(1000, 4, 8, &s);  // 250 elements -> 31 per rank
  EXPECT(s.paramCount == 31 && s.recvCount == 248 && s.totalBytes == 992, "allgather sizes");
  kReduceScatter.sizes(1 << 20, 2, 8, &s);
  EXPECT(s.recvCount == 65536 && s.sendCount == 524288 && s.recvInplaceStride == 65536, "reducescatter sizes");
}

void testCodecs() {
  for (const TypeInfo& t : allTypes()) {
    if (t.kind != Kind::Float) continue;
    EXPECT(decodeFloat(t, encodeFloat(t, 1.0)) == 1.0, "%s 1.0", t.name);
    EXPECT(decodeFloat(t, encodeFloat(t, -2.5)) == -2.5, "%s -2.5", t.name);
    if (t.bytes > 2) continue;
    for (uint64_t b = 0; b < (uint64_t(1) << (8 * t.bytes)); b++) {  // every pattern round-trips
      double v = decodeFloat(t, b);
      if (std::isnan(v)) continue;
      EXPECT(encodeFloat(t, v) == b, "%s bits 0x%llx -> %g", t.name, (unsigned long long)b, v);
    }
  }
  EXPECT(decodeFloat(*findType("half"), 0x7bff) == 65504, "half max");
  EXPECT(decodeFloat(*findType("bfloat16"), 0x3f80) == 1, "bf16 one");
  if (const TypeInfo* e4 = findType("f8e4m3")) {
    EXPECT(decodeFloat(*e4, 0x7e) == 448 && std::isnan(decodeFloat(*e4, 0x7f)), "e4m3 max/nan");
    EXPECT(encodeFloat(*e4, 1000) == 0x7e, "e4m3 saturates");
  }
  if (const TypeInfo* e5 = findType("f8e5m2")) EXPECT(decodeFloat(*e5, 0x7b) == 57344, "e5m2 max");
}

// ------------------------------------------------------------------ host model
uint64_t typeMask(const TypeInfo& t) { return t.bytes == 8 ? ~0ull : (1ull << (8 * t.bytes)) - 1; }
int64_t sext(uint64_t v, int bytes) { int s = 64 - 8 * bytes; return int64_t(v << s) >> s; }

// One reduction step as the GPU does it in the datatype.
uint64_t reduceStep(const TypeInfo& t, Op op, uint64_t acc, uint64_t x) {
  if (t.kind != Kind::Float) {
    const bool lt = t.kind == Kind::Signed ? sext(x, t.bytes) < sext(acc, t.bytes) : x < acc;
    switch (op) {
      case Op::Prod: return (acc * x) & typeMask(t);
      case Op::Max: return lt ? acc : x;
      case Op::Min: return lt ? x : acc;
      default: return (acc + x) & typeMask(t);
    }
  }
  const double a = decodeFloat(t, acc), b = decodeFloat(t, x);
  switch (op) {
    case Op::Prod: return encodeFloat(t, a * b);
    case Op::Max: return a >= b ? acc : x;
    case Op::Min: return a <= b ? acc : x;
    default: return encodeFloat(t, a + b);
  }
}

// Reduction over ranks of element k, rounding every step (NCCL's float Avg is
// a premultiply by 1/n; its integer Avg divides the sum).
uint64_t modelReduce(const DataGen& g, size_t k) {
  const TypeInfo& t = *g.t;
  auto term = [&](int r) {
    uint64_t x = inputBits(g, r, k);
    if (g.op == Op::PreMulSum) {
      uint64_t s = preMulScalarBits(t, r);
      x = t.kind == Kind::Float ? encodeFloat(t, decodeFloat(t, x) * decodeFloat(t, s)) : (x * s) & typeMask(t);
    } else if (g.op == Op::Avg && t.kind == Kind::Float) {
      x = encodeFloat(t, decodeFloat(t, x) * decodeFloat(t, encodeFloat(t, 1.0 / g.nranks)));
    }
    return x;
  };
  uint64_t acc = term(0);
  for (int r = 1; r < g.nranks; r++) acc = reduceStep(t, g.op, acc, term(r));
  if (g.op == Op::Avg && t.kind != Kind::Float) acc = acc / uint64_t(g.nranks);
  return acc;
}

void store(std::vector<char>& buf, const TypeInfo& t, size_t i, uint64_t v) { memcpy(&buf[i * t.bytes], &v, t.bytes); }
uint64_t load(const std::vector<char>& buf, const TypeInfo& t, size_t i) {
  uint64_t v = 0;
  memcpy(&v, &buf[i * t.bytes], t.bytes);
  return v;
}

// The output of `rank` as nccl.h describes each collective (written
// independently of the CollSpec segments on purpose); empty when unused.
std::vector<char> model(const CollSpec* c, const DataGen& g, int rank, int root, const CollSizes& s) {
  const TypeInfo& t = *g.t;
  const int n = g.nranks;
  std::vector<char> out(s.recvCount * t.bytes);
  auto in = [&](int r, size_t k) { return inputBits(g, r, k); };
  for (size_t j = 0; j < s.recvCount; j++) {
    uint64_t v;
    if (c == &kAllReduce) v = modelReduce(g, j);
    else if (c == &kReduceScatter) v = modelReduce(g, rank * s.recvCount + j);
    else if (c == &kReduce) { if (rank != root) return {}; v = modelReduce(g, j); }
    else if (c == &kAllGather) v = in(int(j / s.sendCount), j % s.sendCount);
    else if (c == &kBroadcast) v = in(root, j);
    else if (c == &kAlltoAll) v = in(int(j / s.paramCount), rank * s.paramCount + j % s.paramCount);
    else if (c == &kSendRecv) v = in((rank + n - 1) % n, j);
    else if (c == &kGather) { if (rank != root) return {}; v = in(int(j / s.sendCount), j % s.sendCount); }
    else v = in(root, rank * s.recvCount + j);  // Scatter
    store(out, t, j, v);
  }
  if ((c == &kReduce || c == &kGather) && rank != root) return {};
  return out;
}

void testChecker() {
  const int ranks[] = {1, 2, 3, 4, 8};
  const size_t bytes[] = {0, 24, 1000, 3 * 4096 + 8};
  long long cases = 0;
  for (const CollSpec* c : allColls()) {
    std::vector<Op> ops{Op::None};
    if (c->hasOp) parseOp("all", &ops);
    for (int n : ranks) {
      for (const TypeInfo& t : allTypes()) {
        for (Op op : ops) {
          for (size_t b : bytes) {
            // Only rooted collectives' outputs depend on the root.
            const std::vector<int> roots = c->hasRoot && n > 1 ? std::vector<int>{0, n - 1} : std::vector<int>{0};
            for (int root : roots) {
              CollSizes s;
              c->sizes(b, t.bytes, n, &s);
              DataGen g{&t, op, n, 0x1234 + b * 7 + uint64_t(n)};
              for (int rank = 0; rank < n; rank++) {
                Expectation e = c->expect(rank, n, root, s);
                std::vector<char> out = model(c, g, rank, root, s);
                const bool unused = (c == &kReduce || c == &kGather) && rank != root;
                EXPECT(e.outputUnused == unused && (unused || e.segments.size() > 0),
                       "%s n=%d rank %d: used/unused output disagree", c->name, n, rank);
                if (unused) continue;
                cases++;
                CheckResult r = checkOutput(g, rank, e, out.data());
                EXPECT(r.wrong == 0, "%s %s %s n=%d bytes=%zu rank=%d root=%d: %zu wrong (max err %.3g of tol)",
                       c->name, t.name, opName(op), n, b, rank, root, r.wrong, r.maxError);
                if (s.recvCount == 0) continue;
                // A flipped top exponent/value bit must be caught.
                const size_t k = s.recvCount / 2;
                store(out, t, k, load(out, t, k) ^ (uint64_t(1) << (8 * t.bytes - 2)));
                EXPECT(checkOutput(g, rank, e, out.data()).wrong == 1, "%s %s %s n=%d: corruption not caught",
                       c->name, t.name, opName(op), n);
              }
            }
          }
        }
      }
    }
  }
  EXPECT(cases > 1000, "only %lld checker cases ran", cases);

  // Inputs are pseudo-random, never constant, and change with the seed.
  const TypeInfo& f = *findType("float");
  DataGen a{&f, Op::Sum, 8, 1}, b{&f, Op::Sum, 8, 2};
  size_t same = 0, distinct = 0;
  for (size_t i = 0; i < 1000; i++) {
    same += inputBits(a, 0, i) == inputBits(b, 0, i);
    distinct += inputBits(a, 0, i) != inputBits(a, 0, i + 1);
  }
  EXPECT(same < 10 && distinct > 990, "data not random enough: same %zu distinct %zu", same, distinct);
}

void testTable() {
  Row r{};
  r.bytes = 1048576; r.count = 262144; r.type = "float"; r.redop = "sum"; r.root = -1;
  r.oop = {true, 12.5, 83.89, 146.8, 0, 0};
  r.ip = {true, 12.0, 87.38, 152.9, 0, 3};
  const std::string line = formatRow(r, false);
  EXPECT(line == "     1048576        262144     float     sum      -1    12.50   83.89  146.80       0    12.00   87.38  152.90       3",
         "row '%s'", line.c_str());
  const std::string header = tableHeader(false);
  const size_t l2 = header.find('\n') + 1, l3 = header.find('\n', l2) + 1;
  EXPECT(header.find('\n', l2) - l2 == line.size(), "header width %zu vs row %zu", header.find('\n', l2) - l2, line.size());
  EXPECT(header.compare(l2, 12, "#       size") == 0 && l3 > l2, "header '%s'", header.c_str());
  r.ip.valid = false;
  r.oop.wrong = -1;
  const std::string na = formatRow(r, true);
  size_t fields = 0;
  for (size_t i = 0; i < na.size(); i++) fields += na[i] != ' ' && (i == 0 || na[i - 1] == ' ');
  EXPECT(fields == 15 && na.find("N/A") != std::string::npos, "-C row '%s'", na.c_str());
  const std::string json = rowJson(kAllReduce, r, 8, 0);
  EXPECT(json.find("\"in_place\": null") != std::string::npos && json.find("\"busbw_gbps\": 146.8") != std::string::npos,
         "json '%s'", json.c_str());
}

}  // namespace

int selfTest() {
  testSizes();
  testBusBw();
  testCodecs();
  testChecker();
  testTable();
  if (gFailures) {
    fprintf(stderr, "self-test: %d failure(s)\n", gFailures);
    return 1;
  }
  printf("self-test: OK\n");
  return 0;
}

}  // namespace bench
