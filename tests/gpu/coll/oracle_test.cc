// Host-only check of coll_test's oracle (suite 'unit', no GPU): every case of
// the default list is "run" by a naive host model of each collective that
// reduces like uniccl (narrow floats in float, rounded once per hop), and the
// checker must accept the result; then single corrupted elements, guard
// bytes and writes to buffers that must stay untouched must be caught. A
// false failure here would otherwise surface on a GPU as a library bug.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cases.h"
#include "check.h"
#include "numerics.h"

using namespace colltest;

// memmove that accepts empty ranges (their data() may be null).
static void mv(void* d, const void* s, size_t n) {
  if (n) memmove(d, s, n);
}

namespace {

struct Sim {
  const Case& c;
  int n;
  CaseLayout L;
  std::vector<std::vector<uint8_t>> arena;                 // [rank]
  std::vector<std::vector<std::vector<uint8_t>>> inputs;   // [op][rank]

  Sim(const Case& cs, int nranks) : c(cs), n(nranks), L(layoutCase(cs, nranks)) {
    arena.assign(n, std::vector<uint8_t>(L.bytes, kPoison));
    inputs.resize(c.ops.size(), std::vector<std::vector<uint8_t>>(n));
    for (size_t k = 0; k < c.ops.size(); k++)
      for (int q = 0; q < n; q++) {
        const OpSpec& op = c.ops[k];
        size_t elems = L.ops[k].sendElems;
        inputs[k][q].resize(elems * esz(k));
        generate(op.dt, rangeFor(op.coll, op.op), mix64(c.seed ^ mix64(k * 1000003u + (uint64_t)q)),
                 inputs[k][q].data(), elems);
        if (elems) memcpy(send(k, q), inputs[k][q].data(), elems * esz(k));
      }
  }
  size_t esz(size_t k) const { return typeInfo(c.ops[k].dt).size; }
  uint8_t* send(size_t k, int q) {
    const OpLayout& l = L.ops[k];
    return arena[q].data() + l.send.dataOff() + (l.inPlace ? inPlaceSendOff(c.ops[k], q) : 0) * esz(k);
  }
  uint8_t* recv(size_t k, int q) {
    const OpLayout& l = L.ops[k];
    return arena[q].data() + l.recv.dataOff() + (l.inPlace ? inPlaceRecvOff(c.ops[k], q) : 0) * esz(k);
  }

  // Reduces element i of every rank's `src` block like the GPU would.
  void reduceElem(size_t k, const std::vector<const uint8_t*>& src, size_t i, uint8_t* dst) {
    const OpSpec& op = c.ops[k];
    const TypeInfo& t = typeInfo(op.dt);
    const size_t sz = t.size;
    if (t.isInt) {
      auto get = [&](const uint8_t* p) {
        uint64_t v = 0;
        memcpy(&v, p + i * sz, sz);
        if (t.isSigned && sz < 8 && (v >> (8 * sz - 1))) v |= ~0ull << (8 * sz);
        return v;
      };
      auto trunc = [&](uint64_t v) {
        if (sz < 8) {
          v &= (1ull << (8 * sz)) - 1;
          if (t.isSigned && (v >> (8 * sz - 1))) v |= ~0ull << (8 * sz);
        }
        return v;
      };
      uint64_t acc = get(src[0]);
      auto scaled = [&](int q) {
        uint64_t s = 0;
        encodeValue(op.dt, preMulScalar(op.dt, q), &s);
        if (t.isSigned && sz < 8 && (s >> (8 * sz - 1))) s |= ~0ull << (8 * sz);
        return trunc(get(src[q]) * s);
      };
      if (op.op == Op::PreMulHost || op.op == Op::PreMulDevice) acc = scaled(0);
      for (int q = 1; q < n; q++) {
        uint64_t x = get(src[q]);
        switch (op.op) {
          case Op::Prod: acc = trunc(acc * x); break;
          case Op::Max: acc = t.isSigned ? ((int64_t)x > (int64_t)acc ? x : acc) : (x > acc ? x : acc); break;
          case Op::Min: acc = t.isSigned ? ((int64_t)x < (int64_t)acc ? x : acc) : (x < acc ? x : acc); break;
          case Op::PreMulHost: case Op::PreMulDevice: acc = trunc(acc + scaled(q)); break;
          default: acc = trunc(acc + x); break;
        }
      }
      if (op.op == Op::Avg) acc = t.isSigned ? (uint64_t)((int64_t)acc / n) : acc / (uint64_t)n;
      memcpy(dst + i * sz, &acc, sz);
      return;
    }
    // Floats: every hop computes in float (double for double) and rounds.
    auto round = [&](double v) {
      uint64_t b = 0;
      encodeValue(op.dt, op.dt == ncclFloat64 ? v : (double)(float)v, &b);
      return decodeValue(op.dt, &b, 0);
    };
    double scalar1n = 0;
    {
      uint64_t b = 0;
      encodeValue(op.dt, 1.0 / n, &b);
      scalar1n = decodeValue(op.dt, &b, 0);
    }
    auto pre = [&](int q) {
      double x = decodeValue(op.dt, src[q], i);
      if (op.op == Op::Avg) return round(x * scalar1n);
      if (op.op == Op::PreMulHost || op.op == Op::PreMulDevice) {
        uint64_t b = 0;
        encodeValue(op.dt, preMulScalar(op.dt, q), &b);
        return round(x * decodeValue(op.dt, &b, 0));
      }
      return x;
    };
    double acc = pre(0);
    for (int q = 1; q < n; q++) {
      double x = pre(q);
      switch (op.op) {
        case Op::Prod: acc = round(acc * x); break;
        case Op::Max: acc = x > acc ? x : acc; break;
        case Op::Min: acc = x < acc ? x : acc; break;
        default: acc = round(acc + x); break;
      }
    }
    encodeValue(op.dt, acc, dst + i * sz);
  }

  void run(size_t k) {
    const OpSpec& op = c.ops[k];
    if (!op.issue || op.expect != ncclSuccess) return;
    const size_t cnt = op.count, sz = esz(k), blk = cnt * sz;
    // Snapshot inputs first: in-place ops overwrite them.
    std::vector<std::vector<uint8_t>> in(n);
    for (int q = 0; q < n; q++) in[q].assign(send(k, q), send(k, q) + L.ops[k].sendElems * sz);
    auto reduceInto = [&](uint8_t* dst, size_t srcOff) {
      std::vector<const uint8_t*> src(n);
      for (int q = 0; q < n; q++) src[q] = in[q].data() + srcOff * sz;
      for (size_t i = 0; i < cnt; i++) reduceElem(k, src, i, dst);
    };
    for (int r = 0; r < n; r++) {
      uint8_t* R = recv(k, r);
      switch (op.coll) {
        case Coll::AllReduce: reduceInto(R, 0); break;
        case Coll::Reduce: if (r == op.root) reduceInto(R, 0); break;
        case Coll::ReduceScatter: reduceInto(R, cnt * r); break;
        case Coll::Broadcast: mv(R, in[op.root].data(), blk); break;
        case Coll::AllGather:
          for (int q = 0; q < n; q++) mv(R + q * blk, in[q].data(), blk);
          break;
        case Coll::Gather:
          if (r == op.root)
            for (int q = 0; q < n; q++) mv(R + q * blk, in[q].data(), blk);
          break;
        case Coll::Scatter: mv(R, in[op.root].data() + r * blk, blk); break;
        case Coll::SendRecvRing: mv(R, in[(r - 1 + n) % n].data(), blk); break;
        case Coll::AlltoAll: case Coll::SendRecvPairs:
          for (int q = 0; q < n; q++) mv(R + q * blk, in[q].data() + r * blk, blk);
          break;
        default: break;
      }
    }
  }

  // Number of wrong elements over every buffer of every rank.
  size_t check(bool quiet) {
    size_t bad = 0;
    for (int r = 0; r < n; r++)
      for (size_t k = 0; k < c.ops.size(); k++) {
        const OpSpec& op = c.ops[k];
        auto segs = expectedSegments(op, L.ops[k], r, n);
        auto bufs = opBuffers(L.ops[k]);
        std::vector<const uint8_t*> in(n);
        for (int q = 0; q < n; q++) in[q] = inputs[k][q].data();
        for (size_t b = 0; b < bufs.size(); b++) {
          Report rep;
          rep.prefix = c.name + " rank " + std::to_string(r);
          rep.limit = quiet ? 0 : 4;
          bad += checkBuffer(op, n, *bufs[b], arena[r].data() + bufs[b]->off, segs[b], in, "buf", rep);
        }
      }
    return bad;
  }
};

}  // namespace

int main() {
  int failures = 0, cases = 0;
  for (int n : {1, 2, 3, 4}) {
    BuildOptions o;
    o.mode = "B";
    o.transport = "sim";
    o.nranks = n;
    o.quick = true;  // the big counts add time, not coverage of the oracle
    o.nLocalGpus = 2;
    for (const Case& c : buildCases(o)) {
      if (c.kind == Kind::Perf) continue;
      Sim sim(c, n);
      for (size_t k = 0; k < c.ops.size(); k++) sim.run(k);
      cases++;
      if (sim.check(false) != 0) {
        failures++;
        continue;
      }
      // Mutations the checker must catch, on the last buffer of the last op.
      const OpLayout& l = sim.L.ops.back();
      const Buf& b = *opBuffers(l).back();
      const size_t sz = typeInfo(c.ops.back().dt).size;
      uint8_t* base = sim.arena[n - 1].data();
      std::vector<uint8_t> saved(base + b.off, base + b.off + b.spanBytes(sz));
      base[b.off + 3] ^= 0x40;  // guard before
      if (sim.check(true) == 0) {
        printf("FAIL %s: a corrupted guard byte went unnoticed\n", c.name.c_str());
        failures++;
      }
      memcpy(base + b.off, saved.data(), saved.size());
      if (b.elems > 0) {
        size_t i = b.elems / 2;
        uint8_t* e = base + b.dataOff() + i * sz;
        uint8_t bogus = e[sz - 1] == 0x5a ? 0x5b : 0x5a;  // far outside every tolerance in every type
        memset(e, bogus, sz);
        if (sim.check(true) == 0) {
          printf("FAIL %s: a corrupted element went unnoticed\n", c.name.c_str());
          failures++;
        }
        memcpy(base + b.off, saved.data(), saved.size());
      }
    }
  }
  printf("%d oracle cases, %d failed\n", cases, failures);
  return failures ? 1 : 0;
}
