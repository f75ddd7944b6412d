/*
 * uniccl's Device API: GIN (GPU-initiated networking) through uniccl's proxy
 * thread. A kernel's put / putValue / signal writes a 64-byte descriptor into
 * a host-mapped queue (one per GIN context and peer); the proxy thread drains
 * it, copies the source (the source is then "consumed": the local counter,
 * if asked, is incremented and the queue's consumer index advances), and
 * carries the operation over the network to the peer, whose proxy writes the
 * payload into its window and then applies the signal (an add into the
 * signal array), in order per peer: a signal is visible only after the
 * payloads of the earlier puts of that context to that peer have landed.
 * docs/device_api.md ("GIN") has the whole design.
 *
 * Binary layout: the context (ncclGinProxyGpuCtx_t), the descriptor
 * (ncclGinProxyGfd_t: eight 8-byte words, bit 0 of each set when written)
 * and the queue protocol (producer index claimed with a fetch-add, a credit
 * wait against the consumer index, 64 bytes stored, the consumer zeroes the
 * descriptor and advances its index) are NCCL 2.28.9's proxy GIN ones, so
 * kernels compiled against NVIDIA's headers post descriptors uniccl's proxy
 * reads. uniccl adds one word after NCCL's context fields: the
 * communicator's abort flag, which uniccl's own waits poll (NCCL-compiled
 * kernels do not read it; their waits cannot be ended by an abort).
 *
 * Waits (waitSignal, waitCounter, flush, the queue's credit wait) end early
 * when the communicator is aborted (ncclCommAbort, a timeout, a dead peer):
 * the values they return are then meaningless, the kernel should end.
 */
#ifndef UNICCL_NCCL_DEVICE_GIN_H
#define UNICCL_NCCL_DEVICE_GIN_H
#include "core.h"
#include "coop.h"
#include "ptr.h"
#include "../uniccl_net.h" /* ncclNetDeviceType: NCCL_NET_DEVICE_GIN_PROXY */
#include "impl/port.h"

typedef enum ncclGinSignalOp_t { ncclGinSignalInc = 0, ncclGinSignalAdd = 1 } ncclGinSignalOp_t;

/* Descriptor operation bits (NCCL 2.28.9's values). */
#define UNICCL_GIN_OP_PUT 0x1u
#define UNICCL_GIN_OP_INLINE 0x2u
#define UNICCL_GIN_OP_COUNTER 0x4u
#define UNICCL_GIN_OP_SIGNAL_INC 0x8u
#define UNICCL_GIN_OP_SIGNAL_ADD 0x10u

/* A 64-byte descriptor: word i's bit 0 is set once written. Words:
 *   0 header   1 | op << 1 | size << 7
 *   1 srcOff   1 | off << 1           (inline: 1 | value[0:32] << 8 | value[32:48] << 40)
 *   2 srcWin   1 | handle << 1        (inline: 1 | value[48:64] << 8)
 *   3 dstOff   1 | off << 1
 *   4 dstWin   1 | handle << 1
 *   5 compl    1 | counterId << 8 | signalId << 24 | signalValue[0:16] << 40
 *   6 sigval   1 | signalValue[16:32] << 8 | signalValue[32:64] << 24
 *   7          1 */
typedef struct {
  uint64_t qword[8];
} ncclGinProxyGfd_t;

/* What ncclDevComm::ginHandles[c] points to (host-mapped memory). The first
 * seven fields are NCCL 2.28.9's ncclGinProxyGpuCtx_t. */
typedef struct {
  int nranks;
  uint32_t queueSize;        /* descriptors per peer queue, a power of two */
  ncclGinProxyGfd_t* queues; /* [nranks][queueSize] */
  uint32_t* pis;             /* [nranks] producer indices (kernels) */
  uint32_t* cis;             /* [nranks] consumer indices (the proxy) */
  uint64_t* counters;        /* local counters */
  uint64_t* signals;         /* signals peers add into */
  /* uniccl: */
  const volatile uint32_t* abortFlag; /* the communicator's; nonzero ends uniccl's waits */
} ncclGinProxyGpuCtx_t;

#ifdef __cplusplus
/* Completion actions of put / putValue / signal. */
struct ncclGin_None {};
struct ncclGin_SignalAdd {
  ncclGinSignal_t signal;
  uint64_t value;
};
/* As SignalAdd{signal, 1}; between two resets of a signal, use SignalInc
 * only or never. */
struct ncclGin_SignalInc {
  ncclGinSignal_t signal;
};
/* Local: incremented when the put's source has been consumed (read). */
struct ncclGin_CounterInc {
  ncclGinCounter_t counter;
};
struct ncclGinDescriptorSmem {
  alignas(16) char space[64];
};
struct ncclGin_DescriptorSmem {
  ncclGinDescriptorSmem* descriptor;
};
#endif

#if UNICCL_DEVICE_API
namespace uniccl {
namespace devapi {

/* x <= y in a window of `bits` bits that wraps (NCCL's rolling comparison). */
NCCL_DEVICE_INLINE bool rollingLessEq(uint64_t x, uint64_t y, int bits = 64) {
  uint64_t m = bits >= 64 ? ~uint64_t(0) : ((uint64_t(1) << bits) - 1);
  return ((y - x) & m) <= (m >> 1);
}

NCCL_DEVICE_INLINE bool ginAborted(const ncclGinProxyGpuCtx_t* ctx) {
  return ctx->abortFlag != nullptr && load32Relaxed(ctx->abortFlag) != 0;
}

/* Polls *p until done(value) or the communicator is aborted (checked every
 * 256 polls); returns the last value read. */
template <typename Done>
NCCL_DEVICE_INLINE uint64_t ginSpin64(const ncclGinProxyGpuCtx_t* ctx, uint64_t* p, memory_order o, Done done) {
  const memory_order each = pollOrderOf(o);
  uint64_t v;
  for (unsigned spins = 1;; spins++) {
    v = load64(p, each);
    if (done(v)) {
      if (each != o) load64(p, o); /* the spin's one acquire */
      break;
    }
    if ((spins & 255) == 0 && ginAborted(ctx)) break;
    pollPause();
  }
  return v;
}

template <typename A>
struct GinAction {
  static constexpr bool isSignal = false, isCounter = false;
  static NCCL_DEVICE_INLINE uint32_t signalOp(A) { return 0; }
  static NCCL_DEVICE_INLINE uint32_t id(A) { return 0; }
  static NCCL_DEVICE_INLINE uint64_t value(A) { return 0; }
};
template <>
struct GinAction<ncclGin_SignalAdd> {
  static constexpr bool isSignal = true, isCounter = false;
  static NCCL_DEVICE_INLINE uint32_t signalOp(ncclGin_SignalAdd) { return UNICCL_GIN_OP_SIGNAL_ADD; }
  static NCCL_DEVICE_INLINE uint32_t id(ncclGin_SignalAdd a) { return a.signal; }
  static NCCL_DEVICE_INLINE uint64_t value(ncclGin_SignalAdd a) { return a.value; }
};
template <>
struct GinAction<ncclGin_SignalInc> {
  static constexpr bool isSignal = true, isCounter = false;
  static NCCL_DEVICE_INLINE uint32_t signalOp(ncclGin_SignalInc) { return UNICCL_GIN_OP_SIGNAL_INC; }
  static NCCL_DEVICE_INLINE uint32_t id(ncclGin_SignalInc a) { return a.signal; }
  static NCCL_DEVICE_INLINE uint64_t value(ncclGin_SignalInc) { return 1; }
};
template <>
struct GinAction<ncclGin_CounterInc> {
  static constexpr bool isSignal = false, isCounter = true;
  static NCCL_DEVICE_INLINE uint32_t signalOp(ncclGin_CounterInc) { return 0; }
  static NCCL_DEVICE_INLINE uint32_t id(ncclGin_CounterInc a) { return a.counter; }
  static NCCL_DEVICE_INLINE uint64_t value(ncclGin_CounterInc) { return 0; }
};

/* Claims a slot of peer's queue, waits for credit (or an abort), stores the
 * descriptor. One thread. */
NCCL_DEVICE_INLINE void ginPost(ncclGinProxyGpuCtx_t* ctx, int peer, const uint64_t* q) {
  uint32_t queueSize = ctx->queueSize;
  uint32_t idx = fetchAdd32(&ctx->pis[peer], 1);
  const volatile uint32_t* ci = &ctx->cis[peer];
  for (unsigned spins = 1; queueSize <= idx - load32Relaxed(ci); spins++) {
    if ((spins & 255) == 0 && ginAborted(ctx)) return;
    pollPause();
  }
  storeDescriptor64B(&ctx->queues[(size_t)peer * queueSize + (idx & (queueSize - 1))], q);
}

/* Builds and posts one descriptor (NCCL's word layout, above). */
NCCL_DEVICE_INLINE void ginDescribe(ncclGinProxyGpuCtx_t* ctx, int peer, uint32_t op, uint64_t size, bool isInline,
                                    uint64_t inlineValue, uint64_t srcOff, uint64_t srcWin, uint64_t dstOff,
                                    uint64_t dstWin, uint32_t counterId, uint32_t signalId, uint64_t signalValue) {
  uint64_t q[8];
  fenceReleaseSystem(); /* the kernel's earlier stores (the put's source) before the proxy reads them */
  q[0] = 1 | ((uint64_t)op << 1) | (size << 7);
  if (isInline) {
    q[1] = 1 | ((inlineValue & 0xffffffffull) << 8) | (((inlineValue >> 32) & 0xffff) << 40);
    q[2] = 1 | (((inlineValue >> 48) & 0xffff) << 8);
  } else {
    q[1] = 1 | (srcOff << 1);
    q[2] = 1 | (srcWin << 1);
  }
  q[3] = 1 | (dstOff << 1);
  q[4] = 1 | (dstWin << 1);
  q[5] = 1 | ((uint64_t)(counterId & 0xffff) << 8) | ((uint64_t)(signalId & 0xffff) << 24) |
         ((signalValue & 0xffff) << 40);
  q[6] = 1 | (((signalValue >> 16) & 0xffff) << 8) | ((signalValue >> 32) << 24);
  q[7] = 1;
  ginPost(ctx, peer, q);
}

template <typename T>
NCCL_DEVICE_INLINE uint64_t ginBits(T v) {
  uint64_t b = 0;
  const unsigned char* s = reinterpret_cast<const unsigned char*>(&v);
  for (unsigned i = 0; i < sizeof(T); i++) b |= (uint64_t)s[i] << (8 * i);
  return b;
}

}  // namespace devapi
}  // namespace uniccl

template <unsigned backendMask>
struct ncclGin_BackendMask;
template <ncclNetDeviceType backend>
using ncclGin_BackendOne = ncclGin_BackendMask<(1u << (int)backend)>;
/* uniccl has the proxy backend only. */
using ncclGin = ncclGin_BackendMask<(1u << (int)NCCL_NET_DEVICE_GIN_PROXY)>;

/* A GIN context of a device communicator. Ranks are team ranks of the team
 * passed (converted to world ranks). Signal and counter ids are the user's
 * (ncclDevCommRequirements ids start at 0; resource requirements' ids come
 * from their outGinSignalStart / outGinCounterStart). */
template <unsigned backendMask>
struct ncclGin_BackendMask {
  ncclDevComm const& comm;
  uint32_t nContexts : 8, contextId : 8, _ginBackend : 8;
  void* _ginHandle;
  uint64_t* _signalShadows;

  NCCL_DEVICE_INLINE ncclGin_BackendMask(ncclDevComm const& c, int contextIndex) : comm(c) {
    nContexts = c.ginContextCount;
    contextId = c.ginContextCount == 0 ? 0 : (uint32_t)contextIndex % c.ginContextCount;
    _ginBackend = c.ginTypes[contextId];
    _ginHandle = c.ginHandles[contextId];
    _signalShadows = c.ginSignalShadows + (size_t)contextId * c.ginSignalCount;
  }

  NCCL_DEVICE_INLINE ncclGinProxyGpuCtx_t* _ctx() const { return (ncclGinProxyGpuCtx_t*)_ginHandle; }
  NCCL_DEVICE_INLINE uint64_t _winHandle(ncclWindow_t w) const { return (uint64_t)(uintptr_t)w->ginWins[contextId]; }
  NCCL_DEVICE_INLINE uint64_t _winBase(ncclWindow_t w) const { return 4096 * (uint64_t)w->ginOffset4K; }

  /* Copies bytes from srcWnd + srcOffset (this rank) to dstWnd + dstOffset on
   * team rank `peer`. RemoteAction: ncclGin_None / SignalInc / SignalAdd,
   * applied on the peer after this put's and the earlier puts' payloads
   * landed. LocalAction: ncclGin_None / CounterInc, when the source has been
   * read. Every thread of coop calls; one posts. */
  template <typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None, typename Coop = ncclCoopThread,
            typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void put(ncclTeam team, int peer, ncclWindow_t dstWnd, size_t dstOffset, ncclWindow_t srcWnd,
                              size_t srcOffset, size_t bytes, RemoteAction remoteAction = ncclGin_None{},
                              LocalAction localAction = ncclGin_None{}, Coop coop = ncclCoopThread{},
                              DescriptorSmem = ncclGin_None{}) const {
    typedef uniccl::devapi::GinAction<RemoteAction> R;
    typedef uniccl::devapi::GinAction<LocalAction> L;
    static_assert(!R::isCounter && !L::isSignal, "put: remote action is a signal, local action a counter");
    coop.sync();
    if (coop.thread_rank() == 0) {
      uint32_t op = UNICCL_GIN_OP_PUT | R::signalOp(remoteAction) | (L::isCounter ? UNICCL_GIN_OP_COUNTER : 0u);
      uniccl::devapi::ginDescribe(_ctx(), ncclTeamRankToWorld(comm, team, peer), op, bytes, false, 0,
                                  _winBase(srcWnd) + srcOffset, _winHandle(srcWnd), _winBase(dstWnd) + dstOffset,
                                  _winHandle(dstWnd), L::isCounter ? comm.ginCounterBase + L::id(localAction) : 0,
                                  R::isSignal ? comm.ginSignalBase + R::id(remoteAction) : 0, R::value(remoteAction));
    }
    coop.sync();
  }

  template <typename T, typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None,
            typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void put(ncclTeam team, int peer, ncclSymPtr<T> dst, ncclSymPtr<T> src, size_t nElts,
                              RemoteAction remoteAction = ncclGin_None{}, LocalAction localAction = ncclGin_None{},
                              Coop coop = ncclCoopThread{}, DescriptorSmem d = ncclGin_None{}) const {
    put(team, peer, dst.window, dst.offset, src.window, src.offset, nElts * sizeof(T), remoteAction, localAction,
        coop, d);
  }

  /* Stores value (at most 8 bytes) at dstWnd + dstOffset on the peer. */
  template <typename T, typename RemoteAction = ncclGin_None, typename Coop = ncclCoopThread,
            typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void putValue(ncclTeam team, int peer, ncclWindow_t dstWnd, size_t dstOffset, T value,
                                   RemoteAction remoteAction = ncclGin_None{}, Coop coop = ncclCoopThread{},
                                   DescriptorSmem = ncclGin_None{}) const {
    static_assert(sizeof(T) <= 8, "putValue: sizeof(T) <= 8");
    typedef uniccl::devapi::GinAction<RemoteAction> R;
    static_assert(!R::isCounter, "putValue: the remote action is a signal");
    coop.sync();
    if (coop.thread_rank() == 0) {
      uint32_t op = UNICCL_GIN_OP_PUT | UNICCL_GIN_OP_INLINE | R::signalOp(remoteAction);
      uniccl::devapi::ginDescribe(_ctx(), ncclTeamRankToWorld(comm, team, peer), op, sizeof(T), true,
                                  uniccl::devapi::ginBits(value), 0, 0, _winBase(dstWnd) + dstOffset,
                                  _winHandle(dstWnd), 0, R::isSignal ? comm.ginSignalBase + R::id(remoteAction) : 0,
                                  R::value(remoteAction));
    }
    coop.sync();
  }
  template <typename T, typename RemoteAction = ncclGin_None, typename Coop = ncclCoopThread,
            typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void putValue(ncclTeam team, int peer, ncclSymPtr<T> dst, T value,
                                   RemoteAction remoteAction = ncclGin_None{}, Coop coop = ncclCoopThread{},
                                   DescriptorSmem d = ncclGin_None{}) const {
    putValue(team, peer, dst.window, dst.offset, value, remoteAction, coop, d);
  }

  /* A signal alone (after the earlier puts to the peer landed). */
  template <typename RemoteAction, typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void signal(ncclTeam team, int peer, RemoteAction remoteAction, Coop coop = ncclCoopThread{},
                                 DescriptorSmem = ncclGin_None{}) const {
    typedef uniccl::devapi::GinAction<RemoteAction> R;
    static_assert(R::isSignal, "signal: the action is ncclGin_SignalInc or ncclGin_SignalAdd");
    coop.sync();
    if (coop.thread_rank() == 0) {
      uniccl::devapi::ginDescribe(_ctx(), ncclTeamRankToWorld(comm, team, peer),
                                  UNICCL_GIN_OP_PUT | R::signalOp(remoteAction), 0, false, 0, 0, 0, 0, 0, 0,
                                  comm.ginSignalBase + R::id(remoteAction), R::value(remoteAction));
    }
    coop.sync();
  }

  /* Every put this context posted so far (any thread) has its source
   * consumed: the buffers may be reused. Says nothing of remote arrival. */
  template <typename Coop>
  NCCL_DEVICE_INLINE void flush(Coop coop, cuda::memory_order ord = cuda::memory_order_acquire) const {
    coop.sync();
    ncclGinProxyGpuCtx_t* ctx = _ctx();
    for (int pe = coop.thread_rank(); pe < comm.nRanks; pe += coop.size()) {
      uint32_t pi = uniccl::devapi::load32Relaxed(&ctx->pis[pe]);
      for (unsigned spins = 1;; spins++) {
        uint32_t ci = uniccl::devapi::load32Relaxed(&ctx->cis[pe]);
        if ((int32_t)(pi - ci) <= 0) break;
        if ((spins & 255) == 0 && uniccl::devapi::ginAborted(ctx)) break;
        uniccl::devapi::pollPause();
      }
    }
    if (ord != cuda::memory_order_relaxed) uniccl::devapi::load64(ctx->counters, ord); /* an acquire point */
    coop.sync();
  }

  NCCL_DEVICE_INLINE uint64_t readCounter(ncclGinCounter_t counter, int bits = 56,
                                          cuda::memory_order ord = cuda::memory_order_acquire) const {
    uint64_t m = bits >= 64 ? ~uint64_t(0) : ((uint64_t(1) << bits) - 1);
    return m & uniccl::devapi::load64(_ctx()->counters + comm.ginCounterBase + counter, ord);
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitCounter(Coop coop, ncclGinCounter_t counter, uint64_t least, int bits = 56,
                                      cuda::memory_order ord = cuda::memory_order_acquire) const {
    coop.sync();
    if (coop.thread_rank() == 0)
      uniccl::devapi::ginSpin64(_ctx(), _ctx()->counters + comm.ginCounterBase + counter, ord,
                                [&](uint64_t v) { return uniccl::devapi::rollingLessEq(least, v, bits); });
    coop.sync();
  }

  /* Signal shadows: one per signal and context, for the kernel's own use;
   * only increaseSignalShadow and resetSignal change them. */
  NCCL_DEVICE_INLINE uint64_t* getSignalShadowPtr(ncclGinSignal_t signal) const { return &_signalShadows[signal]; }
  NCCL_DEVICE_INLINE void increaseSignalShadow(ncclGinSignal_t signal, uint64_t delta) const {
    uniccl::devapi::addLocal64(&_signalShadows[signal], delta);
  }

  NCCL_DEVICE_INLINE uint64_t readSignal(ncclGinSignal_t signal, int bits = 64,
                                         cuda::memory_order ord = cuda::memory_order_acquire) const {
    uint64_t m = bits >= 64 ? ~uint64_t(0) : ((uint64_t(1) << bits) - 1);
    return m & uniccl::devapi::load64(_ctx()->signals + comm.ginSignalBase + signal, ord);
  }
  /* Until the signal is at least `least` (rolling comparison over `bits`). */
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitSignal(Coop coop, ncclGinSignal_t signal, uint64_t least, int bits = 64,
                                     cuda::memory_order ord = cuda::memory_order_acquire) const {
    coop.sync();
    if (coop.thread_rank() == 0)
      uniccl::devapi::ginSpin64(_ctx(), _ctx()->signals + comm.ginSignalBase + signal, ord,
                                [&](uint64_t v) { return uniccl::devapi::rollingLessEq(least, v, bits); });
    coop.sync();
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitSignalMeetShadow(Coop coop, ncclGinSignal_t signal, int bits = 64,
                                               cuda::memory_order ord = cuda::memory_order_acquire) const {
    coop.sync();
    if (coop.thread_rank() == 0) {
      uint64_t least = _signalShadows[signal];
      uniccl::devapi::ginSpin64(_ctx(), _ctx()->signals + comm.ginSignalBase + signal, ord,
                                [&](uint64_t v) { return uniccl::devapi::rollingLessEq(least, v, bits); });
    }
    coop.sync();
  }
  /* Until the signal exceeds the shadow by leastDelta; *before = the shadow,
   * *delta = the value seen - the shadow (masked to bits), the same on every
   * thread of coop. The shadow itself is left as it is (as NCCL 2.28.9's
   * code does): increaseSignalShadow(signal, *delta) moves it. */
  template <typename Coop, typename Uint>
  NCCL_DEVICE_INLINE void waitSignalFollowShadow(Coop coop, ncclGinSignal_t signal, Uint leastDelta, Uint* before,
                                                 Uint* delta, int bits = 64,
                                                 cuda::memory_order ord = cuda::memory_order_acquire) const {
    coop.sync();
    uint64_t* shadow = &_signalShadows[signal];
    uint64_t before64 = *shadow;
    coop.sync();
    /* Thread 0 waits and hands the value it saw to the group through the
     * shadow word for a moment (no broadcast primitive for every group). */
    if (coop.thread_rank() == 0) {
      uint64_t after = uniccl::devapi::ginSpin64(_ctx(), _ctx()->signals + comm.ginSignalBase + signal, ord,
                                                 [&](uint64_t v) {
                                                   return uniccl::devapi::rollingLessEq(before64 + leastDelta, v, bits);
                                                 });
      *shadow = after;
    }
    coop.sync();
    uint64_t after64 = *shadow;
    coop.sync();
    if (coop.thread_rank() == 0) *shadow = before64;
    uint64_t m = bits >= 64 ? ~uint64_t(0) : ((uint64_t(1) << bits) - 1);
    *before = (Uint)(m & before64);
    *delta = (Uint)(m & (after64 - before64));
    coop.sync();
  }

  /* Zero; must not race with operations on the counter / signal. */
  NCCL_DEVICE_INLINE void resetCounter(ncclGinCounter_t counter) const {
    uniccl::devapi::store64(_ctx()->counters + comm.ginCounterBase + counter, 0);
  }
  NCCL_DEVICE_INLINE void resetSignal(ncclGinSignal_t signal) const {
    uniccl::devapi::store64(_ctx()->signals + comm.ginSignalBase + signal, 0);
    _signalShadows[signal] = 0;
  }
};
#endif /* UNICCL_DEVICE_API */

#endif /* UNICCL_NCCL_DEVICE_GIN_H */
