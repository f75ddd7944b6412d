// Kernel harness: drives the device kernels directly, without the host core.
// R simulated ranks live on one GPU (each rank's kernel on its own stream;
// grids are small, so every rank's blocks are resident together) or, with
// --gpus N, spread over N GPUs with peer access. DevComm/Channel/Peer structs
// and connection buffers are wired by hand; every collective x datatype x op
// x count x in/out-of-place x protocol x ranks x channels, plus p2p items,
// is checked against a host reference on fresh random data. Many items run
// per launch and launches follow each other without a sync, so step counters
// persist across kernels and slots wrap.
//
// Usage: kernel_harness [--types f32,bf16] [--colls ar,bc,red,ag,rs,p2p]
//        [--ranks 1,2,3,4] [--protos ll,simple,ll128] [--big 0|1] [--gpus N]
//        [--seed S]
// Ranks wrap over the GPUs (rank r on GPU r % N), so `--ranks 2,3,4,8` on
// one GPU is the multi-rank matrix with every rank sharing it. Ranks that
// share a GPU spin on each other, so two things must hold for a ring not to
// hang: all their blocks are resident at once (a rank set whose blocks,
// doubled for programmatic launches that park the next kernel's blocks,
// exceed the kernels' occupancy is skipped with a message), and each rank's
// stream has a host-to-GPU work queue of its own (the queue count is raised
// to 32 before the first runtime call unless set; a rank set needing more
// queues than the process has is skipped).
// Exit: 0 all passed, 1 mismatch/hang, 77 no GPU (or every rank set skipped).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/gpu.h"
#include "common/util/debug.h"
#include "device/dev_types.h"
#include "device/kernel_choices.h"
#include "device/kernels.h"
#include "device/small_float.h"
#include "test_check.h"

using namespace uniccl;
using namespace uniccl::dev;

namespace {

const char* kTypeNames[kNumDataTypes] = {"i8", "u8", "i32", "u32", "i64", "u64",
                                          "f16", "f32", "f64", "bf16", "f8e4m3", "f8e5m2"};
const int kTypeSize[kNumDataTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
const char* kCollNames[kNumColls] = {"ar", "bc", "red", "ag", "rs", "p2p"};
const char* kOpNames[kNumRedOps] = {"sum", "prod", "max", "min", "premul", "postdiv"};
constexpr int kGrid = 4;                 // blocks per launch (channels wired)
constexpr int kSimpleBuff = 8 * 32768;   // 32 KiB Simple slots: big counts wrap many times
constexpr int kLLBuff = 8 * 4096;        // 4 KiB LL slots (2 KiB data)
constexpr int kLL128Buff = 8 * 4096;     // 4 KiB LL128 slots (32 lines, 3840 bytes of data)

// ------------------------------------------------------------ host values
bool isFloat(int t) { return t >= 6; }
bool isSigned(int t) { return t == 0 || t == 2 || t == 4; }
int mantBits(int t) {
  switch (t) {
    case 6: return 10; case 7: return 23; case 8: return 52; case 9: return 7; case 10: return 3; case 11: return 2;
  }
  return 64;
}
// The smallest subnormal of each float type (the step below which products round).
double minSubnormal(int t) {
  switch (t) {
    case 6: return std::ldexp(1.0, -24); case 7: return std::ldexp(1.0, -149); case 8: return std::ldexp(1.0, -1074);
    case 9: return std::ldexp(1.0, -133); case 10: return std::ldexp(1.0, -9); case 11: return std::ldexp(1.0, -16);
  }
  return 0;
}
double toDouble(int t, const void* p) {
  switch (t) {
    case 6: return halfToFloat(*(const uint16_t*)p);
    case 7: return *(const float*)p;
    case 8: return *(const double*)p;
    case 9: return bf16ToFloat(*(const uint16_t*)p);
    case 10: return e4m3ToFloat(*(const uint8_t*)p);
    case 11: return e5m2ToFloat(*(const uint8_t*)p);
  }
  return 0;
}
void fromDouble(int t, double v, void* p) {
  switch (t) {
    case 6: { uint16_t h = floatToHalf((float)v); memcpy(p, &h, 2); break; }
    case 7: { float f = (float)v; memcpy(p, &f, 4); break; }
    case 8: memcpy(p, &v, 8); break;
    case 9: { uint16_t h = floatToBf16((float)v); memcpy(p, &h, 2); break; }
    case 10: { uint8_t c = floatToE4m3((float)v); memcpy(p, &c, 1); break; }
    case 11: { uint8_t c = floatToE5m2((float)v); memcpy(p, &c, 1); break; }
  }
}
// Integers as 64-bit two's complement, wrapped to the type's width.
uint64_t loadInt(int t, const void* p) {
  switch (kTypeSize[t]) {
    case 1: return isSigned(t) ? (uint64_t)(int64_t)*(const int8_t*)p : *(const uint8_t*)p;
    case 4: return isSigned(t) ? (uint64_t)(int64_t)*(const int32_t*)p : *(const uint32_t*)p;
    default: return *(const uint64_t*)p;
  }
}
void storeInt(int t, uint64_t v, void* p) { memcpy(p, &v, kTypeSize[t]); }
uint64_t wrap(int t, uint64_t v) {
  uint8_t b[8];
  storeInt(t, v, b);
  return loadInt(t, b);
}

struct Rng {
  uint64_t s;
  uint64_t next() { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; }
  int range(int n) { return (int)(next() % (uint64_t)n); }
};

// Random element: floats are small dyadic values (exact in every format,
// away from fp8 saturation); prod inputs stay near 1 so products stay finite.
void randomElem(int t, int op, Rng& r, void* p) {
  if (!isFloat(t)) { uint64_t v = r.next(); memcpy(p, &v, kTypeSize[t]); return; }
  double v;
  if (op == kOpProd) v = (1 + r.range(8)) / 4.0 * (r.range(2) ? 1 : -1);   // 0.25..2
  else v = (r.range(33) - 16) / 8.0;                                       // -2..2
  fromDouble(t, v, p);
}

// ------------------------------------------------------------ test fabric
struct Fabric {
  int nRanks = 0;
  std::vector<int> devOf;                // rank -> device
  std::vector<DevComm*> dComm;           // device copies
  std::vector<Channel*> dChannels;       // their channel arrays
  std::vector<gpu::Stream> streams;
  std::vector<gpu::Event> events;
  std::vector<void*> allocs;             // device allocations to free
  volatile uint32_t* abortHost = nullptr;
  uint32_t* abortDev = nullptr;
  std::vector<std::vector<int>> ringOrder;  // per channel: position -> rank

  void* devAlloc(int dev, size_t bytes) {
    NCCL_OK_OR_EXIT(gpu::setDevice(dev));
    void* p;
    NCCL_OK_OR_EXIT(gpu::deviceAlloc(&p, bytes));
    NCCL_OK_OR_EXIT(gpu::memset(p, 0, bytes));
    allocs.push_back(p);
    return p;
  }

  void init(int R, int nGpus, Rng& rng) {
    nRanks = R;
    devOf.resize(R);
    for (int r = 0; r < R; r++) devOf[r] = r % nGpus;
    for (int a = 0; a < nGpus; a++)
      for (int b = 0; b < nGpus; b++)
        if (a != b) { NCCL_OK_OR_EXIT(gpu::setDevice(a)); NCCL_OK_OR_EXIT(gpu::enablePeerAccess(b)); }
    void* hp; void* dp;
    NCCL_OK_OR_EXIT(gpu::hostAllocMapped(&hp, &dp, 64));
    abortHost = (volatile uint32_t*)hp;
    abortDev = (uint32_t*)dp;
    *abortHost = 0;
    // Channel c uses a different ring order: identity, reversed, shuffled...
    ringOrder.resize(kGrid);
    for (int c = 0; c < kGrid; c++) {
      std::vector<int> o(R);
      for (int i = 0; i < R; i++) o[i] = i;
      if (c == 1) std::reverse(o.begin(), o.end());
      if (c >= 2) for (int i = R - 1; i > 0; i--) std::swap(o[i], o[rng.range(i + 1)]);
      ringOrder[c] = o;
    }
    // peers[rank][c][peer]
    std::vector<std::vector<std::vector<Peer>>> peers(R, std::vector<std::vector<Peer>>(kGrid, std::vector<Peer>(R)));
    for (int c = 0; c < kGrid; c++)
      for (int s = 0; s < R; s++)
        for (int d = 0; d < R; d++) {
          if (s == d) continue;
          char* ll = (char*)devAlloc(devOf[d], kLLBuff);
          char* simple = (char*)devAlloc(devOf[d], kSimpleBuff);
          char* ll128 = (char*)devAlloc(devOf[d], kLL128Buff);
          uint64_t* tail = (uint64_t*)devAlloc(devOf[d], 64);
          uint64_t* head = (uint64_t*)devAlloc(devOf[s], 64);
          Peer& sp = peers[s][c][d];
          sp.send.buffs[kProtoLL] = ll; sp.send.buffs[kProtoSimple] = simple; sp.send.buffs[kProtoLL128] = ll128;
          sp.send.remoteTail = tail; sp.send.head = head; sp.send.step = 0; sp.connected = 1;
          Peer& rp = peers[d][c][s];
          rp.recv.buffs[kProtoLL] = ll; rp.recv.buffs[kProtoSimple] = simple; rp.recv.buffs[kProtoLL128] = ll128;
          rp.recv.tail = tail; rp.recv.remoteHead = head; rp.recv.step = 0; rp.connected = 1;
        }
    dComm.resize(R);
    dChannels.resize(R);
    streams.resize(R);
    events.resize(R);
    for (int r = 0; r < R; r++) {
      NCCL_OK_OR_EXIT(gpu::setDevice(devOf[r]));
      NCCL_OK_OR_EXIT(gpu::streamCreate(&streams[r]));
      NCCL_OK_OR_EXIT(gpu::eventCreate(&events[r]));
      std::vector<Channel> ch(kMaxChannels);
      memset(ch.data(), 0, sizeof(Channel) * kMaxChannels);
      for (int c = 0; c < kGrid; c++) {
        const std::vector<int>& o = ringOrder[c];
        int pos = (int)(std::find(o.begin(), o.end(), r) - o.begin());
        ch[c].ringIndex = pos;
        ch[c].ringNext = o[(pos + 1) % R];
        ch[c].ringPrev = o[(pos + R - 1) % R];
        int* rr = (int*)devAlloc(devOf[r], sizeof(int) * R);
        NCCL_OK_OR_EXIT(gpu::memcpy(rr, o.data(), sizeof(int) * R));
        ch[c].ringRanks = rr;
        Peer* pd = (Peer*)devAlloc(devOf[r], sizeof(Peer) * R);
        NCCL_OK_OR_EXIT(gpu::memcpy(pd, peers[r][c].data(), sizeof(Peer) * R));
        ch[c].peers = pd;
      }
      Channel* chd = (Channel*)devAlloc(devOf[r], sizeof(Channel) * kMaxChannels);
      NCCL_OK_OR_EXIT(gpu::memcpy(chd, ch.data(), sizeof(Channel) * kMaxChannels));
      DevComm dc{};
      dc.rank = r; dc.nRanks = R; dc.nChannels = kGrid;
      dc.buffBytes[kProtoLL] = kLLBuff; dc.buffBytes[kProtoSimple] = kSimpleBuff; dc.buffBytes[kProtoLL128] = kLL128Buff;
      dc.abortFlag = abortDev; dc.channels = chd;
      dChannels[r] = chd;
      dComm[r] = (DevComm*)devAlloc(devOf[r], sizeof(DevComm));
      NCCL_OK_OR_EXIT(gpu::memcpy(dComm[r], &dc, sizeof(DevComm)));
    }
  }

  ~Fabric() {
    for (int r = 0; r < (int)streams.size(); r++) {
      if (streams[r]) (void)gpu::streamDestroy(streams[r]);
      if (events[r]) (void)gpu::eventDestroy(events[r]);
    }
    for (void* p : allocs) (void)gpu::deviceFree(p);
    if (abortHost) (void)gpu::hostFree((void*)abortHost);
  }

  // Waits for every rank's last launch; on a hang sets the abort flag (the
  // kernels must then exit) and reports failure.
  bool waitAll(double seconds) {
    auto t0 = std::chrono::steady_clock::now();
    bool hung = false;
    for (;;) {
      bool done = true;
      for (int r = 0; r < nRanks; r++) {
        ncclResult_t q = gpu::eventQuery(events[r]);
        if (q == ncclInProgress) done = false;
        else if (q != ncclSuccess) { fprintf(stderr, "kernel failed: %s\n", lastErrorMessage()); exit(1); }
      }
      if (done) break;
      double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!hung && el > seconds) { hung = true; *abortHost = 1; }
      if (el > seconds + 10) { fprintf(stderr, "kernels ignore the abort flag\n"); exit(1); }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return !hung;
  }
};

// ------------------------------------------------------------ cases
struct Case {
  int coll, op, type, proto, root, chLo, chHi;
  int64_t count;          // elements (coll) or bytes (p2p, per item)
  bool inPlace, scalarPtr;
  uint32_t sliceBytes;
  int misalign;           // elements added to the buffers' 16-byte aligned starts
  int shift;              // p2p: send to rank+shift
  // per rank: arena offsets
  std::vector<size_t> sendOff, recvOff, scalarOff;
  std::vector<size_t> sendBytes, recvBytes;
  uint64_t scalarBits = 0;
  double scalarVal = 0;
};

constexpr size_t kCanary = 64;   // random bytes on both sides of every buffer

struct Arena {
  std::vector<uint8_t> host;     // image uploaded / downloaded
  std::vector<uint8_t> initial;  // as uploaded
  uint8_t* dev = nullptr;
  size_t take(size_t bytes) {
    size_t off = (host.size() + kCanary + 255) & ~(size_t)255;
    host.resize(off + bytes + kCanary);
    return off;
  }
};

struct Stats { int pass = 0, fail = 0; };
std::map<std::pair<int, int>, Stats> gStats;  // (type, coll)
int gFailPrinted = 0;

// Watches each (ranks, type) stage from the side. A launch call blocks once
// the GPU's launch queue is full, so if the ranks' kernels wait on each other
// the launching thread never reaches waitAll() and nothing would ever say so.
// After `limitSeconds` the guard names the stage and sets the stage's abort
// flag: the kernels exit, the queued launches drain, and the stage fails.
class StageGuard {
 public:
  explicit StageGuard(double limitSeconds) : limit_(limitSeconds), th_([this] { run(); }) {}
  ~StageGuard() {
    { std::lock_guard<std::mutex> l(m_); quit_ = true; }
    th_.join();
  }
  void begin(const char* what, volatile uint32_t* abortFlag) {
    std::lock_guard<std::mutex> l(m_);
    snprintf(what_, sizeof what_, "%s", what);
    flag_ = abortFlag; fired_ = false; active_ = true;
    start_ = std::chrono::steady_clock::now();
  }
  // Ends the stage; true when the guard had to abort it.
  bool end() {
    std::lock_guard<std::mutex> l(m_);
    active_ = false;
    return fired_;
  }
 private:
  void run() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::lock_guard<std::mutex> l(m_);
      if (quit_) return;
      if (!active_ || fired_) continue;
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      if (el > limit_) {
        fired_ = true;
        fprintf(stderr, "HANG: %s still running after %.0f s (launching or waiting); setting the abort flag\n", what_, el);
        *flag_ = 1;
      }
    }
  }
  const double limit_;
  std::mutex m_;
  char what_[96] = {0};
  volatile uint32_t* flag_ = nullptr;
  bool active_ = false, fired_ = false, quit_ = false;
  std::chrono::steady_clock::time_point start_;
  std::thread th_;
};

void fail(const Case& c, int R, int rank, const char* what, int64_t i, double got, double want) {
  if (gFailPrinted++ < 30)
    fprintf(stderr, "FAIL %s %s %s %s R=%d ch=%d..%d count=%lld %s rank %d: %s at %lld got %g want %g\n",
            kCollNames[c.coll], kTypeNames[c.type], c.coll == kCollP2p ? "-" : kOpNames[c.op],
            c.proto == kProtoLL ? "LL" : c.proto == kProtoLL128 ? "LL128" : "Simple", R, c.chLo, c.chHi, (long long)c.count,
            c.inPlace ? "inplace" : "outplace", rank, what, (long long)i, got, want);
}

// Expected value of element i reduced over ranks (inputs[r] points at rank r's element).
bool checkReduced(const Case& c, int R, const std::vector<const uint8_t*>& in, const uint8_t* got, double* gv, double* wv) {
  const int t = c.type;
  if (!isFloat(t)) {
    uint64_t acc = 0;
    for (int r = 0; r < R; r++) {
      uint64_t x = loadInt(t, in[r]);
      if (c.op == kOpPreMulSum) x = wrap(t, x * c.scalarBits);
      if (r == 0) { acc = x; continue; }
      switch (c.op) {
        case kOpProd: acc = wrap(t, acc * x); break;
        case kOpMax: acc = isSigned(t) ? (uint64_t)std::max((int64_t)acc, (int64_t)x) : std::max(acc, x); break;
        case kOpMin: acc = isSigned(t) ? (uint64_t)std::min((int64_t)acc, (int64_t)x) : std::min(acc, x); break;
        default: acc = wrap(t, acc + x);
      }
    }
    acc = wrap(t, acc);
    if (c.op == kOpSumPostDiv) {
      uint64_t d = wrap(t, c.scalarBits);
      acc = isSigned(t) ? wrap(t, (uint64_t)((int64_t)acc / (int64_t)d)) : wrap(t, acc / d);
    }
    uint64_t g = loadInt(t, got);
    *gv = (double)(int64_t)g; *wv = (double)(int64_t)acc;
    return g == acc;
  }
  double acc = 0, mag = 0, amp = 1;
  for (int r = 0; r < R; r++) {
    double x = toDouble(t, in[r]);
    if (c.op == kOpPreMulSum) x *= c.scalarVal;
    amp *= std::max(1.0, std::fabs(x));
    if (r == 0) { acc = x; mag = std::fabs(x); continue; }
    switch (c.op) {
      case kOpProd: acc *= x; mag = std::fabs(acc); break;
      case kOpMax: acc = std::max(acc, x); break;
      case kOpMin: acc = std::min(acc, x); break;
      default: acc += x; mag += std::fabs(x);
    }
  }
  if (R == 1) mag = std::fabs(acc);
  if (c.op == kOpSumPostDiv) { acc /= c.scalarVal; mag /= std::fabs(c.scalarVal); }
  double g = toDouble(t, got);
  *gv = g; *wv = acc;
  // Each of the <= R+1 roundings (ring partial sums, pre-multiply, division)
  // errs by at most half an ulp of a value bounded by the sum of magnitudes.
  const double eps = std::ldexp(1.0, -mantBits(t));
  double tol = (R + 2) * eps * mag + std::ldexp(1.0, -mantBits(t) - 14);
  // A product's partial results can fall below the normal range (fp8 above
  // all): each of the R-1 roundings there errs by up to half the smallest
  // subnormal, and the later factors scale that error (by at most amp).
  if (c.op == kOpProd) tol += 0.5 * (R - 1) * minSubnormal(t) * amp;
  return std::fabs(g - acc) <= tol;
}

}  // namespace

// ------------------------------------------------------------ main
int main(int argc, char** argv) {
  std::vector<int> types, colls, ranks = {1, 2, 3, 4}, protos = {kProtoLL, kProtoSimple, kProtoLL128};
  bool big = true;
  int gpus = 1;
  uint64_t seed = (uint64_t)time(nullptr);
  auto splitList = [](const char* s) {
    std::vector<std::string> v; std::string cur;
    for (const char* p = s;; p++) { if (*p == ',' || !*p) { if (!cur.empty()) v.push_back(cur); cur.clear(); if (!*p) break; } else cur += *p; }
    return v;
  };
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--types") { for (auto& s : splitList(v)) for (int t = 0; t < kNumDataTypes; t++) if (s == kTypeNames[t]) types.push_back(t); i++; }
    else if (a == "--colls") { for (auto& s : splitList(v)) for (int c = 0; c < kNumColls; c++) if (s == kCollNames[c]) colls.push_back(c); i++; }
    else if (a == "--ranks") { ranks.clear(); for (auto& s : splitList(v)) ranks.push_back(atoi(s.c_str())); i++; }
    else if (a == "--protos") { protos.clear(); for (auto& s : splitList(v)) protos.push_back(s == "ll" ? kProtoLL : s == "ll128" ? kProtoLL128 : kProtoSimple); i++; }
    else if (a == "--big") { big = atoi(v) != 0; i++; }
    else if (a == "--gpus") { gpus = atoi(v); i++; }
    else if (a == "--seed") { seed = strtoull(v, nullptr, 0); i++; }
    else { fprintf(stderr, "usage: %s [--types f32,..] [--colls ar,bc,red,ag,rs,p2p] [--ranks 1,2,3,4] [--protos ll,simple,ll128] [--big 0|1] [--gpus N] [--seed S]\n", argv[0]); return 2; }
  }
  // Before the first runtime call (the runtime reads it when it creates the
  // context): a queue per stream of the ranks that share a GPU.
  setenv(gpu::workQueues().knob, "32", 0);
  int nDev = 0;
  if (gpu::getDeviceCount(&nDev) != ncclSuccess || nDev == 0) { printf("no GPU: skipped\n"); return 77; }
  gpus = std::max(1, std::min(gpus, nDev));
  if (colls.empty()) for (int c = 0; c < kNumColls; c++) colls.push_back(c);
  std::vector<int> typesBuilt;
  for (int t = 0; t < kNumDataTypes; t++) if (collectiveKernel((ncclDataType_t)t, kProtoSimple)) typesBuilt.push_back(t);
  if (types.empty()) types = typesBuilt;
  printf("kernel harness: seed %llu, gpus %d, ranks", (unsigned long long)seed, gpus);
  for (int r : ranks) printf(" %d", r);
  printf(" (rank r on GPU r %% %d)\n", gpus);
  fflush(stdout);

  // Conversion spot checks (the reference uses the same conversions).
  {
    struct { float f; uint32_t e4, e5, h, b; } k[] = {
      {1.0f, 0x38, 0x3c, 0x3c00, 0x3f80}, {448.0f, 0x7e, 0x5f, 0x5f00, 0x43e0},
      {1e6f, 0x7e, 0x7b, 0x7c00, 0x4974}, {-0.001953125f, 0x81, 0x98, 0x9800, 0xbb00}};
    for (auto& x : k) {
      if (floatToE4m3(x.f) != x.e4 || floatToE5m2(x.f) != x.e5 || floatToHalf(x.f) != x.h || floatToBf16(x.f) != x.b) {
        fprintf(stderr, "conversion check failed for %g: e4m3 %x e5m2 %x f16 %x bf16 %x\n", x.f,
                floatToE4m3(x.f), floatToE5m2(x.f), floatToHalf(x.f), floatToBf16(x.f));
        return 1;
      }
    }
  }

  // Blocks that fit on a GPU at once: the fewest over the kernels the cases
  // may launch (every GPU of the fabric is alike).
  int resident = 1 << 30;
  {
    NCCL_OK_OR_EXIT(gpu::setDevice(0));
    std::vector<const void*> ks = {p2pKernel()};
    for (int t : types)
      for (int p = 0; p < kNumProtos; p++)
        if (const void* k = collectiveKernel((ncclDataType_t)t, p)) ks.push_back(k);
    for (const void* k : ks) {
      int b = 0;
      NCCL_OK_OR_EXIT(gpu::kernelResidentBlocks(k, kThreadsPerBlock, &b));
      resident = std::min(resident, b);
    }
  }
  const gpu::WorkQueues queues = gpu::workQueues();

  Rng rng{seed * 2654435761u + 1};
  // Generous: a stage takes seconds; only a stuck one reaches this.
  StageGuard guard(120);
  const auto tStart = std::chrono::steady_clock::now();
  int hangs = 0, rankSetsRun = 0;
  for (int R : ranks) {
    if (R < 1 || R > 8) {
      printf("R=%d: SKIPPED (the harness wires 1 to 8 ranks)\n", R);
      continue;
    }
    const int perGpu = (R + gpus - 1) / gpus;
    // x2: with programmatic launches a kernel's successor may park its blocks
    // on the GPU before the kernel ends.
    const int needBlocks = perGpu * kGrid * 2;
    if (needBlocks > resident) {
      printf("R=%d: SKIPPED: %d ranks per GPU x %d blocks (x2 for programmatic launches) = %d blocks, but only %d "
             "fit on the GPU at once; ranks sharing a GPU spin on each other and would hang\n",
             R, perGpu, kGrid, needBlocks, resident);
      continue;
    }
    if (perGpu > queues.count) {
      printf("R=%d: SKIPPED: %d ranks per GPU need as many work queues, the process has %d (%s)\n", R, perGpu,
             queues.count, queues.knob);
      continue;
    }
    rankSetsRun++;
    Fabric fab;
    fab.init(R, gpus, rng);
    for (int t : types) {
      const auto tType = std::chrono::steady_clock::now();
      char stage[96];
      snprintf(stage, sizeof stage, "R=%d type %s", R, kTypeNames[t]);
      guard.begin(stage, fab.abortHost);
      const bool haveKernel = collectiveKernel((ncclDataType_t)t, kProtoSimple) != nullptr;
      const int es = kTypeSize[t];
      // Build the cases of this (R, type).
      std::vector<Case> cases;
      std::vector<int64_t> counts = {0, 1, 7, 1023};
      for (int coll : colls) {
        if (coll != kCollP2p && !haveKernel) continue;
        std::vector<int> ops = {kOpSum};
        if (coll == kCollAllReduce || coll == kCollReduce || coll == kCollReduceScatter)
          ops = {kOpSum, kOpProd, kOpMax, kOpMin, kOpPreMulSum, kOpPreMulSum + 100, kOpSumPostDiv};
        // The ops the host plans for this type only (kernel_choices.h, collKernelRuns).
        if (coll != kCollP2p && !isIntegerDataType(t)) ops.erase(std::remove(ops.begin(), ops.end(), kOpSumPostDiv), ops.end());
        for (int proto : protos)
          if (coll == kCollP2p || collectiveKernel((ncclDataType_t)t, proto) != nullptr)
          for (int nch = 1; nch <= kGrid; nch++)
            for (int opx : ops)
              for (int ip = 0; ip < 2; ip++) {
                std::vector<int64_t> cs = counts;
                if (coll == kCollP2p) cs = {0, 1, 13, 4097};
                if (big && nch == kGrid && opx == kOpSum && ip == (proto == kProtoLL)) cs.push_back(coll == kCollP2p ? (1 << 20) + 5 : (1 << 20) + 3);
                for (int64_t n : cs) {
                  Case c{};
                  c.coll = coll; c.op = opx % 100; c.scalarPtr = opx >= 100; c.type = t; c.proto = proto;
                  c.count = n; c.inPlace = ip; c.root = rng.range(R);
                  c.chLo = rng.range(kGrid - nch + 1); c.chHi = c.chLo + nch - 1;
                  const uint32_t cap = proto == kProtoSimple ? kSimpleBuff / kSteps
                                       : proto == kProtoLL128 ? kLL128Buff / kSteps / 128 * 120 / 16 * 16
                                                              : kLLBuff / kSteps / 2;
                  c.sliceBytes = rng.range(3) == 0 ? cap / (1 + rng.range(4)) : cap;
                  c.misalign = rng.range(3) == 0 ? rng.range(16 / es) : 0;
                  c.shift = coll == kCollP2p ? (ip ? 0 : 1 + rng.range(std::max(1, R - 1))) % R : 0;
                  if (coll == kCollP2p && R == 1) c.shift = 0;
                  cases.push_back(c);
                }
              }
      }
      if (cases.empty()) continue;
      // Shuffle so that protocols, channel ranges and sizes interleave.
      for (size_t i = cases.size() - 1; i > 0; i--) std::swap(cases[i], cases[rng.range((int)i + 1)]);

      // Lay out buffers per rank in arenas and fill them.
      std::vector<Arena> ar(R);
      for (auto& c : cases) {
        c.sendOff.resize(R); c.recvOff.resize(R); c.scalarOff.resize(R); c.sendBytes.resize(R); c.recvBytes.resize(R);
        if (c.coll == kCollP2p) {
          for (int r = 0; r < R; r++) {
            c.sendBytes[r] = c.recvBytes[r] = (size_t)c.count;
            c.sendOff[r] = ar[r].take(c.count + 16) + (c.misalign ? 1 + r : 0);
            c.recvOff[r] = ar[r].take(c.count + 16) + (c.misalign ? 3 : 0);
          }
          continue;
        }
        const int64_t n = c.count;
        size_t sendN = (c.coll == kCollReduceScatter) ? n * R : n;
        size_t recvN = (c.coll == kCollAllGather) ? n * R : n;
        // Scalars: PreMulSum 0.75 (floats) / 3 (ints); SumPostDiv R+1 (floats) / +-3 (ints).
        uint8_t sb[8] = {0};
        if (isFloat(t)) {
          c.scalarVal = c.op == kOpPreMulSum ? 0.75 : (double)(R + 1);
          fromDouble(t, c.scalarVal, sb);
        } else {
          uint64_t v = (c.op == kOpSumPostDiv && isSigned(t) && rng.range(2)) ? (uint64_t)-3 : 3;
          storeInt(t, v, sb);
          c.scalarBits = loadInt(t, sb);
        }
        for (int r = 0; r < R; r++) {
          const size_t mis = (size_t)c.misalign * es;
          if (c.inPlace) {
            size_t big2 = std::max(sendN, recvN) * es;
            size_t base = ar[r].take(big2 + 16) + mis;
            if (c.coll == kCollAllGather) { c.recvOff[r] = base; c.sendOff[r] = base + (size_t)r * n * es; }
            else if (c.coll == kCollReduceScatter) { c.sendOff[r] = base; c.recvOff[r] = base + (size_t)r * n * es; }
            else { c.sendOff[r] = c.recvOff[r] = base; }
          } else {
            c.sendOff[r] = ar[r].take(sendN * es + 16) + mis;
            c.recvOff[r] = ar[r].take(recvN * es + 16) + mis;
          }
          c.sendBytes[r] = sendN * es; c.recvBytes[r] = recvN * es;
          c.scalarOff[r] = ar[r].take(8);
        }
      }
      for (int r = 0; r < R; r++) {
        auto& h = ar[r].host;
        for (size_t i = 0; i + 8 <= h.size(); i += 8) { uint64_t v = rng.next(); memcpy(&h[i], &v, 8); }
      }
      // Inputs: random elements of the type, scalars.
      for (auto& c : cases) {
        for (int r = 0; r < R; r++) {
          uint8_t* s = ar[r].host.data() + c.sendOff[r];
          if (c.coll == kCollP2p) continue;  // raw random bytes already
          for (size_t i = 0; i < c.sendBytes[r] / es; i++) randomElem(t, c.op, rng, s + i * es);
          if (!c.inPlace && (c.coll != kCollReduce)) {
            uint8_t* d = ar[r].host.data() + c.recvOff[r];
            for (size_t i = 0; i < c.recvBytes[r] / es; i++) randomElem(t, kOpSum, rng, d + i * es);
          }
          uint8_t sb[8] = {0};
          if (isFloat(t)) fromDouble(t, c.scalarVal, sb); else storeInt(t, c.scalarBits, sb);
          memcpy(ar[r].host.data() + c.scalarOff[r], sb, 8);
        }
      }
      for (int r = 0; r < R; r++) {
        ar[r].initial = ar[r].host;
        ar[r].dev = (uint8_t*)fab.devAlloc(fab.devOf[r], ar[r].host.size());
        NCCL_OK_OR_EXIT(gpu::memcpy(ar[r].dev, ar[r].host.data(), ar[r].host.size()));
      }
      // Work items per rank.
      std::vector<std::vector<Work>> works(R);
      for (auto& c : cases) {
        for (int r = 0; r < R; r++) {
          Work w;
          memset(&w, 0, sizeof(w));
          w.coll = (uint8_t)c.coll; w.proto = (uint8_t)c.proto; w.channelLo = (uint8_t)c.chLo; w.channelHi = (uint8_t)c.chHi;
          if (c.coll == kCollP2p) {
            w.p.sendPeer = (r + c.shift) % R;
            w.p.recvPeer = (r - c.shift + R) % R;
            w.p.sliceBytes = c.sliceBytes;
            w.p.sendProto = w.p.recvProto = (uint8_t)c.proto;
            w.p.sendBuff = ar[r].dev + c.sendOff[r];
            w.p.recvBuff = ar[r].dev + c.recvOff[r];
            w.p.sendBytes = c.sendBytes[r];
            w.p.recvBytes = c.recvBytes[(r - c.shift + R) % R];
          } else {
            w.c.redOp = (uint8_t)c.op; w.c.dtype = (uint8_t)t; w.c.scalarKind = c.scalarPtr ? kScalarPtr : kScalarBits; w.c.root = c.root;
            w.c.sliceBytes = c.sliceBytes;
            w.c.sendbuff = ar[r].dev + c.sendOff[r];
            w.c.recvbuff = ar[r].dev + c.recvOff[r];
            w.c.count = (uint64_t)c.count;
            if (c.scalarPtr) w.c.scalar = (uint64_t)(uintptr_t)(ar[r].dev + c.scalarOff[r]);
            else memcpy(&w.c.scalar, ar[r].host.data() + c.scalarOff[r], 8);
          }
          works[r].push_back(w);
        }
      }
      // Launch in chunks of 1..16 items, cycling the three work storages:
      // inline arguments, a device array, a host-mapped FIFO ring that wraps.
      const bool allP2p = std::all_of(cases.begin(), cases.end(), [](const Case& c) { return c.coll == kCollP2p; });
      // One collective kernel per protocol: a launch's collective items share
      // one (p2p items ride along with any).
      const void* kernel = (allP2p || !haveKernel) ? p2pKernel() : collectiveKernel((ncclDataType_t)t, kProtoSimple);
      bool pdl = false;   // programmatic launches possible (every GPU of the fabric is alike)
      NCCL_OK_OR_EXIT(gpu::programmaticLaunchSupported(kernel, &pdl));
      const size_t nItems = cases.size();
      std::vector<Work*> devWorks(R);
      std::vector<Work*> ringHost(R), ringDev(R);
      size_t ringBytes = 64;
      while (ringBytes < nItems * sizeof(Work) + 4096) ringBytes *= 2;
      for (int r = 0; r < R; r++) {
        devWorks[r] = (Work*)fab.devAlloc(fab.devOf[r], nItems * sizeof(Work));
        NCCL_OK_OR_EXIT(gpu::memcpy(devWorks[r], works[r].data(), nItems * sizeof(Work)));
        void* hp; void* dp;
        NCCL_OK_OR_EXIT(gpu::setDevice(fab.devOf[r]));
        NCCL_OK_OR_EXIT(gpu::hostAllocMapped(&hp, &dp, ringBytes));
        ringHost[r] = (Work*)hp; ringDev[r] = (Work*)dp;
      }
      const uint32_t ringStart = (uint32_t)(ringBytes - 3 * sizeof(Work));  // wraps inside the first launch
      size_t at = 0;
      int mode = 0;
      while (at < nItems) {
        size_t k = std::min(nItems - at, (size_t)(1 + rng.range(16)));
        mode = (mode + 1) % 3;
        if (mode == 0) k = std::min(k, (size_t)kMaxInlineWorks);
        int chunkProto = -1;
        for (size_t i = 0; i < k; i++) {
          const Case& c = cases[at + i];
          if (c.coll == kCollP2p) continue;
          if (chunkProto < 0) chunkProto = c.proto;
          else if (c.proto != chunkProto) { k = i; break; }
        }
        const void* chunkKernel = chunkProto < 0 ? kernel : collectiveKernel((ncclDataType_t)t, chunkProto);
        for (int r = 0; r < R; r++) {
          KernelArgs a;
          memset(&a, 0, sizeof(a));
          a.comm = fab.dComm[r];
          a.channels = fab.dChannels[r];
          a.nWorks = (uint32_t)k;
          if (mode == 0) {
            for (size_t i = 0; i < k; i++) a.inlineWorks[i] = works[r][at + i];
          } else if (mode == 1) {
            a.works = devWorks[r] + at; a.workOffset = 0; a.workMask = ~0u;
          } else {
            const uint32_t off = (uint32_t)((ringStart + at * sizeof(Work)) & (ringBytes - 1));
            for (size_t i = 0; i < k; i++)
              memcpy((char*)ringHost[r] + ((off + i * sizeof(Work)) & (ringBytes - 1)), &works[r][at + i], sizeof(Work));
            a.works = ringDev[r]; a.workOffset = off; a.workMask = (uint32_t)(ringBytes - 1);
          }
          void* args[] = {&a};
          gpu::LaunchConfig cfg;
          cfg.gridX = kGrid; cfg.blockX = kThreadsPerBlock; cfg.stream = fab.streams[r];
          NCCL_OK_OR_EXIT(gpu::setDevice(fab.devOf[r]));
          // Programmatic launches (where supported) and early releases at
          // random: a kernel must read nothing an earlier one wrote before its wait.
          cfg.programmatic = pdl && rng.range(2) == 0;
          a.releaseEarly = (uint32_t)rng.range(2);
          // Only the last launch records the event waitAll() polls (an event
          // record between two kernels may keep the second from starting early).
          NCCL_OK_OR_EXIT(gpu::launchKernel(chunkKernel, cfg, args, at + k == nItems ? fab.events[r] : nullptr));
        }
        at += k;
      }
      const bool waited = fab.waitAll(30);
      if (guard.end() || !waited) {
        fprintf(stderr, "HANG: R=%d type %s (aborted through the abort flag)\n", R, kTypeNames[t]);
        hangs++;
        for (auto& c : cases) gStats[{t, c.coll}].fail++;
        for (int r = 0; r < R; r++) (void)gpu::hostFree(ringHost[r]);
        return 1;  // connection steps are now inconsistent: stop here
      }
      for (int r = 0; r < R; r++) {
        NCCL_OK_OR_EXIT(gpu::memcpy(ar[r].host.data(), ar[r].dev, ar[r].host.size()));
        (void)gpu::hostFree(ringHost[r]);
      }
      // Stray writes: every arena byte outside the cases' receive buffers
      // (inputs, scalars, the random gaps around each buffer) is unchanged.
      for (int r = 0; r < R; r++) {
        std::vector<uint8_t> writable(ar[r].host.size(), 0);
        for (auto& c : cases) std::fill(writable.begin() + c.recvOff[r], writable.begin() + c.recvOff[r] + c.recvBytes[r], 1);
        for (size_t i = 0; i < writable.size(); i++)
          if (!writable[i] && ar[r].host[i] != ar[r].initial[i]) {
            const Case* near = nullptr;
            for (auto& c : cases) if (c.recvOff[r] <= i && (!near || c.recvOff[r] > near->recvOff[r])) near = &c;
            if (near) fail(*near, R, r, "stray write after recvbuff (or into an input)", (int64_t)(i - near->recvOff[r]), 0, 0);
            gStats[{t, near ? near->coll : 0}].fail++;
            break;
          }
      }
      // Verify.
      for (auto& c : cases) {
        bool ok = true;
        const int64_t n = c.count;
        auto in = [&](int r) { return ar[r].initial.data() + c.sendOff[r]; };
        auto out = [&](int r) { return ar[r].host.data() + c.recvOff[r]; };
        const int es2 = kTypeSize[t];
        double gv = 0, wv = 0;
        std::vector<const uint8_t*> ptrs(R);
        switch (c.coll) {
          case kCollP2p:
            for (int r = 0; r < R && ok; r++) {
              int from = (r - c.shift + R) % R;
              if (memcmp(out(r), in(from), (size_t)n) != 0) { fail(c, R, r, "p2p data", 0, 0, 0); ok = false; }
            }
            break;
          case kCollAllReduce:
          case kCollReduce:
            for (int r = 0; r < R && ok; r++) {
              if (c.coll == kCollReduce && r != c.root) {
                if (memcmp(out(r), ar[r].initial.data() + c.recvOff[r], c.recvBytes[r]) != 0) { fail(c, R, r, "non-root recvbuff modified", 0, 0, 0); ok = false; }
                continue;
              }
              for (int64_t i = 0; i < n && ok; i++) {
                for (int q = 0; q < R; q++) ptrs[q] = in(q) + i * es2;
                if (!checkReduced(c, R, ptrs, out(r) + i * es2, &gv, &wv)) { fail(c, R, r, "value", i, gv, wv); ok = false; }
              }
            }
            break;
          case kCollReduceScatter:
            for (int r = 0; r < R && ok; r++)
              for (int64_t i = 0; i < n && ok; i++) {
                for (int q = 0; q < R; q++) ptrs[q] = in(q) + ((int64_t)r * n + i) * es2;
                if (!checkReduced(c, R, ptrs, out(r) + i * es2, &gv, &wv)) { fail(c, R, r, "value", i, gv, wv); ok = false; }
              }
            break;
          case kCollBroadcast:
            for (int r = 0; r < R && ok; r++)
              if (memcmp(out(r), in(c.root), (size_t)n * es2) != 0) { fail(c, R, r, "broadcast data", 0, 0, 0); ok = false; }
            break;
          case kCollAllGather:
            for (int r = 0; r < R && ok; r++)
              for (int q = 0; q < R && ok; q++)
                if (memcmp(out(r) + (size_t)q * n * es2, in(q), (size_t)n * es2) != 0) { fail(c, R, r, "allgather block", q, 0, 0); ok = false; }
            break;
        }
        Stats& s = gStats[{t, c.coll}];
        if (ok) s.pass++; else s.fail++;
      }
      // A line per stage, flushed: a run stopped from outside shows how far it got.
      printf("  R=%d %-5s %5zu items %6.1f s\n", R, kTypeNames[t], nItems,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - tType).count());
      fflush(stdout);
    }
  }

  // Abort: a rank waiting for a peer that never sends must exit on the flag.
  bool abortOk = true;
  {
    Fabric fab;
    fab.init(2, 1, rng);
    uint8_t* buf = (uint8_t*)fab.devAlloc(0, 4096);
    KernelArgs a;
    memset(&a, 0, sizeof(a));
    a.comm = fab.dComm[0];
    a.channels = fab.dChannels[0];
    a.nWorks = 1;
    Work& w = a.inlineWorks[0];
    w.coll = kCollP2p; w.proto = kProtoSimple; w.channelLo = 0; w.channelHi = kGrid - 1;
    w.p.sendPeer = -1; w.p.recvPeer = 1; w.p.sliceBytes = 1024; w.p.recvBuff = buf; w.p.recvBytes = 4096;
    void* args[] = {&a};
    gpu::LaunchConfig cfg;
    cfg.gridX = kGrid; cfg.blockX = kThreadsPerBlock; cfg.stream = fab.streams[0];
    NCCL_OK_OR_EXIT(gpu::launchKernel(p2pKernel(), cfg, args, fab.events[0]));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    abortOk = gpu::eventQuery(fab.events[0]) == ncclInProgress;  // must still be waiting
    *fab.abortHost = 1;
    auto t0 = std::chrono::steady_clock::now();
    while (gpu::eventQuery(fab.events[0]) == ncclInProgress) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(5)) { abortOk = false; break; }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (!abortOk) { fprintf(stderr, "FAIL abort: kernel did not wait or did not exit on the abort flag\n"); exit(1); }
  }

  // Summary: pass/total per datatype x collective.
  printf("%-8s", "type");
  for (int c = 0; c < kNumColls; c++) printf(" %11s", kCollNames[c]);
  printf("\n");
  int totalFail = 0, totalPass = 0;
  for (int t : types) {
    printf("%-8s", kTypeNames[t]);
    for (int c = 0; c < kNumColls; c++) {
      auto it = gStats.find({t, c});
      if (it == gStats.end()) { printf(" %11s", "-"); continue; }
      char cell[32];
      snprintf(cell, sizeof cell, "%d/%d%s", it->second.pass, it->second.pass + it->second.fail, it->second.fail ? "!" : "");
      printf(" %11s", cell);
      totalFail += it->second.fail;
      totalPass += it->second.pass;
    }
    printf("\n");
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - tStart).count();
  printf("%d cases passed, %d failed, abort test %s, %.1f s (seed %llu)\n", totalPass, totalFail,
         abortOk ? "ok" : "FAILED", secs, (unsigned long long)seed);
  if (totalFail || hangs || !abortOk) return 1;
  return rankSetsRun == 0 ? 77 : 0;
}
