// GIN through the proxy thread (gin.h). The proxy thread's poller:
//
//  send side, per context and peer queue, in queue order: a descriptor is
//  whole when bit 0 of its eight words is set (NCCL 2.28.9's proxy GIN
//  format, include/nccl_device/gin.h). Its payload is copied from the source
//  window into the peer link's send staging slots (a 64-byte GinWire header,
//  then up to stepBytes - 64 payload bytes per slot; a put larger than that
//  takes several slots, the signal rides on the last). When the last slot is
//  filled the source is consumed: the local counter (CounterInc) is
//  incremented, the descriptor zeroed and the consumer index advanced
//  (flush waits for it). A put to this rank itself is copied directly.
//  The link's persistent proxy send op (NetLink) carries the slots in order.
//
//  receive side, per peer link: each arrived slot's payload is copied into
//  the destination window (gpu::memcpy: synchronous, so it has landed), and
//  then, on the operation's last slot, the signal is added (release) into
//  the context's signal array. One link per peer, slots in order: a signal
//  is never visible before the payloads of the earlier puts to that peer.
//
// A descriptor naming an unknown window, bytes outside it, or a signal or
// counter out of range is a program error: WARN, the communicator is aborted
// with ncclInvalidUsage as its asynchronous error (kernels waiting on it end).
#include "common/device_api/gin.h"

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "common/check.h"
#include "common/core/async_error.h"
#include "common/core/comm.h"
#include "common/core/device_guard.h"
#include "common/gpu.h"
#include "common/proxy/proxy.h"
#include "common/symmetric/symmetric.h"
#include "common/transport/net_link.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl {

namespace {

constexpr uint32_t kQueueSize = 256;            // descriptors per peer queue (a power of two)
constexpr size_t kGinStepBytes = 64 * 1024;     // staging slot: header + payload
constexpr uint32_t kWireMagic = 0x47494e31;     // "GIN1"
constexpr int kMaxPerPass = 32;                 // descriptors / slots per queue per pass (fairness)

enum WireFlags : uint32_t { kWireInline = 1, kWireLast = 2, kWireSignal = 4 };

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
  std::vector<uint64_t> sent;   // per peer: payload bytes of the head descriptor already in slots
};

class GinState {
 public:
  ncclComm* comm = nullptr;
  GinConfig cfg;
  std::vector<GinContextMem> ctx;
  std::vector<std::unique_ptr<NetLink>> links;   // [nRanks], none for self
  std::vector<uint64_t> sendStep, recvStep;
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
  bool drainQueue(int c, int peer, bool* stalled);
  bool receive(int peer);
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
  if (!ginWindowMemory(comm, win, &base, &size)) {
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

// Applies the slots peer sent (in order). True when one was applied.
bool GinState::receive(int peer) {
  NetLink::HostChannel h = links[peer]->hostChannel(0);
  bool moved = false;
  for (int n = 0; n < kMaxPerPass && !failed && connFifoReady(h.recvFifo, recvStep[peer]); n++) {
    if (pace.count() > 0) {
      const auto now = std::chrono::steady_clock::now();
      if (n > 0 || now - lastApplied[peer] < pace) return moved;
      lastApplied[peer] = now;
    }
    const uint64_t step = recvStep[peer];
    const int64_t size = connLoadSize(h.recvFifo->slots[step % kConnSteps]);
    const char* slot = h.recvStaging + (step % kConnSteps) * h.stepBytes;
    GinWire w;
    memcpy(&w, slot, sizeof(w));
    if (size < (int64_t)sizeof(w) || w.magic != kWireMagic || w.context >= (uint32_t)cfg.contexts ||
        ((w.flags & kWireInline) ? w.bytes > 8 : (uint64_t)size != sizeof(w) + w.bytes)) {
      WARN("Rank %d: malformed GIN message from rank %d (%ld bytes); aborting the communicator", comm->rank, peer,
           (long)size);
      fail(ncclInternalError);
      return moved;
    }
    if (w.bytes > 0) {
      char* dst = nullptr;
      if (!windowSpan(w.dstWin, w.dstOff, w.bytes, &dst, "put from a peer")) {
        fail(ncclInvalidUsage);
        return moved;
      }
      const void* src = (w.flags & kWireInline) ? static_cast<const void*>(&w.inlineValue) : slot + sizeof(w);
      if (gpu::memcpy(dst, src, w.bytes) != ncclSuccess) {
        fail(ncclUnhandledCudaError);
        return moved;
      }
    }
    if ((w.flags & kWireLast) && (w.flags & kWireSignal)) {
      if (w.signalId >= (uint32_t)cfg.signals) {
        WARN("Rank %d: GIN signal %u from rank %d: this device communicator has %d signals; aborting the "
             "communicator", comm->rank, w.signalId, peer, cfg.signals);
        fail(ncclInvalidUsage);
        return moved;
      }
      addSignal((int)w.context, w.signalId, w.signalValue);
    }
    connFifoFree(h.recvFifo, step);
    recvStep[peer] = step + 1;
    moved = true;
  }
  return moved;
}

// Moves context c's descriptors for peer into slots (or applies them, for
// this rank). True when one moved; *stalled when the link had no free slot.
bool GinState::drainQueue(int c, int peer, bool* stalled) {
  GinContextMem& m = ctx[c];
  bool moved = false;
  for (int n = 0; n < kMaxPerPass && !failed; n++) {
    const uint32_t ci = __atomic_load_n(&m.cis[peer], __ATOMIC_RELAXED);
    uint64_t* q = m.queues + ((size_t)peer * kQueueSize + (ci & (kQueueSize - 1))) * 8;
    for (int i = 0; i < 8; i++)
      if ((__atomic_load_n(&q[i], __ATOMIC_RELAXED) & 1) == 0) return moved;   // not (whole) yet
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint64_t words[8];
    for (int i = 0; i < 8; i++) words[i] = __atomic_load_n(&q[i], __ATOMIC_RELAXED);
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
    if (peer == comm->rank) {
      // To this rank: copy and signal here, in queue order.
      if (d.size > 0) {
        char* dst = nullptr;
        if (!windowSpan(d.dstWin, d.dstOff, d.size, &dst, "put to this rank")) {
          fail(ncclInvalidUsage);
          return moved;
        }
        if (gpu::memcpy(dst, isInline ? static_cast<const void*>(&d.inlineValue) : src, d.size) != ncclSuccess) {
          fail(ncclUnhandledCudaError);
          return moved;
        }
      }
      if (hasSignal) addSignal(c, d.signalId, (d.op & UNICCL_GIN_OP_SIGNAL_INC) ? 1 : d.signalValue);
    } else {
      NetLink::HostChannel h = links[peer]->hostChannel(0);
      const uint64_t payloadMax = h.stepBytes - sizeof(GinWire);
      uint64_t& sent = m.sent[peer];
      do {
        if (!connFifoCanFill(h.sendFifo, sendStep[peer])) {
          *stalled = true;
          return moved;
        }
        const uint64_t step = sendStep[peer];
        char* slot = h.sendStaging + (step % kConnSteps) * h.stepBytes;
        const uint64_t chunk = isInline ? 0 : (d.size - sent < payloadMax ? d.size - sent : payloadMax);
        GinWire w;
        memset(&w, 0, sizeof(w));
        w.magic = kWireMagic;
        w.context = (uint32_t)c;
        w.dstWin = d.dstWin;
        w.dstOff = d.dstOff + sent;
        w.bytes = isInline ? d.size : chunk;
        w.inlineValue = d.inlineValue;
        w.flags = (isInline ? kWireInline : 0u) | (sent + chunk == d.size || isInline ? kWireLast : 0u) |
                  (hasSignal ? kWireSignal : 0u);
        w.signalId = d.signalId;
        w.signalValue = (d.op & UNICCL_GIN_OP_SIGNAL_INC) ? 1 : d.signalValue;
        memcpy(slot, &w, sizeof(w));
        if (chunk > 0 && gpu::memcpy(slot + sizeof(w), src + sent, chunk) != ncclSuccess) {
          fail(ncclUnhandledCudaError);
          return moved;
        }
        connFifoPublish(h.sendFifo, step, (int64_t)(sizeof(w) + chunk));
        sendStep[peer] = step + 1;
        sent += chunk;
        moved = true;
      } while (!isInline && sent < d.size);
      sent = 0;
    }
    // The source is consumed: counter, then the descriptor's slot back to the kernel.
    if (hasCounter) __atomic_fetch_add(&m.counters[d.counterId], 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 8; i++) __atomic_store_n(&q[i], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&m.cis[peer], ci + 1, __ATOMIC_RELEASE);
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
  for (int c = 0; c < cfg.contexts; c++) {
    for (int p = 0; p < comm->nRanks; p++) {
      bool stalled = false;
      if (drainQueue(c, p, &stalled)) moved = true;
    }
  }
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
  g->pace = std::chrono::microseconds(knobInt(Knob::UNICCL_GIN_RECV_PACE_US));
  g->lastApplied.assign(n, std::chrono::steady_clock::time_point{});
  ncclResult_t res = ncclSuccess;
  // Links: listen to every peer, exchange the handles, connect, accept.
  std::vector<char> handles((size_t)n * n * NetLink::kHandleBytes, 0);
  for (int p = 0; p < n && res == ncclSuccess; p++) {
    if (p == comm->rank) continue;
    g->links[p] = std::make_unique<NetLink>();
    std::vector<char> h;
    res = g->links[p]->listen(comm, p, 1, kGinStepBytes, &h);
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
  for (int p = 0; p < n && res == ncclSuccess; p++) {
    if (p == comm->rank) continue;
    std::vector<char> h(handles.data() + ((size_t)p * n + comm->rank) * NetLink::kHandleBytes,
                        handles.data() + ((size_t)p * n + comm->rank + 1) * NetLink::kHandleBytes);
    res = g->links[p]->connect(comm, h);
  }
  for (int p = 0; p < n && res == ncclSuccess; p++)
    if (p != comm->rank) res = g->links[p]->accept(comm);

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
  if (res == ncclSuccess) res = ProxyRef::acquire(&g->proxy);
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
  INFO(kSubsysInit | kSubsysNet, "Rank %d: GIN over the proxy: %d contexts, %d signals, %d counters, %d peers via NET",
       comm->rank, cfg.contexts, cfg.signals, cfg.counters, n - 1);
  *out = g.release();
  return ncclSuccess;
}

void ginDestroy(GinState* g) {
  if (g == nullptr) return;
  if (g->polling) g->proxy.removePoller(&g->poller);   // the proxy thread no longer reads anything below
  for (auto& l : g->links)
    if (l) l->stop();
  g->links.clear();
  const bool aborted = g->comm->abortFlagHost != nullptr && *g->comm->abortFlagHost != 0;
  // After an abort a kernel may still be in a wait on this memory (it leaves
  // at its next abort check): leave it allocated rather than free it under it.
  if (!aborted) {
    for (GinContextMem& m : g->ctx)
      if (m.host != nullptr) gpu::hostFree(m.host);
    if (g->shadowsDev != nullptr) gpu::deviceFree(g->shadowsDev);
  }
  g->proxy.release();
  delete g;
}

}  // namespace uniccl
