// GIN through the proxy thread (gin.h). The proxy thread's poller moves
// every put through a pipeline per peer; nothing on it waits for a copy:
//
//  send side, per context and peer queue, in queue order: a descriptor is
//  whole when bit 0 of its eight words is set (NCCL 2.28.9's proxy GIN
//  format, include/nccl_device/gin.h). Its payload is cut into pieces of one
//  staging slot of the peer's link each (a 64-byte GinWire header, then up
//  to stepBytes payload bytes: a power-of-two put fills whole slots; the
//  signal rides on the last piece).
//  For each piece the header is written and the payload copy from the
//  source window is started on the poller's outbound copy stream, whose
//  progress the poller reads from a polled word (copy_progress.h); the
//  piece joins the peer's ordered list of pieces in
//  flight, and the next piece (of this put or the next) is started at once,
//  while earlier ones are still being copied or sent. Up to kConnSteps
//  slots per peer are in flight between copy and network.
//  A piece is published to the link (its persistent proxy send op puts it
//  on the wire) when its copy has ended, strictly in list
//  order; when a put's last piece is published its source is consumed: the
//  local counter (CounterInc) is incremented and the consumer index
//  advanced (flush waits for it).
//  A put to this rank itself is one device copy on the same stream; its
//  signal is added when the copy completed, in the same list order.
//  A put to a rank of this rank's LSA team (its window mapped here) is one
//  device copy straight into the peer's window, on the same stream; when it
//  completed, a header-only slot carries the signal over the link, behind
//  every earlier piece to that peer (UNICCL_GIN_LSA_DIRECT=0: as for any
//  peer).
//
//  receive side, per peer link, in slot order: each arrived slot's payload
//  copy into the destination window is started on the inbound copy stream;
//  when the copy ended (in slot order) the
//  signal of an operation's last slot is added (release) into the
//  context's signal array and the slot handed back to the link. One link
//  per peer, slots in order, signals applied only behind completed copies:
//  a signal is never visible before the payloads of the earlier puts to
//  that peer, nor before its own.
//
// A descriptor naming an unknown window, bytes outside it, or a signal or
// counter out of range is a program error: WARN, the communicator is aborted
// with ncclInvalidUsage as its asynchronous error (kernels waiting on it end).
#include "common/device_api/gin.h"

#include <chrono>
#include <cstddef>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "common/check.h"
#include "common/core/async_error.h"
#include "common/core/comm.h"
#include "common/core/comm_lsa.h"
#include "common/core/comm_transport.h"
#include "common/device_api/copy_progress.h"
#include "common/device_guard.h"
#include "common/gpu.h"
#include "common/proxy/proxy.h"
#include "common/symmetric/symmetric.h"
#include "common/transport/net_link.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl {

namespace {

constexpr uint32_t kQueueSize = 256;            // descriptors per peer queue (a power of two)
constexpr int kMaxSelfInFlight = 64;           // copies of puts to this rank not yet completed
constexpr uint32_t kWireMagic = 0x47494e31;     // "GIN1"
constexpr int kMaxPerPass = 32;                 // descriptors / slots per queue per pass (fairness)

// kWireDirect: the payload was copied into the destination window through
// the LSA mapping before this header was sent; the slot carries none.
enum WireFlags : uint32_t { kWireInline = 1, kWireLast = 2, kWireSignal = 4, kWireDirect = 8 };

// What precedes a slot's payload on the wire.
struct GinWire {
  uint32_t magic;
  uint32_t flags;
  uint32_t context;
  uint32_t signalId;
  uint64_t dstWin;
  uint64_t dstOff;     // of this slot's payload
  uint64_t bytes;      // payload bytes in this slot (inline: the value's size)
  uint64_t signalValue;
  uint64_t inlineValue;
  uint64_t pad;
};
static_assert(sizeof(GinWire) == 64, "GIN wire header: 64 bytes");

struct Descriptor {
  uint32_t op;
  uint64_t size, srcOff, srcWin, dstOff, dstWin, inlineValue, signalValue;
  uint32_t counterId, signalId;
};

void decode(const uint64_t* q, Descriptor* d) {
  d->op = (uint32_t)((q[0] >> 1) & 0x3f);
  d->size = q[0] >> 7;
  d->srcOff = q[1] >> 1;
  d->srcWin = q[2] >> 1;
  d->inlineValue = ((q[1] >> 8) & 0xffffffffull) | (((q[1] >> 40) & 0xffff) << 32) | (((q[2] >> 8) & 0xffff) << 48);
  d->dstOff = q[3] >> 1;
  d->dstWin = q[4] >> 1;
  d->counterId = (uint32_t)((q[5] >> 8) & 0xffff);
  d->signalId = (uint32_t)((q[5] >> 24) & 0xffff);
  d->signalValue = ((q[5] >> 40) & 0xffff) | (((q[6] >> 8) & 0xffff) << 16) | ((q[6] >> 24) << 32);
}

}  // namespace

struct GinContextMem {
  void* host = nullptr;   // hostAllocMapped block
  void* dev = nullptr;
  ncclGinProxyGpuCtx_t* ctxHost = nullptr;
  uint64_t* queues = nullptr;   // host view, [nRanks][kQueueSize][8]
  uint32_t* pis = nullptr;
  uint32_t* cis = nullptr;
  uint64_t* counters = nullptr;
  uint64_t* signals = nullptr;
  std::vector<uint64_t> sent;   // per peer: payload bytes of the head descriptor already started
  std::vector<uint32_t> next;   // per peer: the next descriptor to read (cis trails it until its copies end)
};

// A piece of a peer's send pipeline, completed in list order.
struct SendPiece {
  CopyTicket copy;           // the copy it waits for (none: not pending)
  int64_t step = -1;         // the link step to publish then (-1: a put to this rank, nothing to send)
  int64_t slotBytes = 0;
  int ctx = -1;              // >= 0: a descriptor's last piece: its source is consumed then,
  uint32_t ci = 0;           //   cis[peer] of context ctx becomes ci + 1
  int counter = -1;          //   and this counter is incremented
  bool signal = false;       // a put to this rank: its signal, added then
  uint32_t signalId = 0;
  uint64_t signalValue = 0;
  uint64_t inlineValue = 0;  // a putValue to this rank copies from here (deque elements do not move)
};

// An arrived slot whose payload is being copied into its window.
struct RecvPiece {
  CopyTicket copy;
  uint64_t step = 0;
  bool signal = false;
  uint32_t context = 0, signalId = 0;
  uint64_t signalValue = 0;
};

class GinState {
 public:
  ncclComm* comm = nullptr;
  GinConfig cfg;
  std::vector<GinContextMem> ctx;
  std::vector<std::unique_ptr<NetLink>> links;   // [nRanks], none for self
  std::vector<uint64_t> sendStep, recvStep;   // next link step to start / to take
  std::vector<std::deque<SendPiece>> sending;  // [peer] pieces in flight, in order
  std::vector<std::deque<RecvPiece>> landing;  // [peer] arrived slots being copied, in order
  std::vector<int> lsaIndex;                   // [peer] its place in this rank's LSA team; -1: not mapped
  CopyProgress copyOut;                        // sources into staging, to this rank, to LSA peers
  CopyProgress copyIn;                         // staging into windows
  size_t stepBytes = 0;   // payload bytes of one staging slot (the slot holds a GinWire header more)
  // UNICCL_GIN_RECV_PACE_US (tests): one slot per peer at most this often.
  std::chrono::microseconds pace{0};
  std::vector<std::chrono::steady_clock::time_point> lastApplied;
  uint64_t* shadowsDev = nullptr;
  ProxyRef proxy;
  ProxyPoller poller;
  bool polling = false;
  bool failed = false;

  static bool pollThunk(void* arg) { return static_cast<GinState*>(arg)->poll(); }
  static void failThunk(void* arg, ncclResult_t why) { static_cast<GinState*>(arg)->fail(why); }
  bool poll();
  bool drainQueue(int c, int peer, int budget);
  bool completeSends(int peer);
  bool receive(int peer);
  bool copyAsync(CopyProgress& stream, void* dst, const void* src, size_t bytes, CopyTicket* t);
  bool copyEnded(CopyProgress& stream, CopyTicket* t, bool* ended);
  void fail(ncclResult_t why);
  bool windowSpan(uint64_t win, uint64_t off, uint64_t bytes, char** out, const char* what);
  void addSignal(int c, uint32_t id, uint64_t v);
};

void GinState::fail(ncclResult_t why) {
  failed = true;
  failCommAsync(comm, why);
}

bool GinState::windowSpan(uint64_t win, uint64_t off, uint64_t bytes, char** out, const char* what) {
  char* base = nullptr;
  size_t size = 0;
  if (!ginWindowMemory(comm->symmetric, win, &base, &size)) {
    WARN("Rank %d: GIN %s names window %llu, which is not registered on this rank; aborting the communicator",
         comm->rank, what, (unsigned long long)win);
    return false;
  }
  if (off > size || bytes > size - off) {
    WARN("Rank %d: GIN %s of %llu bytes at offset %llu is outside its window (%zu bytes); aborting the communicator",
         comm->rank, what, (unsigned long long)bytes, (unsigned long long)off, size);
    return false;
  }
  *out = base + off;
  return true;
}

void GinState::addSignal(int c, uint32_t id, uint64_t v) {
  __atomic_fetch_add(&ctx[c].signals[id], v, __ATOMIC_RELEASE);
}

// Starts a copy on the stream. False (communicator failed) when the runtime
// refused.
bool GinState::copyAsync(CopyProgress& stream, void* dst, const void* src, size_t bytes, CopyTicket* t) {
  if (stream.copy(dst, src, bytes, t) != ncclSuccess) {
    fail(ncclUnhandledCudaError);
    return false;
  }
  return true;
}

// *ended: the copy *t names has ended (or there is none), and *t is free
// again. False (communicator failed) when the runtime reports a failure.
bool GinState::copyEnded(CopyProgress& stream, CopyTicket* t, bool* ended) {
  const ncclResult_t r = stream.done(*t);
  *ended = r == ncclSuccess;
  if (r == ncclInProgress) return true;
  if (r != ncclSuccess) {
    fail(ncclUnhandledCudaError);
    return false;
  }
  stream.release(t);
  return true;
}

// Takes the slots peer sent (in order): starts their copies into the
// windows, and completes those whose copies ended (signal, slot back to the
// link). True when something moved.
bool GinState::receive(int peer) {
  NetLink::HostChannel h = links[peer]->hostChannel(0);
  std::deque<RecvPiece>& q = landing[peer];
  bool moved = false;
  for (int n = 0; n < kMaxPerPass && !failed && connFifoReady(h.recvFifo, recvStep[peer]); n++) {
    if (pace.count() > 0) {
      const auto now = std::chrono::steady_clock::now();
      if (n > 0 || now - lastApplied[peer] < pace) break;
      lastApplied[peer] = now;
    }
    const uint64_t step = recvStep[peer];
    const int64_t size = connLoadSize(h.recvFifo->slots[step % kConnSteps]);
    char* slot = h.recvStaging + (step % kConnSteps) * h.stepBytes;
    GinWire w;
    memcpy(&w, slot, sizeof(w));
    const bool direct = (w.flags & kWireDirect) != 0;
    if (size < (int64_t)sizeof(w) || w.magic != kWireMagic || w.context >= (uint32_t)cfg.contexts ||
        ((w.flags & kWireInline) ? w.bytes > 8 || direct
                                 : (uint64_t)size != sizeof(w) + (direct ? 0 : w.bytes))) {
      WARN("Rank %d: malformed GIN message from rank %d (%ld bytes); aborting the communicator", comm->rank, peer,
           (long)size);
      fail(ncclInternalError);
      return moved;
    }
    if ((w.flags & kWireLast) && (w.flags & kWireSignal) && w.signalId >= (uint32_t)cfg.signals) {
      WARN("Rank %d: GIN signal %u from rank %d: this device communicator has %d signals; aborting the "
           "communicator", comm->rank, w.signalId, peer, cfg.signals);
      fail(ncclInvalidUsage);
      return moved;
    }
    RecvPiece piece;
    piece.step = step;
    piece.signal = (w.flags & kWireLast) && (w.flags & kWireSignal);
    piece.context = w.context;
    piece.signalId = w.signalId;
    piece.signalValue = w.signalValue;
    if (w.bytes > 0) {
      // A direct put already wrote the window through the peer's mapping:
      // its span is still checked here, where the window's size is known.
      char* dst = nullptr;
      if (!windowSpan(w.dstWin, w.dstOff, w.bytes, &dst, direct ? "put from an LSA peer" : "put from a peer")) {
        fail(ncclInvalidUsage);
        return moved;
      }
      const char* src = (w.flags & kWireInline) ? slot + offsetof(GinWire, inlineValue) : slot + sizeof(w);
      if (!direct && !copyAsync(copyIn, dst, src, w.bytes, &piece.copy)) return moved;
    }
    q.push_back(piece);
    recvStep[peer] = step + 1;
    moved = true;
  }
  while (!q.empty() && !failed) {
    RecvPiece& piece = q.front();
    bool ended = false;
    if (!copyEnded(copyIn, &piece.copy, &ended)) return moved;
    if (!ended) break;
    if (piece.signal) addSignal((int)piece.context, piece.signalId, piece.signalValue);
    connFifoFree(h.recvFifo, piece.step);
    q.pop_front();
    moved = true;
  }
  return moved;
}

// Publishes the peer's pieces whose copies ended, in order, and consumes
// their descriptors' sources. True when one completed.
bool GinState::completeSends(int peer) {
  std::deque<SendPiece>& q = sending[peer];
  bool moved = false;
  while (!q.empty() && !failed) {
    SendPiece& p = q.front();
    bool ended = false;
    if (!copyEnded(copyOut, &p.copy, &ended)) return moved;
    if (!ended) break;
    if (p.step >= 0) connFifoPublish(links[peer]->hostChannel(0).sendFifo, (uint64_t)p.step, p.slotBytes);
    if (p.signal) addSignal(p.ctx, p.signalId, p.signalValue);
    if (p.ctx >= 0) {
      GinContextMem& m = ctx[p.ctx];
      if (p.counter >= 0) __atomic_fetch_add(&m.counters[p.counter], 1, __ATOMIC_RELEASE);
      __atomic_store_n(&m.cis[peer], p.ci + 1, __ATOMIC_RELEASE);
    }
    q.pop_front();
    moved = true;
  }
  return moved;
}

// Starts context c's descriptors for peer (reads them, starts their copies,
// queues their pieces), at most `budget` pieces. True when one started;
// stops where the link has no free slot or too many copies to this rank are
// in flight. A descriptor left half started goes on at the next call.
bool GinState::drainQueue(int c, int peer, int budget) {
  GinContextMem& m = ctx[c];
  std::deque<SendPiece>& pieces = sending[peer];
  bool moved = false;
  for (int n = 0; n < kMaxPerPass && !failed && budget > 0; n++) {
    const uint32_t idx = m.next[peer];
    uint64_t* q = m.queues + ((size_t)peer * kQueueSize + (idx & (kQueueSize - 1))) * 8;
    // Each word carries its own valid bit (bit 0): the descriptor is whole
    // when all eight are set. Acquire loads, so nothing read after them is
    // older than the words.
    uint64_t words[8];
    for (int i = 0; i < 8; i++) {
      words[i] = __atomic_load_n(&q[i], __ATOMIC_ACQUIRE);
      if ((words[i] & 1) == 0) return moved;   // not (whole) yet
    }
    Descriptor d;
    decode(words, &d);
    const bool isInline = (d.op & UNICCL_GIN_OP_INLINE) != 0;
    const bool hasSignal = (d.op & (UNICCL_GIN_OP_SIGNAL_INC | UNICCL_GIN_OP_SIGNAL_ADD)) != 0;
    const bool hasCounter = (d.op & UNICCL_GIN_OP_COUNTER) != 0;
    if ((d.op & UNICCL_GIN_OP_PUT) == 0 || (isInline && d.size > 8) || (hasSignal && d.signalId >= (uint32_t)cfg.signals) ||
        (hasCounter && d.counterId >= (uint32_t)cfg.counters)) {
      WARN("Rank %d: GIN descriptor to rank %d, context %d: op 0x%x, %llu bytes, signal %u (of %d), counter %u (of %d) "
           "is invalid; aborting the communicator", comm->rank, peer, c, d.op, (unsigned long long)d.size, d.signalId,
           cfg.signals, d.counterId, cfg.counters);
      fail(ncclInvalidUsage);
      return moved;
    }
    char* src = nullptr;
    if (!isInline && d.size > 0 && !windowSpan(d.srcWin, d.srcOff, d.size, &src, "put source")) {
      fail(ncclInvalidUsage);
      return moved;
    }
    const uint64_t signalValue = (d.op & UNICCL_GIN_OP_SIGNAL_INC) ? 1 : d.signalValue;
    // The piece that completes the descriptor carries its consumption.
    auto finish = [&](SendPiece& p) {
      p.ctx = c;
      p.ci = idx;
      p.counter = hasCounter ? (int)d.counterId : -1;
    };
    char* peerDst = nullptr;
    size_t peerBytes = 0;
    const bool direct = peer != comm->rank && !isInline && d.size > 0 && lsaIndex[peer] >= 0 &&
                        ginWindowPeerMemory(comm->symmetric, d.dstWin, lsaIndex[peer], &peerDst, &peerBytes) &&
                        d.dstOff <= peerBytes && d.size <= peerBytes - d.dstOff;
    if (peer == comm->rank) {
      // To this rank: one copy; the signal is added when it ended, in order.
      if (pieces.size() >= (size_t)kMaxSelfInFlight) return moved;
      char* dst = nullptr;
      if (d.size > 0 && !windowSpan(d.dstWin, d.dstOff, d.size, &dst, "put to this rank")) {
        fail(ncclInvalidUsage);
        return moved;
      }
      SendPiece& p = pieces.emplace_back();
      finish(p);
      p.signal = hasSignal;
      p.signalId = d.signalId;
      p.signalValue = signalValue;
      p.inlineValue = d.inlineValue;
      if (d.size > 0 &&
          !copyAsync(copyOut, dst, isInline ? static_cast<const void*>(&p.inlineValue) : src, d.size, &p.copy))
        return moved;
      budget--;
    } else {
      NetLink::HostChannel h = links[peer]->hostChannel(0);
      const uint64_t payloadMax = h.stepBytes - sizeof(GinWire);
      uint64_t& sent = m.sent[peer];
      do {
        if (budget <= 0) return moved;
        if (!connFifoCanFill(h.sendFifo, sendStep[peer])) return moved;   // the link's slots are all in flight
        const uint64_t step = sendStep[peer];
        char* slot = h.sendStaging + (step % kConnSteps) * h.stepBytes;
        const uint64_t chunk = isInline || direct ? 0 : (d.size - sent < payloadMax ? d.size - sent : payloadMax);
        const bool last = isInline || direct || sent + chunk == d.size;
        GinWire w;
        memset(&w, 0, sizeof(w));
        w.magic = kWireMagic;
        w.context = (uint32_t)c;
        w.dstWin = d.dstWin;
        w.dstOff = d.dstOff + sent;
        w.bytes = isInline || direct ? d.size : chunk;
        w.inlineValue = d.inlineValue;
        w.flags = (isInline ? kWireInline : 0u) | (direct ? kWireDirect : 0u) | (last ? kWireLast : 0u) |
                  (hasSignal ? kWireSignal : 0u);
        w.signalId = d.signalId;
        w.signalValue = signalValue;
        memcpy(slot, &w, sizeof(w));
        SendPiece& p = pieces.emplace_back();
        p.step = (int64_t)step;
        p.slotBytes = (int64_t)(sizeof(w) + chunk);
        if (last) finish(p);
        sendStep[peer] = step + 1;
        if (direct && !copyAsync(copyOut, peerDst + d.dstOff, src, d.size, &p.copy)) return moved;
        if (chunk > 0 && !copyAsync(copyOut, slot + sizeof(w), src + sent, chunk, &p.copy)) return moved;
        sent += chunk;
        budget--;
        moved = true;
      } while (!isInline && !direct && sent < d.size);
      sent = 0;
    }
    // Every piece started: the words are ours (the kernel reuses the slot
    // only once cis passed it, after the copies), the next descriptor is read.
    for (int i = 0; i < 8; i++) __atomic_store_n(&q[i], 0, __ATOMIC_RELAXED);
    m.next[peer] = idx + 1;
    moved = true;
  }
  return moved;
}

bool GinState::poll() {
  if (failed) return false;
  if (comm->abortFlagHost != nullptr && __atomic_load_n(comm->abortFlagHost, __ATOMIC_ACQUIRE) != 0) return false;
  if (gpu::setDevice(comm->gpuDev) != ncclSuccess) return false;
  bool moved = false;
  for (int p = 0; p < comm->nRanks; p++)
    if (links[p] && receive(p)) moved = true;
  // One piece per peer at a time, round-robin: the copies on the one
  // outbound stream end in the order they were started, so every peer's
  // link gets its first piece after one piece per peer, not after all the
  // pieces of the peers before it (four ranks on one H200 over sockets,
  // 4 MiB to each of three peers: 3.0-3.3 ms, against 3.4-3.6 ms peer by
  // peer).
  for (int c = 0; c < cfg.contexts; c++) {
    for (int round = 0; round < kMaxPerPass; round++) {
      bool started = false;
      for (int p = 0; p < comm->nRanks; p++)
        if (drainQueue(c, p, 1)) started = true;
      if (!started) break;
      moved = true;
    }
  }
  // Copies in flight are not counted as movement: they end within tens of
  // microseconds, well inside the proxy thread's polling back-off (spin,
  // then yield for a millisecond), and counting them would keep a core busy.
  for (int p = 0; p < comm->nRanks; p++)
    if (completeSends(p)) moved = true;
  return moved;
}

ncclResult_t ginCreate(ncclComm* comm, const GinConfig& cfg, ncclDevComm_t* d, GinState** out) {
  *out = nullptr;
  auto g = std::make_unique<GinState>();
  g->comm = comm;
  g->cfg = cfg;
  const int n = comm->nRanks;
  g->links.resize(n);
  g->sendStep.assign(n, 0);
  g->recvStep.assign(n, 0);
  g->sending.resize(n);
  g->landing.resize(n);
  g->lsaIndex.assign(n, -1);
  if (knobInt(Knob::UNICCL_GIN_LSA_DIRECT) != 0) {
    const LsaPlace lsa = lsaPlace(comm);
    for (int p = 0; p < n && lsa.size > 1; p++)
      if (p != comm->rank && p / lsa.size == comm->rank / lsa.size) g->lsaIndex[p] = p % lsa.size;
  }
  const int64_t stepKnob = knobInt(Knob::UNICCL_GIN_STEP_BYTES);
  if (stepKnob < 4096 || stepKnob > (int64_t(64) << 20)) {
    WARN("ncclDevCommCreate: UNICCL_GIN_STEP_BYTES=%lld is outside 4096..67108864; using 524288", (long long)stepKnob);
    g->stepBytes = 512 << 10;
  } else {
    g->stepBytes = (size_t)stepKnob / 64 * 64;
  }
  g->pace = std::chrono::microseconds(knobInt(Knob::UNICCL_GIN_RECV_PACE_US));
  g->lastApplied.assign(n, std::chrono::steady_clock::time_point{});
  ncclResult_t res = ncclSuccess;
  // Links: listen to every peer, exchange the handles, connect, accept.
  std::vector<char> handles((size_t)n * n * NetLink::kHandleBytes, 0);
  const TransportComm tc = transportComm(comm);
  for (int p = 0; p < n && res == ncclSuccess; p++) {
    if (p == comm->rank) continue;
    g->links[p] = std::make_unique<NetLink>();
    g->links[p]->setProxyGroup(g.get());
    std::vector<char> h;
    res = g->links[p]->listen(tc, p, 1, g->stepBytes + sizeof(GinWire), &h);
    if (res == ncclSuccess)
      memcpy(handles.data() + ((size_t)comm->rank * n + p) * NetLink::kHandleBytes, h.data(), NetLink::kHandleBytes);
  }
  // Every rank learns whether every rank could listen before anyone connects.
  std::vector<int32_t> st(n, 0);
  st[comm->rank] = (int32_t)res;
  UCHECK(comm->bootstrap->allGather(st.data(), sizeof(int32_t)));
  for (int r = 0; r < n; r++) {
    if (st[r] == ncclSuccess) continue;
    WARN("ncclDevCommCreate: rank %d cannot set up GIN over the network (error %d): no device communicator with GIN",
         r, st[r]);
    ginDestroy(g.release());
    return ncclInvalidUsage;
  }
  UCHECK(comm->bootstrap->allGather(handles.data(), (size_t)n * NetLink::kHandleBytes));
  std::vector<NetLink*> handshakes;
  for (int p = 0; p < n && res == ncclSuccess; p++) {
    if (p == comm->rank) continue;
    std::vector<char> h(handles.data() + ((size_t)p * n + comm->rank) * NetLink::kHandleBytes,
                        handles.data() + ((size_t)p * n + comm->rank + 1) * NetLink::kHandleBytes);
    res = g->links[p]->setPeerHandles(h);
    handshakes.push_back(g->links[p].get());
  }
  if (res == ncclSuccess) res = NetLink::connectAll(handshakes);
  for (int p = 0; p < n && res == ncclSuccess; p++)
    if (p != comm->rank) res = g->links[p]->start(tc);

  // Context memory: [ctx struct | queues | pis | cis | counters | signals].
  const size_t ctxBytes = 128;
  const size_t qBytes = (size_t)n * kQueueSize * 64;
  const size_t idxBytes = ((size_t)n * 4 + 127) / 128 * 128;
  const size_t cntBytes = ((size_t)(cfg.counters > 0 ? cfg.counters : 1) * 8 + 127) / 128 * 128;
  const size_t sigBytes = ((size_t)(cfg.signals > 0 ? cfg.signals : 1) * 8 + 127) / 128 * 128;
  const size_t total = ctxBytes + qBytes + 2 * idxBytes + cntBytes + sigBytes;
  g->ctx.resize(cfg.contexts);
  for (int c = 0; c < cfg.contexts && res == ncclSuccess; c++) {
    GinContextMem& m = g->ctx[c];
    res = gpu::hostAllocMapped(&m.host, &m.dev, total);
    if (res != ncclSuccess) break;
    memset(m.host, 0, total);
    char* hb = static_cast<char*>(m.host);
    char* db = static_cast<char*>(m.dev);
    size_t off = ctxBytes;
    auto carve = [&](size_t bytes, char** hp, char** dp) {
      *hp = hb + off;
      *dp = db + off;
      off += bytes;
    };
    char *hq, *dq, *hpi, *dpi, *hci, *dci, *hcn, *dcn, *hsg, *dsg;
    carve(qBytes, &hq, &dq);
    carve(idxBytes, &hpi, &dpi);
    carve(idxBytes, &hci, &dci);
    carve(cntBytes, &hcn, &dcn);
    carve(sigBytes, &hsg, &dsg);
    m.ctxHost = reinterpret_cast<ncclGinProxyGpuCtx_t*>(hb);
    m.queues = reinterpret_cast<uint64_t*>(hq);
    m.pis = reinterpret_cast<uint32_t*>(hpi);
    m.cis = reinterpret_cast<uint32_t*>(hci);
    m.counters = reinterpret_cast<uint64_t*>(hcn);
    m.signals = reinterpret_cast<uint64_t*>(hsg);
    m.sent.assign(n, 0);
    m.next.assign(n, 0);
    m.ctxHost->nranks = n;
    m.ctxHost->queueSize = kQueueSize;
    m.ctxHost->queues = reinterpret_cast<ncclGinProxyGfd_t*>(dq);
    m.ctxHost->pis = reinterpret_cast<uint32_t*>(dpi);
    m.ctxHost->cis = reinterpret_cast<uint32_t*>(dci);
    m.ctxHost->counters = reinterpret_cast<uint64_t*>(dcn);
    m.ctxHost->signals = reinterpret_cast<uint64_t*>(dsg);
    m.ctxHost->abortFlag = comm->abortFlagDev;
  }
  const size_t shadowBytes = (size_t)cfg.contexts * (cfg.signals > 0 ? cfg.signals : 1) * sizeof(uint64_t);
  if (res == ncclSuccess) res = gpu::deviceAlloc(reinterpret_cast<void**>(&g->shadowsDev), shadowBytes);
  if (res == ncclSuccess) res = gpu::memset(g->shadowsDev, 0, shadowBytes);
  DeviceGuard device;   // the copy streams belong to the communicator's device
  if (res == ncclSuccess) res = device.use(comm->gpuDev);
  if (res == ncclSuccess) res = g->copyOut.init();
  if (res == ncclSuccess) res = g->copyIn.init();
  if (res == ncclSuccess) res = ProxyRef::acquire(&g->proxy, g.get());
  if (res == ncclSuccess) {
    g->poller.poll = &GinState::pollThunk;
    g->poller.fail = &GinState::failThunk;
    g->poller.arg = g.get();
    res = g->proxy.addPoller(&g->poller);
    g->polling = res == ncclSuccess;
  }
  if (res != ncclSuccess) {
    ginDestroy(g.release());
    return res;
  }
  d->ginContextCount = (uint8_t)cfg.contexts;
  for (int c = 0; c < NCCL_GIN_MAX_CONTEXTS; c++) {
    d->ginTypes[c] = c < cfg.contexts ? (uint8_t)NCCL_NET_DEVICE_GIN_PROXY : 0;
    d->ginHandles[c] = c < cfg.contexts ? g->ctx[c].dev : nullptr;
  }
  d->ginSignalBase = 0;
  d->ginSignalCount = cfg.signals;
  d->ginCounterBase = 0;
  d->ginCounterCount = cfg.counters;
  d->ginSignalShadows = g->shadowsDev;
  int direct = 0;
  for (int p = 0; p < n; p++) direct += g->lsaIndex[p] >= 0;
  INFO(kSubsysInit | kSubsysNet, "Rank %d: GIN over the proxy: %d contexts, %d signals, %d counters, %d peers via NET "
       "(%zu-byte slots), %d of them LSA peers written through their mapped windows", comm->rank, cfg.contexts,
       cfg.signals, cfg.counters, n - 1, g->stepBytes, direct);
  *out = g.release();
  return ncclSuccess;
}

void ginDestroy(GinState* g) {
  if (g == nullptr) return;
  if (g->polling) g->proxy.removePoller(&g->poller);   // the proxy thread no longer reads anything below
  // Copies still in flight read and write the links' staging: they end
  // first.
  g->copyOut.destroy();
  g->copyIn.destroy();
  for (auto& l : g->links)
    if (l) l->stop();
  g->links.clear();
  const bool aborted = g->comm->abortFlagHost != nullptr && *g->comm->abortFlagHost != 0;
  // After an abort a kernel may still be in a wait on this memory (it leaves
  // at its next abort check): leave it allocated rather than free it under it.
  if (!aborted) {
    for (GinContextMem& m : g->ctx)
      if (m.host != nullptr) (void)gpu::hostFree(m.host);
    if (g->shadowsDev != nullptr) (void)gpu::deviceFree(g->shadowsDev);
  }
  g->proxy.release();
  delete g;
}

}  // namespace uniccl
