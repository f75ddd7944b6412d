#include "cases.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstring>

namespace colltest {

const char* collName(Coll c) {
  static const char* names[] = {"AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                "SendRecvRing", "SendRecvPairs", "AlltoAll", "Gather", "Scatter"};
  return names[(int)c];
}

bool isReduction(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }

const char* opName(Op op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg", "premul-host", "premul-dev", "none"};
  return names[(int)op];
}

Range rangeFor(Coll c, Op op) {
  if (!isReduction(c)) return Range::Any;
  switch (op) {
    case Op::Prod: return Range::Prod;
    case Op::Max: case Op::Min: return Range::Any;
    default: return Range::Sum;
  }
}

const char* placeName(Place p) {
  static const char* names[] = {"oop", "inplace", "unaligned"};
  return names[(int)p];
}

const char* badName(Bad b) {
  static const char* names[] = {
      "none", "null-comm", "null-sendbuff", "null-recvbuff", "dtype-too-large", "dtype-negative", "op-invalid",
      "premul-wrong-type", "destroy-builtin-op", "bcast-root-high", "bcast-root-negative", "reduce-root-high",
      "gather-root-high", "scatter-root-high", "send-peer-high", "recv-peer-negative", "allgather-null-recv",
      "alltoall-null-send", "count-overflow", "host-memory", "wrong-gpu", "groupend-without-start",
      "error-inside-group"};
  return names[(int)b];
}

double preMulScalar(ncclDataType_t dt, int rank) {
  const TypeInfo& t = typeInfo(dt);
  if (t.isInt) return t.isSigned ? (rank % 2 == 0 ? 3.0 : -2.0) : (double)(rank % 3 + 2);
  static const double f[] = {1.5, 0.5, 2.0, 0.75};  // exact in every float format
  return f[rank % 4];
}

// ---------------------------------------------------------------- layout

namespace {

void sizes(Coll c, size_t count, int n, size_t* send, size_t* recv) {
  switch (c) {
    case Coll::AllGather: case Coll::Gather: *send = count; *recv = count * n; break;
    case Coll::ReduceScatter: case Coll::Scatter: *send = count * n; *recv = count; break;
    case Coll::AlltoAll: case Coll::SendRecvPairs: *send = *recv = count * n; break;
    default: *send = *recv = count; break;
  }
}

size_t alignUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

}  // namespace

CaseLayout layoutCase(const Case& c, int n) {
  CaseLayout L;
  size_t off = 0;
  auto place = [&](Buf& b, size_t elems, size_t shift, size_t esz) {
    b.off = off;
    b.elems = elems;
    b.shift = shift;
    off = alignUp(off + b.spanBytes(esz), 256);
  };
  for (const OpSpec& op : c.ops) {
    OpLayout l;
    size_t esz = typeInfo(op.dt).size;
    sizes(op.coll, op.count, n, &l.sendElems, &l.recvElems);
    l.inPlace = op.place == Place::InPlace;
    if (l.inPlace) {
      place(l.send, std::max(l.sendElems, l.recvElems), 0, esz);
      l.recv = l.send;
    } else {
      bool odd = op.place == Place::Unaligned;
      place(l.send, l.sendElems, odd ? esz : 0, esz);
      place(l.recv, l.recvElems, odd ? 3 * esz : 0, esz);
    }
    if (op.op == Op::PreMulDevice) place(l.scalar, 1, 0, esz);
    L.ops.push_back(l);
  }
  L.bytes = std::max<size_t>(off, 256);
  return L;
}

std::vector<const Buf*> opBuffers(const OpLayout& l) {
  if (l.inPlace) return {&l.send};
  return {&l.send, &l.recv};
}

// Where the API pointers of an in-place op sit, in elements of its buffer.
size_t inPlaceSendOff(const OpSpec& op, int rank) {
  return op.coll == Coll::AllGather || op.coll == Coll::Gather ? op.count * rank : 0;
}
size_t inPlaceRecvOff(const OpSpec& op, int rank) {
  return op.coll == Coll::ReduceScatter || op.coll == Coll::Scatter ? op.count * rank : 0;
}

std::vector<std::vector<Segment>> expectedSegments(const OpSpec& op, const OpLayout& l, int r, int n) {
  const size_t c = op.count;
  auto copy = [](size_t b, size_t e, int src, size_t srcOff) { return Segment{Segment::Copy, b, e, src, srcOff}; };
  auto reduce = [](size_t b, size_t e, size_t srcOff) { return Segment{Segment::Reduce, b, e, -1, srcOff}; };
  const bool untouched = !op.issue || op.expect != ncclSuccess;
  std::vector<Segment> out;  // gaps are poison
  if (!l.inPlace) {
    std::vector<Segment> send = {copy(0, l.sendElems, r, 0)};  // out of place: sendbuff is read-only
    if (!untouched) {
      switch (op.coll) {
        case Coll::AllReduce: out.push_back(reduce(0, c, 0)); break;
        case Coll::Broadcast: out.push_back(copy(0, c, op.root, 0)); break;
        case Coll::Reduce: if (r == op.root) out.push_back(reduce(0, c, 0)); break;
        case Coll::ReduceScatter: out.push_back(reduce(0, c, c * r)); break;
        case Coll::SendRecvRing: out.push_back(copy(0, c, (r - 1 + n) % n, 0)); break;
        case Coll::Scatter: out.push_back(copy(0, c, op.root, c * r)); break;
        case Coll::AllGather:
          for (int q = 0; q < n; q++) out.push_back(copy(c * q, c * (q + 1), q, 0));
          break;
        case Coll::Gather:
          if (r == op.root)
            for (int q = 0; q < n; q++) out.push_back(copy(c * q, c * (q + 1), q, 0));
          break;
        case Coll::AlltoAll: case Coll::SendRecvPairs:
          for (int q = 0; q < n; q++) out.push_back(copy(c * q, c * (q + 1), q, c * r));
          break;
        default: break;
      }
    }
    return {send, out};
  }
  const size_t so = inPlaceSendOff(op, r);
  if (untouched) return {{copy(so, so + l.sendElems, r, 0)}};
  switch (op.coll) {
    case Coll::AllReduce: out.push_back(reduce(0, c, 0)); break;
    case Coll::Broadcast: out.push_back(copy(0, c, op.root, 0)); break;
    case Coll::Reduce: out.push_back(r == op.root ? reduce(0, c, 0) : copy(0, c, r, 0)); break;
    case Coll::AllGather:
      for (int q = 0; q < n; q++) out.push_back(copy(c * q, c * (q + 1), q, 0));
      break;
    case Coll::ReduceScatter:
      for (int q = 0; q < n; q++)
        out.push_back(q == r ? reduce(c * q, c * (q + 1), c * q) : copy(c * q, c * (q + 1), r, c * q));
      break;
    case Coll::Gather:
      if (r == op.root) {
        for (int q = 0; q < n; q++) out.push_back(copy(c * q, c * (q + 1), q, 0));
      } else {
        out.push_back(copy(c * r, c * (r + 1), r, 0));  // non-root: recvbuff unused, own block untouched
      }
      break;
    case Coll::Scatter:
      for (int q = 0; q < n; q++)
        out.push_back(q == r ? copy(c * q, c * (q + 1), op.root, c * q) : copy(c * q, c * (q + 1), r, c * q));
      break;
    case Coll::AlltoAll:   // as out of place: block q comes from rank q's block r
      for (int q = 0; q < n; q++) out.push_back(copy(c * q, c * (q + 1), q, c * r));
      break;
    default: break;
  }
  return {out};
}

// ---------------------------------------------------------------- case list

namespace {

constexpr size_t kBig = (1u << 20) + 3;
constexpr size_t kHuge = 64u << 20;
constexpr size_t kPerfCount = 256u << 20;  // 1 GiB of float

const Op kAllOps[] = {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg, Op::PreMulHost, Op::PreMulDevice};

bool rooted(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter;
}

bool matches(const std::string& pat, const std::string& name) {
  if (pat.find_first_of("*?[") == std::string::npos) return name.find(pat) != std::string::npos;
  return fnmatch(pat.c_str(), name.c_str(), 0) == 0;
}

class Builder {
 public:
  explicit Builder(const BuildOptions& o) : o_(o) {}

  void add(Case c, const std::string& shortName) {
    c.name = o_.mode + "/" + o_.transport + "/" + shortName;
    c.seed = hashString(shortName.c_str());
    if (!selected(c.name)) return;
    size_t bytes = layoutCase(c, o_.nranks).bytes;
    // Big cases spend seconds generating and checking data on the host.
    c.timeoutS = o_.timeoutS + 30.0 * (double)bytes / (1u << 30);
    out_.push_back(std::move(c));
  }

  void single(const OpSpec& s) {
    if (o_.mode == "A-group" && !smoke(s)) return;
    std::string n = std::string(collName(s.coll)) + "/" + typeInfo(s.dt).name;
    if (s.op != Op::None) n += std::string("/") + opName(s.op);
    n += "/c" + std::to_string(s.count) + "/" + placeName(s.place);
    if (rooted(s.coll)) n += "/r" + std::to_string(s.root);
    Case c;
    c.label = collName(s.coll);
    c.ops.push_back(s);
    add(std::move(c), n);
  }

  std::vector<Case> take() { return std::move(out_); }

 private:
  bool selected(const std::string& name) const {
    for (const std::string& p : o_.exclude)
      if (matches(p, name)) return false;
    if (o_.include.empty()) return true;
    for (const std::string& p : o_.include)
      if (matches(p, name)) return true;
    return false;
  }

  // The second mode-A init flavour only differs in how comms are made: a
  // representative slice is enough.
  bool smoke(const OpSpec& s) const {
    bool type = s.dt == ncclFloat32 || s.dt == ncclBfloat16 || s.dt == ncclInt8 || s.dt == ncclFloat64;
    bool op = s.op == Op::None || s.op == Op::Sum || s.op == Op::PreMulDevice;
    bool count = s.count == 7 || s.count == 1023 || s.count == kBig;
    bool root = !rooted(s.coll) || s.root == o_.nranks - 1;
    return type && op && count && root && s.place != Place::Unaligned;
  }

  const BuildOptions& o_;
  std::vector<Case> out_;
};

OpSpec spec(Coll c, ncclDataType_t dt, Op op, size_t count, Place p, int root = 0) {
  OpSpec s;
  s.coll = c;
  s.dt = dt;
  s.op = op;
  s.count = count;
  s.place = p;
  s.root = root;
  return s;
}

// Whether the default (non --full) matrix keeps this op: every type and op at
// small counts, the big count for a representative slice.
bool inDefault(const OpSpec& s, bool bigCount) {
  const bool narrowOrFloat = s.dt == ncclFloat32 || s.dt == ncclBfloat16 || s.dt == ncclFloat16;
  const bool small = s.count == 1 || s.count == 1023;
  switch (s.coll) {
    case Coll::AllReduce:
      if (s.place == Place::Unaligned) return s.op == Op::Sum && (s.count == 1023 || bigCount);
      if (!bigCount) return true;
      return s.op == Op::Sum || (narrowOrFloat && s.place == Place::OutOfPlace);
    case Coll::Reduce:
      if (s.place == Place::Unaligned) return s.op == Op::Sum && s.count == 1023 && s.root == 0;
      if (small) return true;
      if (bigCount) return s.op == Op::Sum && s.place == Place::OutOfPlace;
      return s.op == Op::Sum;
    case Coll::ReduceScatter:
      if (s.place == Place::Unaligned) return s.op == Op::Sum && s.count == 1023;
      if (s.count == 0 || bigCount) return s.op == Op::Sum;
      return true;
    default:
      if (s.place == Place::Unaligned) return s.count == 1023 && s.root == 0;
      return true;
  }
}

}  // namespace

std::vector<Case> buildCases(const BuildOptions& o) {
  Builder b(o);
  const int n = o.nranks;
  std::vector<size_t> counts = {0, 1, 7, 1023};
  if (!o.quick) counts.push_back(kBig);

  for (int ci = 0; ci < (int)Coll::Count; ci++) {
    Coll coll = (Coll)ci;
    for (int d = 0; d < ncclNumTypes; d++) {
      ncclDataType_t dt = (ncclDataType_t)d;
      for (size_t count : counts) {
        for (Place place : {Place::OutOfPlace, Place::InPlace, Place::Unaligned}) {
          if (place == Place::Unaligned && count == 0) continue;
          bool p2p = coll == Coll::SendRecvRing || coll == Coll::SendRecvPairs;
          if (place == Place::InPlace && p2p) continue;
          for (int root = 0; root < (rooted(coll) ? n : 1); root++) {
            std::vector<Op> ops;
            if (isReduction(coll)) ops.assign(std::begin(kAllOps), std::end(kAllOps));
            else ops.push_back(Op::None);
            for (Op op : ops) {
              OpSpec s = spec(coll, dt, op, count, place, root);
              if (!o.full && !inDefault(s, count == kBig)) continue;
              b.single(s);
            }
          }
        }
      }
    }
  }

  if (!o.quick && o.huge) {
    b.single(spec(Coll::AllReduce, ncclFloat32, Op::Sum, kHuge, Place::OutOfPlace));
    b.single(spec(Coll::AllReduce, ncclBfloat16, Op::Sum, kHuge, Place::OutOfPlace));
    b.single(spec(Coll::Broadcast, ncclFloat32, Op::None, kHuge, Place::OutOfPlace, n - 1));
    b.single(spec(Coll::Reduce, ncclFloat32, Op::Sum, kHuge, Place::OutOfPlace, 0));
    b.single(spec(Coll::AllGather, ncclFloat32, Op::None, kHuge / n, Place::OutOfPlace));
    b.single(spec(Coll::ReduceScatter, ncclFloat32, Op::Sum, kHuge / n, Place::OutOfPlace));
  }

  // Batches: the step counters and the work FIFO across many launches.
  {
    Case c;  // back to back, no synchronization until the end
    c.label = "Batch";
    const ncclDataType_t types[] = {ncclFloat32, ncclInt32, ncclBfloat16, ncclFloat16};
    const Op ops[] = {Op::Sum, Op::Max, Op::Avg, Op::PreMulHost};
    for (int k = 0; k < 256; k++)
      c.ops.push_back(spec(Coll::AllReduce, types[k % 4], ops[(k / 4) % 4], 1 + (size_t)(k * 37) % 300,
                           Place::OutOfPlace));
    b.add(std::move(c), "Batch/allreduce-x256-sequential");
  }
  {
    Case c;  // more than 4 collectives in one group: work goes through the FIFO
    c.label = "Batch";
    c.grouped = true;
    c.ops = {spec(Coll::AllReduce, ncclFloat32, Op::Sum, 1023, Place::OutOfPlace),
             spec(Coll::Broadcast, ncclInt32, Op::None, 777, Place::OutOfPlace, n - 1),
             spec(Coll::Reduce, ncclBfloat16, Op::Sum, 100, Place::OutOfPlace, 0),
             spec(Coll::AllGather, ncclFloat16, Op::None, 65, Place::OutOfPlace),
             spec(Coll::ReduceScatter, ncclFloat64, Op::Avg, 33, Place::OutOfPlace),
             spec(Coll::AllReduce, ncclInt8, Op::Max, 2049, Place::InPlace),
             spec(Coll::AllReduce, ncclFloat32, Op::PreMulDevice, kBig, Place::OutOfPlace),
             spec(Coll::Reduce, ncclUint64, Op::Prod, 5, Place::InPlace, n - 1)};
    b.add(std::move(c), "Batch/group-8-collectives");
  }
  {
    Case c;  // collectives and point-to-point in one group
    c.label = "Batch";
    c.grouped = true;
    c.ops = {spec(Coll::AllReduce, ncclFloat32, Op::Sum, 4097, Place::OutOfPlace),
             spec(Coll::SendRecvRing, ncclUint8, Op::None, 1000, Place::OutOfPlace),
             spec(Coll::SendRecvPairs, ncclInt32, Op::None, 300, Place::OutOfPlace),
             spec(Coll::AlltoAll, ncclFloat32, Op::None, 17, Place::OutOfPlace),
             spec(Coll::Gather, ncclBfloat16, Op::None, 33, Place::OutOfPlace, 0),
             spec(Coll::Scatter, ncclFloat64, Op::None, 9, Place::OutOfPlace, n - 1),
             spec(Coll::Broadcast, ncclFloat8e4m3, Op::None, 129, Place::OutOfPlace, 0)};
    b.add(std::move(c), "Batch/group-mixed-coll-p2p");
  }
  {
    Case c;  // a very large group
    c.label = "Batch";
    c.grouped = true;
    for (int k = 0; k < 640; k++)
      c.ops.push_back(spec(Coll::AllReduce, k % 2 ? ncclInt32 : ncclFloat32, Op::Sum, 1 + (size_t)k % 64,
                           Place::OutOfPlace));
    b.add(std::move(c), "Batch/group-640-allreduce");
  }

  if (o.mode != "A-group") {
    for (int k = 1; k < (int)Bad::Count; k++) {
      Bad bad = (Bad)k;
      if (bad == Bad::WrongGpu && o.nLocalGpus < 2) continue;
      Case c;
      c.label = "BadInput";
      c.kind = Kind::BadInput;
      c.bad = bad;
      OpSpec scratch = spec(Coll::AllReduce, ncclFloat32, Op::Sum, 1024, Place::OutOfPlace);
      scratch.issue = false;  // the valid buffers the bad calls point at: must stay untouched
      c.ops = {scratch, spec(Coll::AllReduce, ncclFloat32, Op::Sum, 1023, Place::OutOfPlace)};
      b.add(std::move(c), std::string("BadInput/") + badName(bad));
    }
  }

  if (o.mode == "A-all" && o.perf && !o.quick && n >= 2) {
    Case c;
    c.label = "Perf";
    c.kind = Kind::Perf;
    c.ops = {spec(Coll::AllReduce, ncclFloat32, Op::Sum, kPerfCount, Place::OutOfPlace)};
    b.add(std::move(c), "Perf/allreduce-float-1GiB");
  }
  return b.take();
}

}  // namespace colltest
