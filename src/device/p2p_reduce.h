// P2p items whose receive half reduces (dev_types.h, p2pReduceRecvProto):
// the rounds of a PAT ReduceScatter (common/core/reducescatter_pat.h).
// The send half is an ordinary message; the receive half combines each
// step with the same elements of its source and writes the result, so it
// needs the datatype: only the collective kernels have it (their Tag), and
// the host launches such items on the datatype's Simple kernel only.
#pragma once

#include "device/coll_ring.h"
#include "device/dev_types.h"
#include "device/p2p.h"
#include "device/port.h"
#include "device/prims.h"
#include "device/reduce.h"

namespace uniccl::dev {

// The receive half: the same part and steps as p2pHalf's (p2pHalfShare;
// Simple slices are whole 16-byte groups of bytes, so sliceElems of S
// makes the same steps as the sender's byte slices, and parts start at
// 16-byte offsets, whole elements of any datatype), each step
// dst = op(received, src).
template <typename Fn>
UDEV_NOINLINE bool p2pRecvReduceHalf(const Work& w, const CollCtx& c, const Group& g) {
  using S = typename Fn::S;
  int64_t off, n;
  p2pHalfShare(w.p.recvPeer, w.p.recvBytes, false, c.chIndex, c.nch, c.comm->rank, c.comm->nRanks, &off, &n);
  if (n == 0) return true;
  Prims<Fn, kProtoSimple> p(g, c.comm, Fn{}, &c.channel->peers[w.p.recvPeer].recv, nullptr);
  // A message this large over P2P makes its sender look for a direct
  // destination (p2pExchanges): offer none, so that every step comes
  // through the slots and passes the reduction.
  if (p2pExchanges(kProtoSimple, w.p.recvBytes, c.comm->p2pDirectMinBytes) && p.recvCanExchange()) p.offerDirect(0);
  const int64_t slice = sliceElems<S>(c.comm, kProtoSimple, w.p.sliceBytes);
  const S* src = reinterpret_cast<const S*>(static_cast<uintptr_t>(p2pReduceSrc(w)) + (uint64_t)off);
  S* dst = reinterpret_cast<S*>(static_cast<char*>(w.p.recvBuff) + off);
  const int64_t elems = n / (int64_t)sizeof(S);
  for (int64_t o = 0; o < elems; o += slice)
    if (!p.template recvReduceCopy<false, false>(src + o, dst + o, imin(slice, elems - o))) return false;
  p.finish();
  return true;
}

// The op is a type from here on: sum, prod, max or min (the host plans no
// other: a scalar op has no PAT path).
// An op this build left out (-Dkernel_ops) has no code; the host never
// plans it.
template <typename Fn>
UDEV void p2pRecvReduceOp(const Work& w, const CollCtx& c, const Group& g) {
  if constexpr (kernelOpBuilt(Fn::kOp)) p2pRecvReduceHalf<Fn>(w, c, g);
}

template <typename Tag>
UDEV void p2pRecvReduce(const Work& w, const CollCtx& c, const Group& g) {
  switch (p2pRecvRedOp(w.p.recvProto)) {
    case kOpSum: p2pRecvReduceOp<RedFn<Tag, kOpSum>>(w, c, g); break;
    case kOpProd: p2pRecvReduceOp<RedFn<Tag, kOpProd>>(w, c, g); break;
    case kOpMax: p2pRecvReduceOp<RedFn<Tag, kOpMax>>(w, c, g); break;
    case kOpMin: p2pRecvReduceOp<RedFn<Tag, kOpMin>>(w, c, g); break;
    default: break;
  }
}

// A p2p item on a Simple collective kernel: as runP2p, except that a
// receive half that reduces runs p2pRecvReduce. Aborts are reported as
// runP2p's are (the groups' shared flags).
template <typename Tag>
UDEV void runP2pReducing(const Work& w, const CollCtx& c, BlockShared& sh) {
  const int tid = threadIdx.x;
  if (!p2pRecvReduces(w.p.recvProto) || tid < kP2pHalf || w.p.sendPeer == c.comm->rank) {
    runP2p(w, c, sh);
    return;
  }
  if (w.p.recvPeer < 0) return;
  p2pRecvReduce<Tag>(w, c, makeGroup(sh, c.comm, 2, tid - kP2pHalf, kP2pHalf));
}

}  // namespace uniccl::dev
