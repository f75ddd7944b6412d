// Ring algorithms for the five collectives (NCCL's runRing shapes): the
// channel's element range is cut deterministically from data every rank
// knows (count, nRanks, channels, slice size), so sender and receiver always
// move the same number of steps.
#pragma once

#include "device/dev_types.h"
#include "device/kernel_choices.h"
#include "device/port.h"
#include "device/prims.h"
#include "device/reduce.h"

namespace uniccl::dev {

// Everything a ring algorithm needs about the current block and item.
struct CollCtx {
  const DevComm* comm;
  Channel* channel;
  int chIndex;   // this block's index among the item's channels
  int nch;       // channels of the item
};

// Contiguous share of `total` elements for channel chIndex, in multiples of
// 16 bytes so every share starts 16-byte aligned relative to the buffer.
template <typename S>
UDEV void channelShare(int64_t total, const CollCtx& c, int64_t* off, int64_t* n) {
  constexpr int64_t kG = 16 / sizeof(S);
  const int64_t per = alignUp(divUpFast(total, c.nch), kG);
  *off = per * c.chIndex;
  *n = imax(0, imin(per, total - *off));
}

template <typename Fn>
UDEV Fn makeFn(const Work& w) {
  using S = typename Fn::S;
  Fn fn{};
  if (w.c.scalarKind == kScalarPtr) {
    fn.scalar = *reinterpret_cast<const S*>(static_cast<uintptr_t>(w.c.scalar));
  } else if (w.c.scalarKind == kScalarInvRanks) {
    // fp8 ncclAvg: 1/n in this target's fp8 encoding (the host cannot know it).
    if constexpr (Fn::kHasPre && Math<typename Fn::T>::kFromFloat)
      fn.scalar = Math<typename Fn::T>::fromFloat(1.0 / (double)w.c.scalar);
  } else {
    const uint64_t bits = w.c.scalar;
    memcpy(&fn.scalar, &bits, sizeof(S));  // little endian: the low bytes
  }
  return fn;
}

// Direct collectives (AllGather, Broadcast, AllReduce's all-gather half;
// dev_types.h p2pExchanges, Prims::offerCollective): a Simple collective of at least
// p2pDirectMinBytes of output over P2P connections offers this rank's
// output buffer to its ring predecessor (the view the host put in the item,
// or 0) and looks for its successor's offer. True: the exchange runs (the
// caller then gives every send step its offset in the output).
template <int Proto, typename P>
UDEV bool startDirect(const Work& w, const CollCtx& c, P& p, uint64_t outBytes) {
  if constexpr (Proto != kProtoSimple) {
    return false;
  } else {
    if (!p2pExchanges(Proto, outBytes, c.comm->p2pDirectMinBytes)) return false;
    if (p.recvCanExchange()) p.offerCollective(collRecvView(w));
    if (p.sendCanExchange()) p.lookForOffers();
    return true;
  }
}

template <typename Fn, int Proto>
UDEV_NOINLINE bool ringAllReduce(const Work& w, const CollCtx& c, const Group& g, const Fn& fn) {
  using S = typename Fn::S;
  constexpr int64_t kG = 16 / sizeof(S);
  const int n = c.comm->nRanks;
  const int idx = c.channel->ringIndex;
  const S* src = static_cast<const S*>(w.c.sendbuff);
  S* dst = static_cast<S*>(w.c.recvbuff);
  int64_t chOff, chN;
  channelShare<S>((int64_t)w.c.count, c, &chOff, &chN);
  Prims<Fn, Proto> p(g, c.comm, fn, &c.channel->peers[c.channel->ringPrev].recv,
                     &c.channel->peers[c.channel->ringNext].send);
  // The all-gather half stores verbatim: with the successor's output
  // offered, its steps go there in place (the reduce-scatter half's data is
  // combined by the receiver: slots).
  const bool direct = startDirect<Proto>(w, c, p, (uint64_t)w.c.count * sizeof(S));
  const int64_t slice = sliceElems<S>(c.comm, Proto, w.c.sliceBytes);
  const int64_t loopSize = slice * n;
  for (int64_t off = 0; off < chN; off += loopSize) {
    const int64_t rem = imin(loopSize, chN - off);
    // 64-bit on purpose: divUpFast here made AllReduce 0.1-0.25 us slower at
    // 128 B-32 KiB on 4 H200s (graphs), though it sped up the channel shares.
    const int64_t cs = imin(slice, alignUp(divUp(rem, n), kG));
    auto at = [&](int j, int64_t* o) {
      *o = chOff + off + cs * j;
      return imax(0, imin(cs, rem - cs * j));
    };
    int64_t o, len;
    // Reduce-scatter phase.
    if (direct) p.setSendOffset(-1);
    len = at((idx + n - 1) % n, &o);
    if (!p.template send<true>(src + o, len)) return false;
    for (int k = 2; k < n; k++) {
      len = at((idx + n - k) % n, &o);
      if (!p.template recvReduceSend<true>(src + o, len)) return false;
    }
    len = at(idx, &o);
    if (direct) p.setSendOffset(o * (int64_t)sizeof(S));   // the reduced chunk starts the all-gather
    if (!p.template recvReduceCopySend<true, true>(src + o, dst + o, len)) return false;
    // All-gather phase.
    for (int k = 1; k < n - 1; k++) {
      len = at((idx + n - k) % n, &o);
      if (direct) p.setSendOffset(o * (int64_t)sizeof(S));
      if (!p.recvCopySend(dst + o, len)) return false;
    }
    len = at((idx + 1) % n, &o);
    if (!p.recv(dst + o, len)) return false;
  }
  p.finish();
  return true;
}

// AllReduce on a 2-rank ring (the planner sets w.c.exchange): both ranks
// send their share and combine what arrives with their own, one hop where
// reduce-scatter + all-gather need two. The same elements cross the link;
// op(peer, own) on one rank and op(own, peer) on the other are the same bits
// for these commutative ops.
template <typename Fn, int Proto>
UDEV_NOINLINE bool exchangeAllReduce(const Work& w, const CollCtx& c, const Group& g, const Fn& fn) {
  using S = typename Fn::S;
  const S* src = static_cast<const S*>(w.c.sendbuff);
  S* dst = static_cast<S*>(w.c.recvbuff);
  int64_t chOff, chN;
  channelShare<S>((int64_t)w.c.count, c, &chOff, &chN);
  Prims<Fn, Proto> p(g, c.comm, fn, &c.channel->peers[c.channel->ringPrev].recv,
                     &c.channel->peers[c.channel->ringNext].send);
  const int64_t slice = sliceElems<S>(c.comm, Proto, w.c.sliceBytes);
  for (int64_t off = 0; off < chN; off += slice) {
    const int64_t o = chOff + off, len = imin(slice, chN - off);
    if (!p.template send<true>(src + o, len)) return false;
    if (!p.template recvReduceCopy<true, true>(src + o, dst + o, len)) return false;
  }
  p.finish();
  return true;
}

template <typename Fn, int Proto>
UDEV_NOINLINE bool ringBroadcast(const Work& w, const CollCtx& c, const Group& g, const Fn& fn) {
  using S = typename Fn::S;
  // Roles from the ring neighbours (no lookup of the root's ring position):
  // the last rank is the one whose successor is the root.
  const bool isRoot = c.comm->rank == w.c.root;
  const bool isLast = c.channel->ringNext == w.c.root;
  const S* src = static_cast<const S*>(w.c.sendbuff);
  S* dst = static_cast<S*>(w.c.recvbuff);
  int64_t chOff, chN;
  channelShare<S>((int64_t)w.c.count, c, &chOff, &chN);
  Prims<Fn, Proto> p(g, c.comm, fn, isRoot ? nullptr : &c.channel->peers[c.channel->ringPrev].recv,
                     isLast ? nullptr : &c.channel->peers[c.channel->ringNext].send);
  const bool direct = startDirect<Proto>(w, c, p, (uint64_t)w.c.count * sizeof(S));
  const int64_t slice = sliceElems<S>(c.comm, Proto, w.c.sliceBytes);
  for (int64_t off = 0; off < chN; off += slice) {
    const int64_t o = chOff + off, len = imin(slice, chN - off);
    if (direct) p.setSendOffset(o * (int64_t)sizeof(S));
    bool ok;
    if (isRoot) {
      ok = (src == dst) ? p.send(src + o, len)
                        : p.copySend(src + o, dst + o, len);
    } else if (isLast) {
      ok = p.recv(dst + o, len);
    } else {
      ok = p.recvCopySend(dst + o, len);
    }
    if (!ok) return false;
  }
  p.finish();
  return true;
}

template <typename Fn, int Proto>
UDEV_NOINLINE bool ringReduce(const Work& w, const CollCtx& c, const Group& g, const Fn& fn) {
  using S = typename Fn::S;
  // The first rank is the one whose predecessor is the root.
  const bool isRoot = c.comm->rank == w.c.root;
  const bool isFirst = c.channel->ringPrev == w.c.root;
  const S* src = static_cast<const S*>(w.c.sendbuff);
  S* dst = static_cast<S*>(w.c.recvbuff);
  int64_t chOff, chN;
  channelShare<S>((int64_t)w.c.count, c, &chOff, &chN);
  Prims<Fn, Proto> p(g, c.comm, fn, isFirst ? nullptr : &c.channel->peers[c.channel->ringPrev].recv,
                     isRoot ? nullptr : &c.channel->peers[c.channel->ringNext].send);
  const int64_t slice = sliceElems<S>(c.comm, Proto, w.c.sliceBytes);
  for (int64_t off = 0; off < chN; off += slice) {
    const int64_t o = chOff + off, len = imin(slice, chN - off);
    bool ok;
    if (isFirst) ok = p.template send<true>(src + o, len);
    else if (isRoot) ok = p.template recvReduceCopy<true, true>(src + o, dst + o, len);
    else ok = p.template recvReduceSend<true>(src + o, len);
    if (!ok) return false;
  }
  p.finish();
  return true;
}

template <typename Fn, int Proto>
UDEV_NOINLINE bool ringAllGather(const Work& w, const CollCtx& c, const Group& g, const Fn& fn) {
  using S = typename Fn::S;
  const int n = c.comm->nRanks;
  const int idx = c.channel->ringIndex;
  const int64_t count = (int64_t)w.c.count;
  const S* src = static_cast<const S*>(w.c.sendbuff);
  S* dst = static_cast<S*>(w.c.recvbuff);
  const int* ringRanks = c.channel->ringRanks;
  int64_t chOff, chN;
  channelShare<S>(count, c, &chOff, &chN);
  Prims<Fn, Proto> p(g, c.comm, fn, &c.channel->peers[c.channel->ringPrev].recv,
                     &c.channel->peers[c.channel->ringNext].send);
  const bool direct = startDirect<Proto>(w, c, p, (uint64_t)count * n * sizeof(S));
  const int64_t slice = sliceElems<S>(c.comm, Proto, w.c.sliceBytes);
  const int64_t mine = (int64_t)c.comm->rank * count;
  for (int64_t off = 0; off < chN; off += slice) {
    const int64_t o = chOff + off, len = imin(slice, chN - off);
    bool ok;
    if (direct) p.setSendOffset((mine + o) * (int64_t)sizeof(S));
    // In place, src is already our block of dst: only send it.
    ok = (src == dst + mine) ? p.send(src + o, len)
                             : p.copySend(src + o, dst + mine + o, len);
    if (!ok) return false;
    for (int k = 1; k < n - 1; k++) {
      const int64_t b = (int64_t)ringRanks[(idx + n - k) % n] * count;
      if (direct) p.setSendOffset((b + o) * (int64_t)sizeof(S));
      if (!p.recvCopySend(dst + b + o, len)) return false;
    }
    const int64_t b = (int64_t)c.channel->ringNext * count;  // ringRanks[(idx + 1) % n]
    if (!p.recv(dst + b + o, len)) return false;
  }
  p.finish();
  return true;
}

template <typename Fn, int Proto>
UDEV_NOINLINE bool ringReduceScatter(const Work& w, const CollCtx& c, const Group& g, const Fn& fn) {
  using S = typename Fn::S;
  const int n = c.comm->nRanks;
  const int idx = c.channel->ringIndex;
  const int64_t count = (int64_t)w.c.count;
  const S* src = static_cast<const S*>(w.c.sendbuff);
  S* dst = static_cast<S*>(w.c.recvbuff);
  const int* ringRanks = c.channel->ringRanks;
  int64_t chOff, chN;
  channelShare<S>(count, c, &chOff, &chN);
  Prims<Fn, Proto> p(g, c.comm, fn, &c.channel->peers[c.channel->ringPrev].recv,
                     &c.channel->peers[c.channel->ringNext].send);
  const int64_t slice = sliceElems<S>(c.comm, Proto, w.c.sliceBytes);
  const int64_t mine = (int64_t)c.comm->rank * count;
  for (int64_t off = 0; off < chN; off += slice) {
    const int64_t o = chOff + off, len = imin(slice, chN - off);
    int64_t b = (int64_t)c.channel->ringPrev * count;  // ringRanks[(idx + n - 1) % n]
    if (!p.template send<true>(src + b + o, len)) return false;
    for (int k = 2; k < n; k++) {
      b = (int64_t)ringRanks[(idx + n - k) % n] * count;
      if (!p.template recvReduceSend<true>(src + b + o, len)) return false;
    }
    if (!p.template recvReduceCopy<true, true>(src + mine + o, dst + o, len)) return false;
  }
  p.finish();
  return true;
}

// nRanks == 1: every collective is a local (pre-op, post-op) copy.
template <typename Fn>
UDEV_NOINLINE void localColl(const Work& w, const CollCtx& c, const Group& g, const Fn& fn) {
  using S = typename Fn::S;
  int64_t chOff, chN;
  channelShare<S>((int64_t)w.c.count, c, &chOff, &chN);
  const S* src = static_cast<const S*>(w.c.sendbuff) + chOff;
  S* dst = static_cast<S*>(w.c.recvbuff) + chOff;
  reduceCopy<Fn, true, false, true, false, true, true>(fn, g.tid, g.nthreads, src, nullptr, dst, nullptr, chN);
}

// Tree AllReduce (device/coll_tree.h, included at the end of this file).
template <typename Fn, int Proto>
UDEV_NOINLINE bool treeAllReduce(const Work& w, const CollCtx& c, const Group& g, const Fn& fn);

template <typename Fn, int Proto>
UDEV bool runCollProto(const Work& w, const CollCtx& c, const Group& g) {
  // An op this build of the kernels left out (-Dkernel_ops): no code, and
  // the host never plans it (core/planner.cc).
  if constexpr (!kernelOpBuilt(Fn::kOp)) {
    return true;
  } else {
    const Fn fn = makeFn<Fn>(w);
    if (c.comm->nRanks == 1) {
      localColl(w, c, g, fn);
      return true;
    }
    switch (w.coll) {
      case kCollAllReduce:
        if (w.c.algo == kAlgoTree) return treeAllReduce<Fn, Proto>(w, c, g, fn);
        // Only where the host can plan it (kernel_choices.h, collKernelRuns).
        if constexpr (collKernelRuns(kCollAllReduce, kAlgoRing, Proto, Fn::kOp, Fn::T::kDtype, /*exchange=*/true))
          if (w.c.exchange) return exchangeAllReduce<Fn, Proto>(w, c, g, fn);
        return ringAllReduce<Fn, Proto>(w, c, g, fn);
      case kCollReduce: return ringReduce<Fn, Proto>(w, c, g, fn);
      case kCollReduceScatter: return ringReduceScatter<Fn, Proto>(w, c, g, fn);
      default: return true;
    }
  }
}

// Broadcast and AllGather never combine: instantiated once (no op).
template <typename Tag, int Proto>
UDEV bool runCopyColl(const Work& w, const CollCtx& c, const Group& g) {
  using Fn = RedFn<Tag, kOpSum>;
  const Fn fn{};
  if (c.comm->nRanks == 1) {
    int64_t chOff, chN;
    channelShare<typename Fn::S>((int64_t)w.c.count, c, &chOff, &chN);
    const auto* src = static_cast<const typename Fn::S*>(w.c.sendbuff) + chOff;
    auto* dst = static_cast<typename Fn::S*>(w.c.recvbuff) + chOff;
    if (src != dst)
      reduceCopy<Fn, true, false, true, false, false, false>(fn, g.tid, g.nthreads, src, nullptr, dst, nullptr, chN);
    return true;
  }
  return w.coll == kCollBroadcast ? ringBroadcast<Fn, Proto>(w, c, g, fn) : ringAllGather<Fn, Proto>(w, c, g, fn);
}

// One-shot AllReduce, AllGather and ReduceScatter through symmetric
// windows (device/coll_symmetric.h, included at the end of this file):
// AllReduce and ReduceScatter with the ops without a scalar (the host plans
// no other).
template <typename Fn>
UDEV_NOINLINE bool symAllReduce(const Work& w, const CollCtx& c, const Group& g, const Fn& fn);
template <typename Fn>
UDEV_NOINLINE bool symAllGather(const Work& w, const CollCtx& c, const Group& g);
template <typename Fn>
UDEV_NOINLINE bool symReduceScatter(const Work& w, const CollCtx& c, const Group& g, const Fn& fn);

// The reducing symmetric collectives, once their op is a type.
template <typename Fn>
UDEV bool runSymmetricReduce(const Work& w, const CollCtx& c, const Group& g, const Fn& fn) {
  return w.coll == kCollReduceScatter ? symReduceScatter(w, c, g, fn) : symAllReduce(w, c, g, fn);
}

// An op this build of the kernels left out (kernelOpBuilt) has no code:
// the host never plans it (core/planner.cc).
template <typename Fn>
UDEV bool runSymmetricOp(const Work& w, const CollCtx& c, const Group& g) {
  if constexpr (kernelOpBuilt(Fn::kOp)) return runSymmetricReduce(w, c, g, Fn{});
  return true;
}

template <typename Tag>
UDEV bool runSymmetric(const Work& w, const CollCtx& c, const Group& g) {
  if (w.coll == kCollAllGather) return symAllGather<RedFn<Tag, kOpSum>>(w, c, g);
  switch (w.s.redOp) {
    case kOpSum: return runSymmetricOp<RedFn<Tag, kOpSum>>(w, c, g);
    case kOpProd: return runSymmetricOp<RedFn<Tag, kOpProd>>(w, c, g);
    case kOpMax: return runSymmetricOp<RedFn<Tag, kOpMax>>(w, c, g);
    case kOpMin: return runSymmetricOp<RedFn<Tag, kOpMin>>(w, c, g);
    default: return true;
  }
}

template <typename Tag, int Proto>
UDEV bool runCollOp(const Work& w, const CollCtx& c, const Group& g) {
  if (w.coll == kCollBroadcast || w.coll == kCollAllGather) return runCopyColl<Tag, Proto>(w, c, g);
  switch (w.c.redOp) {
    case kOpSum: return runCollProto<RedFn<Tag, kOpSum>, Proto>(w, c, g);
    case kOpProd: return runCollProto<RedFn<Tag, kOpProd>, Proto>(w, c, g);
    case kOpMax: return runCollProto<RedFn<Tag, kOpMax>, Proto>(w, c, g);
    case kOpMin: return runCollProto<RedFn<Tag, kOpMin>, Proto>(w, c, g);
    case kOpPreMulSum: return runCollProto<RedFn<Tag, kOpPreMulSum>, Proto>(w, c, g);
    case kOpSumPostDiv:
      // ncclAvg over integers only (collKernelRuns): no code for the others.
      if constexpr (collKernelRuns(kCollAllReduce, kAlgoRing, Proto, kOpSumPostDiv, Tag::kDtype, false))
        return runCollProto<RedFn<Tag, kOpSumPostDiv>, Proto>(w, c, g);
      return true;
    default: return true;
  }
}

// Out of line on purpose: inlined into the kernel entry, the dispatch over
// every op, protocol and algorithm made the entry function spill (an
// 864-byte frame on sm_90) and each launch spent about 2.6 us more between
// kernel entry and its first work item than the p2p kernel (globalTimer
// stamps on H200); out of line, a graph-launched 8-byte AllReduce on 2 GPUs
// went from 7.8 to 4.8 us (docs/performance-history.md).
//
// One protocol per kernel (device/kernel_coll.in): the host launches an
// item on the kernel of its datatype and protocol (core/planner.cc), so
// each kernel, and the source it is compiled from, holds a third of the
// code and the build spreads over more cores.
template <typename Tag, int Proto>
UDEV_NOINLINE bool runColl(const Work& w, const CollCtx& c, const Group& g) {
  static_assert(Proto != kProtoLL128 || kCollKernelsHaveLL128, "no LL128 collective kernels on this target");
  return runCollOp<Tag, Proto>(w, c, g);
}

}  // namespace uniccl::dev

#include "device/coll_tree.h"
#include "device/coll_symmetric.h"
