// Connection primitives: a group of threads moving one step (slice) at a
// time through a receive connection and/or a send connection, with the
// Simple protocol (slot + tail/head counters), LL (flagged 16-byte lines) or
// LL128 (128-byte lines stored by 8 lanes at once, flag in the last 8 bytes).
//
// One step = wait (poller threads) -> group barrier -> move data (all threads)
// -> group barrier -> publish counters (poller threads). Every step combines
// up to two inputs (the user source, the receive slot) into up to two outputs
// (the user destination, the send slot), so the ring algorithms name each
// NCCL primitive (send, recvReduceSend, recvReduceCopySend, ...) by which of
// the four are present.
#pragma once

#include <cstdint>

#include "device/dev_types.h"
#include "device/port.h"
#include "device/reduce.h"

#ifndef UNICCL_SIMPLE_SC_FENCE
#define UNICCL_SIMPLE_SC_FENCE 0
#endif

namespace uniccl::dev {

constexpr int kAbortCheckSpins = 1000;
// Direct marks (dev_types.h, p2pExchanges): on the tail's 128-byte line,
// from 64 bytes after the tail, one word per slot. The sender sets mark
// s % kSteps to s + 1 when it stored step s in place (in the receiver's
// buffer, not in slot s) before it posts tail s + 1; the receiver reads it
// after waiting for that tail. A mark is rewritten only kSteps steps later,
// after the receiver freed step s (the sender waits for the head as for any
// step), so a lagging receiver never misses one.
constexpr int kDirectMarkWords = 8;
static_assert(kSteps <= 8, "the marks fill the tail line's second half");
UDEV uint64_t* directMark(uint64_t* tail, uint64_t step) { return tail + kDirectMarkWords + step % kSteps; }
// A system-wide sequentially consistent fence before every Simple tail store
// (meson -Dsimple_sc_fence=true; A/B measurements only: 1-9% slower).
constexpr bool kSimpleScFence = UNICCL_SIMPLE_SC_FENCE != 0;

// A set of threads that progresses together: the whole block (barrier 0) or
// one half of a p2p block (named barrier 1 or 2). Abort flags live in shared
// memory, one pair per group: flag A is written before the first barrier of
// a step and read after it, flag B written between the two barriers and read
// after the second. A flag holds the number of the step (1, 2, ... within a
// Prims) that saw the abort, and a step obeys only a flag of its own number
// or lower: steps that skip their barriers (LL sends) let a fast thread
// reach the next step's wait and flag it while a slow thread still reads
// the flags of the step before; that reader goes on to the flagged step's
// barrier, and every thread of the group then leaves at the same step
// (nobody is left at a barrier). The numbers count the steps of one Prims:
// where one group interleaves several (the tree's up and down Prims), a
// flag of one is compared with another's count, which is no worse than the
// plain flag this replaced, but not exact (a per-group count would be).
struct Group {
  int tid;        // thread index inside the group
  int nthreads;
  int barId;      // 0: whole block
  SubBarrierState* bar;
  volatile uint32_t* abortA;
  volatile uint32_t* abortB;
  const volatile uint32_t* abortFlag;  // host-mapped communicator flag
  volatile uint64_t* word;  // shared memory, 2 words: one thread's findings passed to the group across a barrier

  UDEV void sync() const {
    if (barId == 0) barrierBlock();
    else barrierSub(barId, nthreads, bar);
  }
};

// A group flag set at step `flag` stops step `stepNo` only from that step on.
UDEV bool abortedBy(uint32_t flag, uint32_t stepNo) { return flag != 0 && flag <= stepNo; }

UDEV int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
UDEV int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
UDEV int64_t divUp(int64_t a, int64_t b) { return (a + b - 1) / b; }
UDEV int64_t alignUp(int64_t a, int64_t b) { return divUp(a, b) * b; }
// divUp for a >= 0 and 0 < b < 2^32, in 32 bits where a fits: a 64-bit
// division is a long dependent sequence on GPUs, and the work splits of
// every small collective and p2p item are on its critical path.
UDEV int64_t divUpFast(int64_t a, int64_t b) {
  if ((uint64_t)a <= 0xffffffffull) {
    const uint32_t x = (uint32_t)a, y = (uint32_t)b;
    return (int64_t)(x / y + (x % y != 0 ? 1u : 0u));
  }
  return divUp(a, b);
}

// Bytes of data one step can carry: a whole Simple slot, 8 bytes per
// 16-byte LL line, or 120 bytes per 128-byte LL128 line. Depends only on
// comm-wide sizes so both ends agree.
UDEV int64_t stepCapacity(const DevComm* comm, int proto) {
  const int64_t slot = comm->buffBytes[proto] / kSteps;
  if (proto == kProtoLL128) return (slot / kLL128LineBytes) * kLL128DataWords * 8;
  return proto == kProtoSimple ? (slot & ~(int64_t)15) : (slot / 16) * 8;
}

// Elements per step for a work: its sliceBytes capped by the capacity,
// rounded down to whole 16-byte groups (at least one) so chunk offsets keep
// the buffers' 16-byte alignment.
template <typename S>
UDEV int64_t sliceElems(const DevComm* comm, int proto, uint32_t sliceBytes) {
  constexpr int64_t kG = 16 / sizeof(S);
  int64_t b = imin((int64_t)sliceBytes, stepCapacity(comm, proto));
  int64_t e = b / (int64_t)sizeof(S) / kG * kG;
  return e < kG ? kG : e;
}

// ------------------------------------------------------------ data movers
// Combines the present inputs into the present outputs for n elements.
template <typename Fn, bool Src, bool Recv, bool Pre, bool Post, int Bytes>
UDEV PackView<typename Fn::S, Bytes> combine(const Fn& fn, const PackView<typename Fn::S, Bytes>& s,
                                             const PackView<typename Fn::S, Bytes>& r) {
  using Ops = PackOps<Fn, Bytes>;
  PackView<typename Fn::S, Bytes> v;
  if constexpr (Recv) {
    v = r;
    if constexpr (Src) {
      PackView<typename Fn::S, Bytes> t = s;
      if constexpr (Pre && Fn::kHasPre) Ops::pre(fn, t);
      Ops::op(fn, v, t);
    }
  } else {
    v = s;
    if constexpr (Pre && Fn::kHasPre) Ops::pre(fn, v);
  }
  if constexpr (Post && Fn::kHasPost) Ops::post(fn, v);
  return v;
}

template <typename Fn, bool Src, bool Recv, bool Pre, bool Post>
UDEV typename Fn::S combine1(const Fn& fn, typename Fn::S s, typename Fn::S r) {
  typename Fn::S v;
  if constexpr (Recv) {
    v = r;
    if constexpr (Src) v = fn.op(v, (Pre && Fn::kHasPre) ? fn.pre(s) : s);
  } else {
    v = (Pre && Fn::kHasPre) ? fn.pre(s) : s;
  }
  if constexpr (Post && Fn::kHasPost) v = fn.post(v);
  return v;
}

// Simple protocol (and local copies): 16-byte vectors with kUnroll loads in
// flight per thread when every pointer involved is 16-byte aligned; element
// by element for the tail and for unaligned buffers.
template <typename Fn, bool Src, bool Recv, bool Dst, bool Send, bool Pre, bool Post>
UDEV_NOINLINE void reduceCopy(const Fn& fn, int tid, int nthreads, const typename Fn::S* src,
                     const typename Fn::S* rcv, typename Fn::S* dst, typename Fn::S* snd, int64_t n) {
  using S = typename Fn::S;
  using V = PackView<S, 16>;
  constexpr int kE = 16 / sizeof(S);
  constexpr int kUnroll = 4;
  uintptr_t mis = 0;
  if constexpr (Src) mis |= (uintptr_t)src;
  if constexpr (Recv) mis |= (uintptr_t)rcv;
  if constexpr (Dst) mis |= (uintptr_t)dst;
  if constexpr (Send) mis |= (uintptr_t)snd;
  const int64_t nPacks = (mis & 15) ? 0 : n / kE;
  const int64_t stride = nthreads;
  int64_t i = tid;
  if (nPacks > 0) {
    const Pack16* s16 = reinterpret_cast<const Pack16*>(src);
    const Pack16* r16 = reinterpret_cast<const Pack16*>(rcv);
    Pack16* d16 = reinterpret_cast<Pack16*>(dst);
    Pack16* o16 = reinterpret_cast<Pack16*>(snd);
    for (; i + (kUnroll - 1) * stride < nPacks; i += kUnroll * stride) {
      Pack16 sv[kUnroll], rv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        if constexpr (Src) sv[u] = load16(s16 + i + u * stride);
        if constexpr (Recv) rv[u] = loadCG(r16 + i + u * stride);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        V a, b;
        if constexpr (Src) a = toView<S>(sv[u]);
        if constexpr (Recv) b = toView<S>(rv[u]);
        const Pack16 v = toPack<S>(combine<Fn, Src, Recv, Pre, Post, 16>(fn, a, b));
        if constexpr (Dst) store16(d16 + i + u * stride, v);
        if constexpr (Send) store16(o16 + i + u * stride, v);
      }
    }
    for (; i < nPacks; i += stride) {
      V a, b;
      if constexpr (Src) a = toView<S>(load16(s16 + i));
      if constexpr (Recv) b = toView<S>(loadCG(r16 + i));
      const Pack16 v = toPack<S>(combine<Fn, Src, Recv, Pre, Post, 16>(fn, a, b));
      if constexpr (Dst) store16(d16 + i, v);
      if constexpr (Send) store16(o16 + i, v);
    }
  }
  for (int64_t e = nPacks * kE + tid; e < n; e += stride) {
    S a{}, b{};
    if constexpr (Src) a = src[e];
    if constexpr (Recv) b = loadCG(rcv + e);
    const S v = combine1<Fn, Src, Recv, Pre, Post>(fn, a, b);
    if constexpr (Dst) dst[e] = v;
    if constexpr (Send) snd[e] = v;
  }
}

// LL: line j of a slot carries data bytes [8j, 8j+8) of the step. Each thread
// polls its own receive lines until both flags show this step. On abort the
// thread sets the group's flag B to stepNo (Group says why a number) and
// stops; the caller's barrier makes it common.
template <typename Fn, bool Src, bool Recv, bool Dst, bool Send, bool Pre, bool Post>
UDEV void llReduceCopy(const Fn& fn, const Group& g, const typename Fn::S* src, const Pack16* rcv,
                       typename Fn::S* dst, Pack16* snd, int64_t n, uint32_t recvFlag, uint32_t sendFlag,
                       uint32_t stepNo) {
  using S = typename Fn::S;
  using V = PackView<S, 8>;
  constexpr int kE = 8 / sizeof(S);
  const int64_t nLines = divUp(n, kE);
  const bool srcAligned = !Src || ((uintptr_t)src & 7) == 0;
  const bool dstAligned = !Dst || ((uintptr_t)dst & 7) == 0;
  for (int64_t j = g.tid; j < nLines; j += g.nthreads) {
    const int64_t e0 = j * kE;
    const int ne = (int)imin(kE, n - e0);
    V a, b;
    a.u[0] = 0;
    b.u[0] = 0;
    if constexpr (Src) {
      if (srcAligned && ne == kE) a.u[0] = *reinterpret_cast<const uint64_t*>(src + e0);
      else
        for (int k = 0; k < ne; k++) a.e[k] = src[e0 + k];
    }
    if constexpr (Recv) {
      Pack16 line;
      int spins = 0;
      for (;;) {
        line = loadLLLine(rcv + j);
        if (line.y == recvFlag && line.w == recvFlag) break;
        spinPause();
        if (++spins == kAbortCheckSpins) {
          spins = 0;
          if (*g.abortB || loadVolatile32(g.abortFlag)) {
            *g.abortB = stepNo;
            return;
          }
        }
      }
      b.u[0] = (uint64_t)line.x | ((uint64_t)line.z << 32);
    }
    const V v = combine<Fn, Src, Recv, Pre, Post, 8>(fn, a, b);
    if constexpr (Dst) {
      if (dstAligned && ne == kE) *reinterpret_cast<uint64_t*>(dst + e0) = v.u[0];
      else
        for (int k = 0; k < ne; k++) dst[e0 + k] = v.e[k];
    }
    if constexpr (Send) storeLLLine(snd + j, (uint32_t)v.u[0], (uint32_t)(v.u[0] >> 32), sendFlag);
  }
}

// LL128: data word d of the step (bytes [8d, 8d+8)) is word d % 15 of line
// d / 15; word 15 of each line is its flag. A warp takes kWarpSize / 8
// lines at a time, 8 lanes per line, 16 bytes (two words) per lane: lane s
// of a line holds words 2s and 2s+1, and the last lane (the flag lane) word
// 14 and the flag. Receiving, the warp loads its lines and votes until
// every flag lane saw this step's flag in the same load as its line's data
// (device/port.h: loadLL128, ll128PollAgain); sending, the lanes store the
// line at once, zero-padded past the step's data. The loops are uniform
// across the warp (a whole warp polls and votes even for lines past the
// end). On abort the lanes of a line leave together (ll128LineAny) and set
// the group's flag B to stepNo, as LL does.
template <typename Fn, bool Src, bool Recv, bool Dst, bool Send, bool Pre, bool Post>
UDEV void ll128ReduceCopy(const Fn& fn, const Group& g, const typename Fn::S* src, const uint64_t* rcv,
                          typename Fn::S* dst, uint64_t* snd, int64_t n, uint64_t recvFlag, uint64_t sendFlag,
                          uint32_t stepNo) {
  using S = typename Fn::S;
  using V = PackView<S, 8>;
  constexpr int kE = 8 / sizeof(S);
  constexpr int kLinesPerWarp = kWarpSize / kLL128LanesPerLine;
  const int64_t nWords = divUp(n, kE);
  const int64_t nLines = divUp(nWords, kLL128DataWords);
  const int lane = g.tid % kWarpSize;
  const int sub = lane % kLL128LanesPerLine;
  const bool flagLane = sub == kLL128LanesPerLine - 1;
  const int64_t warpStride = (int64_t)(g.nthreads / kWarpSize) * kLinesPerWarp;
  const bool srcAligned = !Src || ((uintptr_t)src & 7) == 0;
  const bool dstAligned = !Dst || ((uintptr_t)dst & 7) == 0;
  for (int64_t first = (int64_t)(g.tid / kWarpSize) * kLinesPerWarp; first < nLines; first += warpStride) {
    const int64_t line = first + lane / kLL128LanesPerLine;
    const bool active = line < nLines;   // the same in the 8 lanes of a line
    uint64_t r[2] = {0, 0};
    if constexpr (Recv) {
      const uint64_t* rl = rcv + line * kLL128LineWords;
      int spins = 0;
      bool stop = false;
      for (;;) {
        bool again = false;
        if (active && !stop) again = !loadLL128(rl, sub, recvFlag, &r[0], &r[1]);
        if (!ll128PollAgain(again)) break;
        spinPause();
        if (++spins == kAbortCheckSpins) {
          spins = 0;
          if (*g.abortB || loadVolatile32(g.abortFlag)) stop = true;
        }
      }
      if (ll128LineAny(stop)) {
        *g.abortB = stepNo;
        return;
      }
    }
    const int64_t d0 = line * kLL128DataWords + 2 * sub;   // this lane's first data word
    uint64_t out[2] = {0, 0};
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const int64_t d = d0 + k;
      if (!active || (k == 1 && flagLane) || d >= nWords) break;
      const int64_t e0 = d * kE;
      const int ne = (int)imin(kE, n - e0);
      V a, b;
      a.u[0] = 0;
      b.u[0] = r[k];
      if constexpr (Src) {
        if (srcAligned && ne == kE) a.u[0] = *reinterpret_cast<const uint64_t*>(src + e0);
        else
          for (int q = 0; q < ne; q++) a.e[q] = src[e0 + q];
      }
      const V v = combine<Fn, Src, Recv, Pre, Post, 8>(fn, a, b);
      if constexpr (Dst) {
        if (dstAligned && ne == kE) *reinterpret_cast<uint64_t*>(dst + e0) = v.u[0];
        else
          for (int q = 0; q < ne; q++) dst[e0 + q] = v.e[q];
      }
      out[k] = v.u[0];
    }
    if constexpr (Send) {
      // The lanes of a line issue its store as one instruction: whole
      // warps meet first (every lane gets here; the branch is the same in
      // the 8 lanes of a line).
      ll128Converge();
      if (active) storeLL128(snd + line * kLL128LineWords, sub, out[0], flagLane ? sendFlag : out[1]);
    }
  }
}

// ------------------------------------------------------------ Prims
template <typename Fn, int Proto>
class Prims {
  using S = typename Fn::S;

 public:
  // rc / sc: this channel's connection structs in global memory (nullptr:
  // that direction is unused). Steps are loaded here and stored by finish().
  UDEV Prims(const Group& g, const DevComm* comm, const Fn& fn, RecvConn* rc, SendConn* sc)
      : g_(g), fn_(fn), rc_(rc), sc_(sc) {
    slotBytes_ = comm->buffBytes[Proto] / kSteps;
    sendPoller_ = g.nthreads > kWarpSize ? kWarpSize : 0;
    if (rc) {
      recvBuf_ = rc->buffs[Proto];
      recvTail_ = rc->tail;
      recvRemoteHead_ = rc->remoteHead;
      recvStep_ = *reinterpret_cast<volatile uint64_t*>(&rc->step);
      recvFifo_ = rc->fifo;
      recvPtrExchange_ = rc->remotePtrExchange;
    }
    if (sc) {
      sendBuf_ = sc->buffs[Proto];
      sendRemoteTail_ = sc->remoteTail;
      sendHead_ = sc->head;
      sendStep_ = *reinterpret_cast<volatile uint64_t*>(&sc->step);
      sendFifo_ = sc->fifo;
      sendPtrExchange_ = sc->ptrExchange;
      headStart_ = *reinterpret_cast<volatile uint64_t*>(&sc->headSeen);
      sendHeadSeen_ = headStart_;
    }
  }

  // The primitives by what they move (NCCL's prims names), each one step()
  // below. Pre / Post: the op's pre-multiply of src / post-divide of the
  // result. False: aborted.
  template <bool Pre = false>
  UDEV bool send(const S* src, int64_t n) { return step<true, false, false, true, Pre, false>(src, nullptr, n); }
  UDEV bool recv(S* dst, int64_t n) { return step<false, true, true, false, false, false>(nullptr, dst, n); }
  UDEV bool copySend(const S* src, S* dst, int64_t n) {
    return step<true, false, true, true, false, false>(src, dst, n);
  }
  UDEV bool recvCopySend(S* dst, int64_t n) { return step<false, true, true, true, false, false>(nullptr, dst, n); }
  template <bool Pre = false>
  UDEV bool recvReduceSend(const S* src, int64_t n) {
    return step<true, true, false, true, Pre, false>(src, nullptr, n);
  }
  template <bool Pre, bool Post>
  UDEV bool recvReduceCopy(const S* src, S* dst, int64_t n) {
    return step<true, true, true, false, Pre, Post>(src, dst, n);
  }
  template <bool Pre, bool Post>
  UDEV bool recvReduceCopySend(const S* src, S* dst, int64_t n) {
    return step<true, true, true, true, Pre, Post>(src, dst, n);
  }

  // One step. Src: read n elements at src; Recv: combine with the receive
  // slot; Dst: write dst; Send: fill the send slot. Pre / Post: apply the
  // op's pre-multiply to src / post-divide to the result. False: aborted.
  template <bool Src, bool Recv, bool Dst, bool Send, bool Pre, bool Post>
  UDEV bool step(const S* src, S* dst, int64_t n) {
    const uint64_t rs = recvStep_, ss = sendStep_;
    const uint32_t stepNo = ++stepNo_;
    bool presync = true;
    if constexpr (Recv && Proto == kProtoSimple) {
      if (g_.tid == 0) {
        waitRecvTail(rs);
        // Offered our buffer (direct collectives): did the sender store this step in place?
        if (recvOffered_) g_.word[0] = pollCounter(directMark(recvTail_, rs)) == rs + 1;
      }
    }
    if constexpr (Send && Proto == kProtoSimple) {
      if (sendLookTag_ != 0 && g_.tid == 0) g_.word[1] = lookForOffer(sendLookTag_);
    }
    if constexpr (Send) {
      // While the head this Prims started with (the same in every thread)
      // frees the slot, nobody waits, so the barrier that would pass on the
      // poller's wait is not needed (small collectives: no head load, no
      // barrier before the first line goes out). After the first step that
      // needs a fresher head, every send step waits as the poller says.
      if (headStartValid_ && headStart_ + kSteps > ss) {
        if constexpr (!(Recv && Proto == kProtoSimple)) presync = false;
      } else {
        headStartValid_ = false;
        if (g_.tid == sendPoller_) waitSendHead(ss);
      }
    }
    if constexpr (Send && Proto == kProtoSimple) presync |= sendLookTag_ != 0;   // the offer's answer crosses it
    if (presync) {
      g_.sync();
      synced_ = true;
      if (abortedBy(*g_.abortA, stepNo)) return false;
    }
    if constexpr (Proto == kProtoSimple) {
      if constexpr (Send) {
        if (sendLookTag_ != 0) {
          const uint64_t v = g_.word[1];
          if (v > 1) sendView_ = reinterpret_cast<char*>(v);
          if (v != 0) sendLookTag_ = 0;   // found (an address, or 1: none offered)
        }
      }
      const S* rslot = Recv ? reinterpret_cast<const S*>(recvBuf_ + (rs % kSteps) * slotBytes_) : nullptr;
      S* sslot = Send ? (sendInPlace() ? reinterpret_cast<S*>(sendView_ + sendViewOff_)
                                       : reinterpret_cast<S*>(sendBuf_ + (ss % kSteps) * slotBytes_))
                      : nullptr;
      bool inPlace = false;
      if constexpr (!Src && Recv && Dst) {
        // The sender stored this step at dst already: only pass it on.
        inPlace = recvOffered_ && g_.word[0] != 0;
        if (inPlace) reduceCopy<Fn, false, true, false, Send, Pre, Post>(fn_, g_.tid, g_.nthreads, nullptr, dst, nullptr, sslot, n);
      }
      if (!inPlace) reduceCopy<Fn, Src, Recv, Dst, Send, Pre, Post>(fn_, g_.tid, g_.nthreads, src, rslot, dst, sslot, n);
    } else if constexpr (Proto == kProtoLL128) {
      const uint64_t* rslot = Recv ? reinterpret_cast<const uint64_t*>(recvBuf_ + (rs % kSteps) * slotBytes_) : nullptr;
      uint64_t* sslot = Send ? reinterpret_cast<uint64_t*>(sendBuf_ + (ss % kSteps) * slotBytes_) : nullptr;
      ll128ReduceCopy<Fn, Src, Recv, Dst, Send, Pre, Post>(fn_, g_, src, rslot, dst, sslot, n, rs + 1, ss + 1, stepNo);
    } else {
      const Pack16* rslot = Recv ? reinterpret_cast<const Pack16*>(recvBuf_ + (rs % kSteps) * slotBytes_) : nullptr;
      Pack16* sslot = Send ? reinterpret_cast<Pack16*>(sendBuf_ + (ss % kSteps) * slotBytes_) : nullptr;
      llReduceCopy<Fn, Src, Recv, Dst, Send, Pre, Post>(fn_, g_, src, rslot, dst, sslot, n, (uint32_t)(rs + 1),
                                                        (uint32_t)(ss + 1), stepNo);
      // Network connections: the proxy sends the step's lines once their
      // flags are all there; this size (no tail) tells it how many.
      if constexpr (Send) {
        if (sendFifo_ != nullptr && g_.tid == sendPoller_) {
          const int64_t lines = divUp(n * (int64_t)sizeof(S), (int64_t)8);
          storeVolatile64(&sendFifo_[ss % kSteps].size, kConnSizeLL | (lines * 16));
        }
      }
    }
    // LL and LL128 sends need no barrier before moving on: the flags publish the data.
    if constexpr (Recv || Proto == kProtoSimple) {
      g_.sync();
      synced_ = true;
      if (abortedBy(*g_.abortB, stepNo)) return false;
    }
    if constexpr (Send && Proto == kProtoSimple) {
      if (g_.tid == sendPoller_) {
        // The proxy sends what the slot's size says (network connections only).
        if (sendFifo_ != nullptr) storeVolatile64(&sendFifo_[ss % kSteps].size, n * (int64_t)sizeof(S));
        // The release store publishes every thread's slot stores: the barrier
        // above ordered them before this thread, and release is cumulative
        // (as NCCL's fence.acq_rel.sys + relaxed store). The sequentially
        // consistent fence is kept only to measure its cost: a build option
        // (simple_sc_fence), so that default kernels have no branch for it.
        if constexpr (kSimpleScFence) fenceSystem();
        if (sendInPlace()) postCounterRelaxed(directMark(sendRemoteTail_, ss), ss + 1);   // stored in place
        postCounter(sendRemoteTail_, ss + 1);
      }
    }
    if constexpr (Recv) {
      if (g_.tid == 0) {
        if constexpr (Proto != kProtoSimple) {
          // The group's loads of the slot returned before the barrier above,
          // and LL / LL128 lines carry their own flags: a posted store frees
          // the slot (as NCCL's LL; a release would wait for this thread's sends).
          postCounterRelaxed(recvRemoteHead_, rs + 1);
        } else {
          if (recvFifo_ != nullptr) storeVolatile64(&recvFifo_[rs % kSteps].size, -1);  // the slot is free again
          postCounter(recvRemoteHead_, rs + 1);
        }
      }
      recvStep_ = rs + 1;
    }
    if constexpr (Send) {
      sendStep_ = ss + 1;
      sentBytes_ += n * (int64_t)sizeof(S);
    }
    return true;
  }

  // ---- direct messages (dev_types.h, p2pExchanges), P2P connections only.
  // Whether this Prims' connection can carry them (the same answer at both ends).
  UDEV bool recvCanExchange() const { return recvPtrExchange_ != nullptr; }
  UDEV bool sendCanExchange() const { return sendPtrExchange_ != nullptr; }
  UDEV uint64_t sendStep() const { return sendStep_; }

  // Receiver, at a message's start: offers `to` (where the sender's process
  // sees this part's destination; 0: none), tagged with this step + 1.
  UDEV void offerDirect(uint64_t to) {
    if (g_.tid == 0) {
      postCounterRelaxed(recvPtrExchange_, to);
      postCounter(recvPtrExchange_ + 1, recvStep_ + 1);   // orders the address before the tag
    }
  }
  // Direct collectives (AllGather, Broadcast, AllReduce's all-gather half:
  // steps whose data lands verbatim in the receiver's buffer at an offset
  // the sender knows). At the start the receiver offers its buffer
  // (offerCollective) and the sender looks for its successor's offer before
  // each step until it has the answer (lookForOffers); with an address,
  // each later send step given an offset (setSendOffset) stores at view +
  // offset and marks its step in place (directMark), and the receiver,
  // seeing the mark, passes the data on from its own buffer (recvCopySend)
  // or has nothing to do (recv).
  UDEV void offerCollective(uint64_t view) {
    offerDirect(view);
    recvOffered_ = view != 0;
  }
  UDEV void lookForOffers() { sendLookTag_ = sendStep_ + 1; }
  // Where the next send step's data goes in the receiver's buffer (bytes);
  // -1: through the slot (a step whose data the receiver combines).
  UDEV void setSendOffset(int64_t bytes) { sendViewOff_ = bytes; }

  // Receiver, for each step of a message it offered an address for: a slot
  // (the step is received into dst as recv() does: returns 0) or the rest of
  // the part in place (1). -1: aborted.
  UDEV int recvOrDirect(S* dst, int64_t n) {
    const uint64_t rs = recvStep_;
    const uint32_t stepNo = ++stepNo_;
    if (g_.tid == 0) {
      waitRecvTail(rs);
      *g_.word = pollCounter(directMark(recvTail_, rs)) == rs + 1;   // written before the tail it waited for
    }
    g_.sync();
    synced_ = true;
    if (abortedBy(*g_.abortA, stepNo)) return -1;
    const bool direct = *g_.word != 0;
    if (!direct) {
      const S* rslot = reinterpret_cast<const S*>(recvBuf_ + (rs % kSteps) * slotBytes_);
      reduceCopy<Fn, false, true, true, false, false, false>(fn_, g_.tid, g_.nthreads, nullptr, rslot, dst, nullptr, n);
    }
    g_.sync();   // the slot's loads are done (and every thread read the word) before the head frees it
    if (g_.tid == 0) {
      if (recvFifo_ != nullptr) storeVolatile64(&recvFifo_[rs % kSteps].size, -1);
      postCounter(recvRemoteHead_, rs + 1);
    }
    recvStep_ = rs + 1;
    return direct ? 1 : 0;
  }
  // Sender, before a step of a message that may be offered: the address the
  // receiver offered for the message whose first step was tag - 1, 1 when it
  // offered none, 0 when no offer is there yet. One thread looks; the group
  // gets its answer across a barrier.
  UDEV uint64_t checkOffer(uint64_t tag) {
    if (g_.tid == 0) *g_.word = lookForOffer(tag);
    g_.sync();
    synced_ = true;
    return *g_.word;
  }
  // Sender: stores the rest of the part at the offered address, marks the
  // step direct in the receiver's word and publishes it with one tail store.
  // The slot of that step is not used; its head still comes back.
  UDEV void sendDirect(const S* src, S* to, int64_t n) {
    const uint64_t ss = sendStep_;
    reduceCopy<Fn, true, false, true, false, false, false>(fn_, g_.tid, g_.nthreads, src, nullptr, to, nullptr, n);
    g_.sync();   // the release store below publishes every thread's stores (as a Simple step's)
    if (g_.tid == sendPoller_) {
      postCounterRelaxed(directMark(sendRemoteTail_, ss), ss + 1);
      postCounter(sendRemoteTail_, ss + 1);
    }
    sendStep_ = ss + 1;
    sentBytes_ += n * (int64_t)sizeof(S);
  }

  // One look at the offer words: the address offered for tag, 1 when the
  // offer is there without one, 0 when it is not there yet.
  UDEV uint64_t lookForOffer(uint64_t tag) {
    if (pollCounter(sendPtrExchange_ + 1) != tag) return 0;
    acquireAfterPoll();
    const uint64_t v = pollCounter(sendPtrExchange_);
    return v != 0 ? v : 1;
  }

  // Stores the advanced steps for the next work / kernel. The end-of-work
  // block barrier orders this before anyone reads them again.
  UDEV void finish() {
    // Every thread loaded the conn's counters in the constructor; with no
    // barrier since (send steps that skipped theirs), one now, before they
    // change under a thread that has yet to load them.
    if (!synced_) g_.sync();
    if (g_.tid == 0) {
      if (rc_) *reinterpret_cast<volatile uint64_t*>(&rc_->step) = recvStep_;
      if (sc_) *reinterpret_cast<volatile uint64_t*>(&sc_->step) = sendStep_;
    }
    // The poller holds the freshest head it read. It also adds this Prims'
    // payload to the connection's byte count: one load and store per Prims,
    // not per step (traffic accounting costs nothing on the step path).
    if (sc_ && g_.tid == sendPoller_) {
      *reinterpret_cast<volatile uint64_t*>(&sc_->headSeen) = sendHeadSeen_;
      if (sentBytes_ != 0) {
        volatile uint64_t* b = &sc_->bytesSent;
        *b = *b + (uint64_t)sentBytes_;
      }
    }
  }

 private:
  UDEV void waitRecvTail(uint64_t rs) {
    int spins = 0;
    while (pollCounter(recvTail_) <= rs) {
      spinPause();
      if (++spins == kAbortCheckSpins) {
        spins = 0;
        if (loadVolatile32(g_.abortFlag)) {
          *g_.abortA = stepNo_;
          return;
        }
      }
    }
    acquireAfterPoll();
  }
  UDEV void waitSendHead(uint64_t ss) {
    // The head only grows: a value seen before that frees slot ss is enough.
    if (sendHeadSeen_ + kSteps > ss) return;
    int spins = 0;
    while ((sendHeadSeen_ = pollCounter(sendHead_)) + kSteps <= ss) {
      spinPause();
      if (++spins == kAbortCheckSpins) {
        spins = 0;
        if (loadVolatile32(g_.abortFlag)) {
          *g_.abortA = stepNo_;
          return;
        }
      }
    }
    acquireAfterPoll();
  }

  const Group g_;
  Fn fn_;
  RecvConn* rc_;
  SendConn* sc_;
  int64_t slotBytes_ = 0;
  int sendPoller_ = 0;
  char* recvBuf_ = nullptr;
  uint64_t* recvTail_ = nullptr;
  uint64_t* recvRemoteHead_ = nullptr;
  uint64_t recvStep_ = 0;
  char* sendBuf_ = nullptr;
  uint64_t* sendRemoteTail_ = nullptr;
  uint64_t* sendHead_ = nullptr;
  uint64_t sendStep_ = 0;
  uint64_t sendHeadSeen_ = 0;     // sender poller only: the last head value read
  int64_t sentBytes_ = 0;         // every thread alike: payload bytes this Prims sent (finish() adds them up)
  uint64_t headStart_ = 0;        // every thread: conn->headSeen when this Prims began
  bool headStartValid_ = true;    // every thread alike: no step has needed a fresher head yet
  bool synced_ = false;           // every thread alike: a step passed a group barrier
  uint32_t stepNo_ = 0;           // steps begun, every thread alike (the abort flags' numbers)
  ConnSlot* recvFifo_ = nullptr;  // network connections only
  ConnSlot* sendFifo_ = nullptr;
  uint64_t* recvPtrExchange_ = nullptr;   // P2P connections only
  uint64_t* sendPtrExchange_ = nullptr;
  // Direct collectives, every thread alike: we offered our buffer; the tag
  // of the successor's offer we still look for (0: none); its buffer as our
  // process sees it once offered, and where the next send step's data goes in it.
  bool recvOffered_ = false;
  uint64_t sendLookTag_ = 0;
  char* sendView_ = nullptr;
  int64_t sendViewOff_ = -1;
  UDEV bool sendInPlace() const { return sendView_ != nullptr && sendViewOff_ >= 0; }
};

}  // namespace uniccl::dev
