// Tree AllReduce over the double binary tree (common/topo/tree_topo.h):
// channel c works on tree c % 2 (its Channel's treeUp / treeDown), reduces
// its share of the data toward the root slice by slice, and broadcasts the
// result back down, pipelined: a slice moves up (or down) as soon as the
// node has it, so all levels of the tree work at once.
//
// A Prims object binds one receive and one send connection, so a node
// combines its (up to two) children with two Prims objects in sequence:
//
//   role            reduce up (per slice)                    broadcast down (per slice)
//   leaf            src ---------------------------> parent  parent -> dst
//   one child       child0 + src ------------------> parent  parent -> dst, child0
//   two children    child0 + src -> dst (scratch)            parent -> dst, child0
//                   child1 + dst ------------------> parent  dst -> child1
//   root            child0 + src (+ child1) -> dst, then dst -> each child
//
// Non-root nodes split the block into an "up" half and a "down" half (named
// barriers 1 and 2, as p2p items do) so that slice k+1 can move up while
// slice k moves down; the root runs both phases with the whole block, one
// slice after the other (its reduce result is its broadcast input).
//
// dst is shared by the halves of a non-root node: the up half may read it
// (in place: src == dst) and, with two children, writes slice k into it as
// scratch; the down half writes the final slice k. Causality orders them:
// the down half receives slice k only after the root has combined every
// rank's contribution to slice k, which includes the one our up half sent
// after it finished reading and writing dst's slice k (its stores precede
// the step's closing barrier and the counter or flag store that published
// the slice). Slices other than k are disjoint, so the halves never race.
#pragma once

#include "device/coll_ring.h"
#include "device/dev_types.h"
#include "device/p2p.h"
#include "device/port.h"
#include "device/prims.h"
#include "device/reduce.h"

namespace uniccl::dev {

// Per-slice iteration of a channel's share, identical on every rank (the
// share and slice size derive from the work and comm-wide sizes only), so
// each connection moves the same number of steps at both ends.
struct TreeSlices {
  int64_t chOff, chN, slice;
};

template <typename S>
UDEV TreeSlices treeSlices(const Work& w, const CollCtx& c, int proto) {
  TreeSlices t;
  channelShare<S>((int64_t)w.c.count, c, &t.chOff, &t.chN);
  t.slice = sliceElems<S>(c.comm, proto, w.c.sliceBytes);
  return t;
}

// Up half of a non-root node: its subtree's partial result to the parent.
template <typename Fn, int Proto>
UDEV_NOINLINE bool treeReduceUp(const Work& w, const CollCtx& c, const Group& g, const Fn& fn) {
  using S = typename Fn::S;
  const S* src = static_cast<const S*>(w.c.sendbuff);
  S* dst = static_cast<S*>(w.c.recvbuff);
  const Channel* ch = c.channel;
  Peer* peers = ch->peers;
  const int up = ch->treeUp, d0 = ch->treeDown[0], d1 = ch->treeDown[1];
  const TreeSlices t = treeSlices<S>(w, c, Proto);
  if (d0 < 0) {
    Prims<Fn, Proto> p(g, c.comm, fn, nullptr, &peers[up].send);
    for (int64_t off = 0; off < t.chN; off += t.slice) {
      const int64_t o = t.chOff + off, len = imin(t.slice, t.chN - off);
      if (!p.template send<true>(src + o, len)) return false;
    }
    p.finish();
  } else if (d1 < 0) {
    Prims<Fn, Proto> p(g, c.comm, fn, &peers[d0].recv, &peers[up].send);
    for (int64_t off = 0; off < t.chN; off += t.slice) {
      const int64_t o = t.chOff + off, len = imin(t.slice, t.chN - off);
      if (!p.template recvReduceSend<true>(src + o, len)) return false;
    }
    p.finish();
  } else {
    Prims<Fn, Proto> a(g, c.comm, fn, &peers[d0].recv, nullptr);
    Prims<Fn, Proto> b(g, c.comm, fn, &peers[d1].recv, &peers[up].send);
    for (int64_t off = 0; off < t.chN; off += t.slice) {
      const int64_t o = t.chOff + off, len = imin(t.slice, t.chN - off);
      // a's step ends with a barrier (it receives), so b reads every thread's scratch.
      if (!a.template recvReduceCopy<true, false>(src + o, dst + o, len)) return false;
      if (!b.recvReduceSend(dst + o, len)) return false;
    }
    a.finish();
    b.finish();
  }
  return true;
}

// Down half of a non-root node: the result from the parent into dst and on
// to the children.
template <typename Fn, int Proto>
UDEV_NOINLINE bool treeBroadcastDown(const Work& w, const CollCtx& c, const Group& g, const Fn& fn) {
  using S = typename Fn::S;
  S* dst = static_cast<S*>(w.c.recvbuff);
  const Channel* ch = c.channel;
  Peer* peers = ch->peers;
  const int up = ch->treeUp, d0 = ch->treeDown[0], d1 = ch->treeDown[1];
  const TreeSlices t = treeSlices<S>(w, c, Proto);
  Prims<Fn, Proto> a(g, c.comm, fn, &peers[up].recv, d0 < 0 ? nullptr : &peers[d0].send);
  if (d0 < 0) {
    for (int64_t off = 0; off < t.chN; off += t.slice) {
      const int64_t o = t.chOff + off, len = imin(t.slice, t.chN - off);
      if (!a.recv(dst + o, len)) return false;
    }
  } else if (d1 < 0) {
    for (int64_t off = 0; off < t.chN; off += t.slice) {
      const int64_t o = t.chOff + off, len = imin(t.slice, t.chN - off);
      if (!a.recvCopySend(dst + o, len)) return false;
    }
  } else {
    Prims<Fn, Proto> b(g, c.comm, fn, nullptr, &peers[d1].send);
    for (int64_t off = 0; off < t.chN; off += t.slice) {
      const int64_t o = t.chOff + off, len = imin(t.slice, t.chN - off);
      if (!a.recvCopySend(dst + o, len)) return false;
      if (!b.send(dst + o, len)) return false;
    }
    b.finish();
  }
  a.finish();
  return true;
}

// The root, whole block: children's partials + src -> dst (post-op applied
// once, here), sent straight back down. Roots of the trees tree_topo.h
// builds have one child; two are handled for any other topology.
template <typename Fn, int Proto>
UDEV_NOINLINE bool treeRoot(const Work& w, const CollCtx& c, const Group& g, const Fn& fn) {
  using S = typename Fn::S;
  const S* src = static_cast<const S*>(w.c.sendbuff);
  S* dst = static_cast<S*>(w.c.recvbuff);
  const Channel* ch = c.channel;
  Peer* peers = ch->peers;
  const int d0 = ch->treeDown[0], d1 = ch->treeDown[1];
  const TreeSlices t = treeSlices<S>(w, c, Proto);
  if (d1 < 0) {
    Prims<Fn, Proto> p(g, c.comm, fn, &peers[d0].recv, &peers[d0].send);
    for (int64_t off = 0; off < t.chN; off += t.slice) {
      const int64_t o = t.chOff + off, len = imin(t.slice, t.chN - off);
      if (!p.template recvReduceCopySend<true, true>(src + o, dst + o, len)) return false;
    }
    p.finish();
    return true;
  }
  Prims<Fn, Proto> a(g, c.comm, fn, &peers[d0].recv, nullptr);
  Prims<Fn, Proto> b(g, c.comm, fn, &peers[d1].recv, &peers[d0].send);
  Prims<Fn, Proto> s(g, c.comm, fn, nullptr, &peers[d1].send);
  for (int64_t off = 0; off < t.chN; off += t.slice) {
    const int64_t o = t.chOff + off, len = imin(t.slice, t.chN - off);
    if (!a.template recvReduceCopy<true, false>(src + o, dst + o, len)) return false;
    if (!b.template recvReduceCopySend<false, true>(dst + o, dst + o, len)) return false;
    if (!s.send(dst + o, len)) return false;
  }
  a.finish();
  b.finish();
  s.finish();
  return true;
}

// Entry from runCollProto (g: the whole block). nRanks >= 2 here.
template <typename Fn, int Proto>
UDEV_NOINLINE bool treeAllReduce(const Work& w, const CollCtx& c, const Group& g, const Fn& fn) {
  if (c.channel->treeUp < 0) return treeRoot<Fn, Proto>(w, c, g, fn);
  BlockShared& sh = blockShared<BlockShared>();
  const bool upHalf = g.tid < kP2pHalf;
  const Group h = makeGroup(sh, c.comm, upHalf ? 1 : 2, upHalf ? g.tid : g.tid - kP2pHalf, kP2pHalf);
  return upHalf ? treeReduceUp<Fn, Proto>(w, c, h, fn) : treeBroadcastDown<Fn, Proto>(w, c, h, fn);
}

}  // namespace uniccl::dev
