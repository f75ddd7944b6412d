#include "runner.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>

#include "check.h"

namespace colltest {

// ---------------------------------------------------------------- watchdog

namespace watchdog {
namespace {
std::atomic<int64_t> gDeadlineMs{0};  // 0: disarmed
std::atomic<const char*> gWhat{""};
std::atomic<double> gLimit{0};
std::string gWho;

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void start(const std::string& who) {
  gWho = who;
  std::thread([] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      int64_t d = gDeadlineMs.load();
      if (d != 0 && nowMs() > d) {
        fprintf(stderr, "\n[%s] TIMEOUT: '%s' did not finish within %.0f s (hang?); ending this process\n",
                gWho.c_str(), gWhat.load(), gLimit.load());
        fflush(stdout);
        _exit(3);
      }
    }
  }).detach();
}

// `what` must stay valid while armed (case names live as long as the list).
void arm(const char* what, double seconds) {
  gWhat = what;
  gLimit = seconds;
  gDeadlineMs = nowMs() + (int64_t)(seconds * 1000);
}

void disarm() { gDeadlineMs = 0; }
}  // namespace watchdog

// ---------------------------------------------------------------- locals

bool setupLocals(World& w, size_t arenaBytes) {
  for (LocalRank& lr : w.locals) {
    const char* e = rt::setDevice(lr.dev);
    if (!e) e = rt::streamCreate(&lr.stream);
    void* p = nullptr;
    if (!e) e = rt::malloc(&p, arenaBytes);
    if (e) {
      fprintf(stderr, "[%s] rank %d (GPU %d): cannot set up streams / %zu MiB of buffers: %s\n", w.who.c_str(),
              lr.rank, lr.dev, arenaBytes >> 20, e);
      return false;
    }
    lr.arena = static_cast<uint8_t*>(p);
    lr.arenaBytes = arenaBytes;
  }
  return true;
}

void freeLocals(World& w) {
  for (LocalRank& lr : w.locals) {
    rt::setDevice(lr.dev);
    if (lr.arena) rt::free(lr.arena);
    if (lr.stream) rt::streamDestroy(lr.stream);
    lr.arena = nullptr;
    lr.stream = nullptr;
  }
}

// ---------------------------------------------------------------- one case

namespace {

ncclRedOp_t builtinOp(Op op) {
  switch (op) {
    case Op::Prod: return ncclProd;
    case Op::Max: return ncclMax;
    case Op::Min: return ncclMin;
    case Op::Avg: return ncclAvg;
    default: return ncclSum;
  }
}

bool lastErrorSet(ncclComm_t comm) {
  const char* e = ncclGetLastError(comm);
  return e != nullptr && e[0] != '\0';
}

class CaseRun {
 public:
  CaseRun(World& w, const Case& c) : w_(w), c_(c), n_(w.nranks), layout_(layoutCase(c, w.nranks)) {
    inputs_.resize(c.ops.size(), std::vector<std::vector<uint8_t>>(n_));
    redops_.resize(w.locals.size(), std::vector<ncclRedOp_t>(c.ops.size(), ncclSum));
  }

  Status run(PerfResult* perf, bool* fatal) {
    bool ok = prepare();
    if (ok && c_.kind == Kind::BadInput) ok &= badCalls();
    if (ok) ok &= issueAll();
    if (ok) ok &= sync();
    if (ok && c_.kind == Kind::Perf) ok &= timedRuns(perf);
    if (ok) ok &= checkAll();
    *fatal = fatal_;
    if (!ok && rep_.printed > rep_.limit)
      fprintf(stderr, "  FAIL %s: ... %d more lines suppressed\n", c_.name.c_str(), rep_.printed - rep_.limit);
    return ok ? Status::Pass : Status::Fail;
  }

 private:
  size_t esz(size_t k) const { return typeInfo(c_.ops[k].dt).size; }

  // Rank q's send data of op k, made on first use (every process can make
  // every rank's data: the references need them).
  const uint8_t* input(size_t k, int q) {
    std::vector<uint8_t>& v = inputs_[k][q];
    const OpSpec& op = c_.ops[k];
    size_t elems = layout_.ops[k].sendElems;
    if (v.empty() && elems > 0) {
      v.resize(elems * esz(k));
      generate(op.dt, rangeFor(op.coll, op.op), mix64(c_.seed ^ mix64(k * 1000003u + (uint64_t)q)), v.data(), elems);
    }
    return v.data();
  }

  uint8_t* sendPtr(const LocalRank& lr, size_t k) const {
    const OpLayout& l = layout_.ops[k];
    size_t off = l.inPlace ? inPlaceSendOff(c_.ops[k], lr.rank) : 0;
    return lr.arena + l.send.dataOff() + off * esz(k);
  }
  uint8_t* recvPtr(const LocalRank& lr, size_t k) const {
    const OpLayout& l = layout_.ops[k];
    size_t off = l.inPlace ? inPlaceRecvOff(c_.ops[k], lr.rank) : 0;
    return lr.arena + l.recv.dataOff() + off * esz(k);
  }

  bool rtFailed(const char* e, const char* what, const LocalRank& lr) {
    if (!e) return false;
    rep_.line("rank %d: %s failed: %s", lr.rank, what, e);
    fatal_ = true;
    return true;
  }

  bool prepare() {
    rep_.prefix = c_.name;
    rep_.limit = 6;
    for (LocalRank& lr : w_.locals) {
      if (layout_.bytes > lr.arenaBytes) {
        rep_.line("case needs %zu bytes of arena, have %zu", layout_.bytes, lr.arenaBytes);
        return false;
      }
      if (rtFailed(rt::setDevice(lr.dev), "set device", lr)) return false;
      if (rtFailed(rt::memset(lr.arena, kPoison, layout_.bytes), "poison", lr)) return false;
      for (size_t k = 0; k < c_.ops.size(); k++) {
        const OpLayout& l = layout_.ops[k];
        const OpSpec& op = c_.ops[k];
        if (l.sendElems > 0 &&
            rtFailed(rt::toDevice(sendPtr(lr, k), input(k, lr.rank), l.sendElems * esz(k)), "upload", lr))
          return false;
        if (op.op == Op::PreMulDevice) {
          uint64_t s = 0;
          encodeValue(op.dt, preMulScalar(op.dt, lr.rank), &s);
          if (rtFailed(rt::toDevice(lr.arena + l.scalar.dataOff(), &s, esz(k)), "scalar upload", lr)) return false;
        }
      }
    }
    return true;
  }

  bool createRedOps(size_t k) {
    const OpSpec& op = c_.ops[k];
    if (op.op != Op::PreMulHost && op.op != Op::PreMulDevice) {
      for (size_t li = 0; li < w_.locals.size(); li++) redops_[li][k] = builtinOp(op.op);
      return true;
    }
    for (size_t li = 0; li < w_.locals.size(); li++) {
      LocalRank& lr = w_.locals[li];
      uint64_t hostScalar = 0;
      encodeValue(op.dt, preMulScalar(op.dt, lr.rank), &hostScalar);
      void* scalar = op.op == Op::PreMulHost ? (void*)&hostScalar
                                             : (void*)(lr.arena + layout_.ops[k].scalar.dataOff());
      ncclResult_t r = ncclRedOpCreatePreMulSum(&redops_[li][k], scalar, op.dt,
                                                op.op == Op::PreMulHost ? ncclScalarHostImmediate : ncclScalarDevice,
                                                lr.comm);
      if (r != ncclSuccess) {
        rep_.line("rank %d: ncclRedOpCreatePreMulSum returned %s: %s", lr.rank, ncclGetErrorString(r),
                  ncclGetLastError(lr.comm));
        return false;
      }
    }
    return true;
  }

  // Operators may be destroyed as soon as the calls using them returned.
  bool destroyRedOps(size_t k) {
    const OpSpec& op = c_.ops[k];
    if (op.op != Op::PreMulHost && op.op != Op::PreMulDevice) return true;
    bool ok = true;
    for (size_t li = 0; li < w_.locals.size(); li++) {
      ncclResult_t r = ncclRedOpDestroy(redops_[li][k], w_.locals[li].comm);
      if (r != ncclSuccess) {
        rep_.line("rank %d: ncclRedOpDestroy returned %s", w_.locals[li].rank, ncclGetErrorString(r));
        ok = false;
      }
    }
    return ok;
  }

  ncclResult_t issueOne(size_t k, size_t li) {
    const OpSpec& op = c_.ops[k];
    LocalRank& lr = w_.locals[li];
    void* s = sendPtr(lr, k);
    void* r = recvPtr(lr, k);
    ncclRedOp_t red = redops_[li][k];
    const size_t cnt = op.count;
    const int me = lr.rank;
    switch (op.coll) {
      case Coll::AllReduce: return ncclAllReduce(s, r, cnt, op.dt, red, lr.comm, lr.stream);
      case Coll::Broadcast:
        if (op.place == Place::InPlace) return ncclBcast(r, cnt, op.dt, op.root, lr.comm, lr.stream);
        return ncclBroadcast(s, r, cnt, op.dt, op.root, lr.comm, lr.stream);
      case Coll::Reduce: return ncclReduce(s, r, cnt, op.dt, red, op.root, lr.comm, lr.stream);
      case Coll::AllGather: return ncclAllGather(s, r, cnt, op.dt, lr.comm, lr.stream);
      case Coll::ReduceScatter: return ncclReduceScatter(s, r, cnt, op.dt, red, lr.comm, lr.stream);
      case Coll::AlltoAll: return ncclAlltoAll(s, r, cnt, op.dt, lr.comm, lr.stream);
      case Coll::Gather: return ncclGather(s, r, cnt, op.dt, op.root, lr.comm, lr.stream);
      case Coll::Scatter: return ncclScatter(s, r, cnt, op.dt, op.root, lr.comm, lr.stream);
      case Coll::SendRecvRing: {
        ncclResult_t a = ncclGroupStart();
        ncclResult_t b = ncclSend(s, cnt, op.dt, (me + 1) % n_, lr.comm, lr.stream);
        ncclResult_t c = ncclRecv(r, cnt, op.dt, (me - 1 + n_) % n_, lr.comm, lr.stream);
        ncclResult_t d = ncclGroupEnd();
        return a != ncclSuccess ? a : b != ncclSuccess ? b : c != ncclSuccess ? c : d;
      }
      case Coll::SendRecvPairs: {
        ncclResult_t res = ncclGroupStart();
        const size_t bytes = cnt * esz(k);
        for (int p = 0; p < n_ && res == ncclSuccess; p++) {
          res = ncclSend(static_cast<uint8_t*>(s) + p * bytes, cnt, op.dt, p, lr.comm, lr.stream);
          if (res == ncclSuccess) res = ncclRecv(static_cast<uint8_t*>(r) + p * bytes, cnt, op.dt, p, lr.comm, lr.stream);
        }
        ncclResult_t e = ncclGroupEnd();
        return res != ncclSuccess ? res : e;
      }
      default: return ncclInternalError;
    }
  }

  std::string opText(size_t k) const {
    const OpSpec& op = c_.ops[k];
    char buf[160];
    snprintf(buf, sizeof(buf), "op %zu (%s %s %s count %zu %s root %d)", k, collName(op.coll), typeInfo(op.dt).name,
             opName(op.op), op.count, placeName(op.place), op.root);
    return buf;
  }

  bool issueCall(size_t k, size_t li) {
    const OpSpec& op = c_.ops[k];
    LocalRank& lr = w_.locals[li];
    ncclResult_t r = issueOne(k, li);
    if (r != op.expect) {
      rep_.line("rank %d %s returned %s, expected %s (%s)", lr.rank, opText(k).c_str(), ncclGetErrorString(r),
                ncclGetErrorString(op.expect), ncclGetLastError(lr.comm));
      return false;
    }
    if (r != ncclSuccess && !lastErrorSet(lr.comm)) {
      rep_.line("rank %d %s was rejected but ncclGetLastError is empty", lr.rank, opText(k).c_str());
      return false;
    }
    return true;
  }

  bool groupEnd(const char* when) {
    ncclResult_t r = ncclGroupEnd();
    if (r == ncclSuccess) return true;
    rep_.line("ncclGroupEnd (%s) returned %s: %s", when, ncclGetErrorString(r), ncclGetLastError(nullptr));
    return false;
  }

  // Mode A drives several comms from one thread: every op is a group across
  // them. Mode B issues collectives bare (the common usage) unless the case
  // is grouped; point-to-point patterns group themselves.
  bool issueAll() {
    bool ok = true;
    const bool multi = w_.locals.size() > 1;
    std::vector<size_t> ks;
    for (size_t k = 0; k < c_.ops.size(); k++)
      if (c_.ops[k].issue) ks.push_back(k);
    if (c_.grouped) {
      for (size_t k : ks) ok &= createRedOps(k);
      if (!ok) return false;
      ncclGroupStart();
      for (size_t k : ks)
        for (size_t li = 0; li < w_.locals.size(); li++) ok &= issueCall(k, li);
      ok &= groupEnd("grouped case");
      for (size_t k : ks) ok &= destroyRedOps(k);
      return ok;
    }
    for (size_t k : ks) {
      if (!createRedOps(k)) return false;
      if (multi) ncclGroupStart();
      for (size_t li = 0; li < w_.locals.size(); li++) ok &= issueCall(k, li);
      if (multi) ok &= groupEnd("op across local ranks");
      ok &= destroyRedOps(k);
    }
    return ok;
  }

  bool sync() {
    bool ok = true;
    for (LocalRank& lr : w_.locals) {
      if (rtFailed(rt::setDevice(lr.dev), "set device", lr)) return false;
      if (rtFailed(rt::streamSync(lr.stream), "stream synchronize", lr)) return false;
      ncclResult_t async = ncclSuccess;
      ncclResult_t r = ncclCommGetAsyncError(lr.comm, &async);
      if (r != ncclSuccess || async != ncclSuccess) {
        rep_.line("rank %d: ncclCommGetAsyncError returned %s, async error %s", lr.rank, ncclGetErrorString(r),
                  ncclGetErrorString(async));
        ok = false;
      }
    }
    return ok;
  }

  bool timedRuns(PerfResult* perf) {
    const int iters = 5;
    auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < iters; it++)
      if (!issueAll()) return false;
    if (!sync()) return false;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    double bytes = (double)c_.ops[0].count * esz(0);
    perf->ms = s * 1e3;
    perf->algbw = bytes / s / 1e9;
    perf->busbw = perf->algbw * 2.0 * (n_ - 1) / n_;
    perf->nranks = n_;
    perf->valid = true;
    printf("[%s] %s: %.3f ms per AllReduce (mean of %d), algbw %.1f GB/s, busbw %.1f GB/s\n", w_.who.c_str(),
           c_.name.c_str(), perf->ms, iters, perf->algbw, perf->busbw);
    return true;
  }

  bool checkAll() {
    size_t bad = 0;
    for (LocalRank& lr : w_.locals) {
      rt::setDevice(lr.dev);
      for (size_t k = 0; k < c_.ops.size(); k++) {
        const OpSpec& op = c_.ops[k];
        const OpLayout& l = layout_.ops[k];
        std::vector<std::vector<Segment>> segs = expectedSegments(op, l, lr.rank, n_);
        std::vector<const uint8_t*> in(n_, nullptr);
        in[lr.rank] = input(k, lr.rank);
        for (const auto& list : segs)
          for (const Segment& s : list) {
            if (s.kind == Segment::Copy) in[s.src] = input(k, s.src);
            if (s.kind == Segment::Reduce)
              for (int q = 0; q < n_; q++) in[q] = input(k, q);
          }
        std::vector<const Buf*> bufs = opBuffers(l);
        for (size_t bi = 0; bi < bufs.size(); bi++) {
          const Buf& b = *bufs[bi];
          size_t span = b.spanBytes(esz(k));
          if (readback_.size() < span) readback_.resize(span);
          if (rtFailed(rt::toHost(readback_.data(), lr.arena + b.off, span), "read back", lr)) return false;
          char name[96];
          snprintf(name, sizeof(name), "rank %d op %zu %s", lr.rank, k,
                   l.inPlace ? "buffer" : bi == 0 ? "sendbuff" : "recvbuff");
          bad += checkBuffer(op, n_, b, readback_.data(), segs[bi], in, name, rep_);
        }
      }
    }
    return bad == 0;
  }

  // ------------------------------------------------------------ bad input
  // Every bad call uses the scratch op's (valid) buffers where a buffer is
  // needed, so anything it enqueued by mistake shows up as a write there.
  bool expectRc(const LocalRank& lr, ncclComm_t errComm, ncclResult_t got, ncclResult_t want, const char* call) {
    if (got != want) {
      rep_.line("rank %d: %s returned %s, expected %s", lr.rank, call, ncclGetErrorString(got), ncclGetErrorString(want));
      return false;
    }
    if (!lastErrorSet(errComm)) {
      rep_.line("rank %d: %s failed as expected but ncclGetLastError is empty", lr.rank, call);
      return false;
    }
    if (w_.verbose) printf("    %s -> %s: %s\n", call, ncclGetErrorString(got), ncclGetLastError(errComm));
    return true;
  }

  bool badCalls() {
    bool ok = true;
    const ncclResult_t inval = ncclInvalidArgument;
    const size_t cnt = 1024, per = cnt / n_ > 0 ? cnt / n_ : 1;  // scratch holds 1024 floats
    if (c_.bad == Bad::GroupEndWithoutStart) {
      ncclResult_t r = ncclGroupEnd();
      return expectRc(w_.locals[0], w_.locals[0].comm, r, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    }
    if (c_.bad == Bad::ErrorInsideGroup) {
      // The failing call must not poison the group: ncclGroupEnd succeeds
      // (nothing valid was recorded) or reports the error; it never hangs.
      ncclGroupStart();
      for (LocalRank& lr : w_.locals)
        ok &= expectRc(lr, lr.comm, ncclAllReduce(nullptr, recvPtr(lr, 0), cnt, ncclFloat32, ncclSum, lr.comm, lr.stream),
                       inval, "ncclAllReduce(sendbuff=NULL) inside a group");
      ncclResult_t r = ncclGroupEnd();
      if (r != ncclSuccess && r != inval) {
        rep_.line("ncclGroupEnd after a failed call in the group returned %s", ncclGetErrorString(r));
        ok = false;
      }
      return ok;
    }
    for (size_t li = 0; li < w_.locals.size(); li++) {
      LocalRank& lr = w_.locals[li];
      void* S = sendPtr(lr, 0);
      void* R = recvPtr(lr, 0);
      ncclComm_t cm = lr.comm;
      rtStream st = lr.stream;
      switch (c_.bad) {
        case Bad::NullComm:
          ok &= expectRc(lr, nullptr, ncclAllReduce(S, R, cnt, ncclFloat32, ncclSum, nullptr, st), inval,
                         "ncclAllReduce(comm=NULL)");
          break;
        case Bad::NullSendbuff:
          ok &= expectRc(lr, cm, ncclAllReduce(nullptr, R, cnt, ncclFloat32, ncclSum, cm, st), inval,
                         "ncclAllReduce(sendbuff=NULL)");
          break;
        case Bad::NullRecvbuff:
          ok &= expectRc(lr, cm, ncclAllReduce(S, nullptr, cnt, ncclFloat32, ncclSum, cm, st), inval,
                         "ncclAllReduce(recvbuff=NULL)");
          break;
        case Bad::DtypeTooLarge:
          ok &= expectRc(lr, cm, ncclAllReduce(S, R, 16, (ncclDataType_t)ncclNumTypes, ncclSum, cm, st), inval,
                         "ncclAllReduce(datatype=ncclNumTypes)");
          break;
        case Bad::DtypeNegative:
          ok &= expectRc(lr, cm, ncclAllReduce(S, R, 16, (ncclDataType_t)-1, ncclSum, cm, st), inval,
                         "ncclAllReduce(datatype=-1)");
          break;
        case Bad::OpInvalid:
          ok &= expectRc(lr, cm, ncclAllReduce(S, R, cnt, ncclFloat32, (ncclRedOp_t)99, cm, st), inval,
                         "ncclAllReduce(op=99)");
          break;
        case Bad::PreMulWrongType: {
          float two = 2.0f;
          ncclRedOp_t op;
          ncclResult_t r = ncclRedOpCreatePreMulSum(&op, &two, ncclFloat32, ncclScalarHostImmediate, cm);
          if (r != ncclSuccess) {
            rep_.line("rank %d: ncclRedOpCreatePreMulSum returned %s", lr.rank, ncclGetErrorString(r));
            return false;
          }
          ok &= expectRc(lr, cm, ncclAllReduce(S, R, cnt, ncclInt32, op, cm, st), inval,
                         "ncclAllReduce(int32 with a float premulsum op)");
          ok &= ncclRedOpDestroy(op, cm) == ncclSuccess;
          break;
        }
        case Bad::DestroyBuiltinOp:
          ok &= expectRc(lr, cm, ncclRedOpDestroy(ncclSum, cm), inval, "ncclRedOpDestroy(ncclSum)");
          break;
        case Bad::BcastRootHigh:
          ok &= expectRc(lr, cm, ncclBroadcast(S, R, cnt, ncclFloat32, n_, cm, st), inval, "ncclBroadcast(root=nranks)");
          break;
        case Bad::BcastRootNegative:
          ok &= expectRc(lr, cm, ncclBroadcast(S, R, cnt, ncclFloat32, -1, cm, st), inval, "ncclBroadcast(root=-1)");
          break;
        case Bad::ReduceRootHigh:
          ok &= expectRc(lr, cm, ncclReduce(S, R, cnt, ncclFloat32, ncclSum, n_, cm, st), inval,
                         "ncclReduce(root=nranks)");
          break;
        case Bad::GatherRootHigh:
          ok &= expectRc(lr, cm, ncclGather(S, R, per, ncclFloat32, n_, cm, st), inval, "ncclGather(root=nranks)");
          break;
        case Bad::ScatterRootHigh:
          ok &= expectRc(lr, cm, ncclScatter(S, R, per, ncclFloat32, n_, cm, st), inval, "ncclScatter(root=nranks)");
          break;
        case Bad::SendPeerHigh:
          ok &= expectRc(lr, cm, ncclSend(S, cnt, ncclFloat32, n_, cm, st), inval, "ncclSend(peer=nranks)");
          break;
        case Bad::RecvPeerNegative:
          ok &= expectRc(lr, cm, ncclRecv(R, cnt, ncclFloat32, -1, cm, st), inval, "ncclRecv(peer=-1)");
          break;
        case Bad::AllGatherNullRecv:
          ok &= expectRc(lr, cm, ncclAllGather(S, nullptr, per, ncclFloat32, cm, st), inval,
                         "ncclAllGather(recvbuff=NULL)");
          break;
        case Bad::AlltoAllNullSend:
          ok &= expectRc(lr, cm, ncclAlltoAll(nullptr, R, per, ncclFloat32, cm, st), inval,
                         "ncclAlltoAll(sendbuff=NULL)");
          break;
        case Bad::CountOverflow:
          ok &= expectRc(lr, cm, ncclAllGather(S, R, SIZE_MAX / 2, ncclFloat32, cm, st), inval,
                         "ncclAllGather(sendcount=SIZE_MAX/2)");
          break;
        case Bad::HostMemory: {
          std::vector<float> host(cnt, 1.0f);  // ordinary pageable memory: not GPU-accessible
          ok &= expectRc(lr, cm, ncclAllReduce(host.data(), R, cnt, ncclFloat32, ncclSum, cm, st), inval,
                         "ncclAllReduce(sendbuff=malloc'd host memory)");
          break;
        }
        case Bad::WrongGpu: {
          // The next local rank on another GPU (ranks may share a GPU, and
          // a buffer on the rank's own GPU is no error).
          size_t oi = (li + 1) % w_.locals.size();
          while (oi != li && w_.locals[oi].dev == lr.dev) oi = (oi + 1) % w_.locals.size();
          if (oi == li) {
            rep_.line("rank %d: no local rank on another GPU for the wrong-GPU check", lr.rank);
            ok = false;
            break;
          }
          const LocalRank& other = w_.locals[oi];
          ok &= expectRc(lr, cm, ncclAllReduce(sendPtr(other, 0), R, cnt, ncclFloat32, ncclSum, cm, st), inval,
                         "ncclAllReduce(sendbuff on another GPU)");
          break;
        }
        default: break;
      }
    }
    return ok;
  }

  World& w_;
  const Case& c_;
  const int n_;
  CaseLayout layout_;
  std::vector<std::vector<std::vector<uint8_t>>> inputs_;  // [op][rank]
  std::vector<std::vector<ncclRedOp_t>> redops_;            // [local][op]
  std::vector<uint8_t> readback_;
  Report rep_;
  bool fatal_ = false;
};

}  // namespace

Status runCase(World& w, const Case& c, PerfResult* perf, bool* fatal) {
  CaseRun run(w, c);
  return run.run(perf, fatal);
}

}  // namespace colltest
