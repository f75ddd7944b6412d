// AllReduce, AllGather and ReduceScatter through symmetric windows (Algo
// kAlgoSymmetric; the host's conditions: common/core/tuning.cc,
// tuneSymmetric). Block b of every rank takes the same share of the
// elements, waits until block b of every rank reached the collective (their
// inputs are ready: the kernels run in stream order after whatever wrote
// them), moves its share through the windows' flat ranges, and passes a
// last barrier (every peer done reading this rank's input and writing its
// output) before the item ends. Reductions run in rank order 0, 1, ...,
// n-1, so every rank computes the same bits.
//
// AllReduce comes in two forms. One-shot: every rank reads its share from
// every peer's input and writes its own output (n reads per element).
// Two-shot: rank r reduces sub-slice r of the block's share from every
// peer's input and stores the result into every peer's output (one read and
// one store per element and rank); in place, the elements a rank reads and
// stores are its sub-slice alone, each read then stored by one thread, so
// nothing a peer still reads is overwritten. Both need two barriers
// whatever the size; one-shot in place would overwrite inputs peers still
// read, so the host gives in-place AllReduces the two-shot form.
//
// The barrier (dev_types.h, symBarrierBytes; DevComm::symBarFlat): thread
// q < nRanks posts the block's new epoch into rank q's inbox[b][me] and
// polls its own inbox[b][q] until rank q reached it too; the post is a
// release after the block's barrier, so every thread's stores to peers
// before it are visible to a peer that saw the epoch. Both sides fence at
// system scope (port.h, postCounterSystem / acquireAfterPollSystem): on HIP
// the windows' data is coarse-grained memory that L2s may hold; the barrier
// words themselves are uncached (memory/mem_alloc.h, memAllocPolled). The
// data moves between barriers with vectors and several loads in flight
// (device/sym_move.h). Every poll looks at
// the abort flag every kAbortCheckSpins spins; a thread that saw it sets
// the group's flag A to the barrier's number within the item (prims.h's
// step numbers: a thread still reading barrier k's flag ignores one set at
// barrier k + 1, and reaches that barrier itself) before the block
// barrier, and every thread leaves after it.
#pragma once

#include "device/coll_ring.h"
#include "device/dev_types.h"
#include "device/port.h"
#include "device/prims.h"
#include "device/sym_move.h"

namespace uniccl::dev {

// One cross-rank barrier of block `block` at epoch `e`, the item's
// barrier number `step` (1, 2, ...). False: aborted (every thread of the
// group returns false at the same barrier).
UDEV bool symBarrier(const CollCtx& c, const Group& g, int block, uint64_t e, uint32_t step) {
  const int n = c.comm->nRanks, me = c.comm->rank;
  char* const bar = c.comm->symBarFlat;
  const uint32_t stride = c.comm->symBarStride4G;
  const size_t inbox = (size_t)kMaxChannels * 8 + (size_t)block * n * 8;
  for (int q = g.tid; q < n; q += g.nthreads) {
    postCounterSystem(reinterpret_cast<uint64_t*>(symFlat(bar, stride, q, inbox + (size_t)me * 8)), e);
    const uint64_t* mine = reinterpret_cast<const uint64_t*>(symFlat(bar, stride, me, inbox + (size_t)q * 8));
    int spins = 0;
    bool aborted = false;
    while (pollCounter(mine) < e) {
      spinPause();
      if (++spins == kAbortCheckSpins) {
        spins = 0;
        if (loadVolatile32(g.abortFlag)) {
          aborted = true;
          break;
        }
      }
    }
    if (aborted) {
      *g.abortA = step;
      break;
    }
    acquireAfterPollSystem(mine);
  }
  g.sync();
  return !abortedBy(*g.abortA, step);
}

// Block `block`'s epoch word in this rank's barrier buffer and its value when
// the item started. Only the block's thread 0 writes the word, at the item's
// end (finish), after the block's last barrier; the item's barrier k waits
// for epoch e0 + k on every rank.
struct SymEpoch {
  uint64_t* word;
  uint64_t e0;
};

UDEV SymEpoch symEpoch(const CollCtx& c, int block) {
  uint64_t* word =
      reinterpret_cast<uint64_t*>(symFlat(c.comm->symBarFlat, c.comm->symBarStride4G, c.comm->rank, (size_t)block * 8));
  return SymEpoch{word, *reinterpret_cast<volatile uint64_t*>(word)};
}

// The item's last barrier was `steps`: the next item counts from there.
UDEV void symFinish(const Group& g, const SymEpoch& ep, uint32_t steps) {
  if (g.tid == 0) *reinterpret_cast<volatile uint64_t*>(ep.word) = ep.e0 + steps;
}

template <typename Fn>
UDEV_NOINLINE bool symAllReduce(const Work& w, const CollCtx& c, const Group& g, const Fn& fn) {
  using S = typename Fn::S;
  const int n = c.comm->nRanks, me = c.comm->rank;
  const int block = (int)blockIdx.x;
  const SymEpoch ep = symEpoch(c, block);
  if (!symBarrier(c, g, block, ep.e0 + 1, 1)) return false;
  int64_t chOff, chN;
  channelShare<S>((int64_t)w.s.count, c, &chOff, &chN);
  const char* src = w.s.sendFlat + (size_t)chOff * sizeof(S);
  if (w.s.recvFlat == nullptr) {
    // One-shot (out of place only): every element from every peer.
    S* dst = static_cast<S*>(w.s.recvbuff) + chOff;
    symReduce(fn, src, w.s.sendStride4G, n, chN, (uintptr_t)dst, g, SymOutLocal<S>{dst});
  } else {
    // Two-shot: this rank's sub-slice [lo, hi) of the block's share, whole
    // 16-byte vectors (every rank splits the same way).
    const int64_t part = alignUp(divUpFast(chN, n), 16 / (int64_t)sizeof(S));
    const int64_t lo = imin(part * me, chN), hi = imin(lo + part, chN);
    const size_t off = (size_t)lo * sizeof(S);
    char* dst0 = symFlat(w.s.recvFlat, w.s.recvStride4G, 0, (size_t)chOff * sizeof(S) + off);
    symReduce(fn, src + off, w.s.sendStride4G, n, hi - lo, (uintptr_t)dst0, g,
              SymOutAllRanks<S>{dst0, w.s.recvStride4G, n});
  }
  g.sync();
  if (!symBarrier(c, g, block, ep.e0 + 2, 2)) return false;
  symFinish(g, ep, 2);
  return true;
}

// AllGather: block b copies its share of every rank's count elements from
// the rank's send buffer (through the flat range) to its place in the local
// output. Nobody writes what peers read (in place, a rank's own share of its
// output is its input, which it leaves as is), so two barriers do: inputs
// ready, then every peer done reading before a later kernel may overwrite
// this rank's input.
template <typename Fn>
UDEV_NOINLINE bool symAllGather(const Work& w, const CollCtx& c, const Group& g) {
  using S = typename Fn::S;
  const int n = c.comm->nRanks, me = c.comm->rank;
  const int block = (int)blockIdx.x;
  const SymEpoch ep = symEpoch(c, block);
  if (!symBarrier(c, g, block, ep.e0 + 1, 1)) return false;
  const int64_t count = (int64_t)w.s.count;
  int64_t chOff, chN;
  channelShare<S>(count, c, &chOff, &chN);
  char* flat0 = const_cast<char*>(w.s.sendFlat);
  S* out = static_cast<S*>(w.s.recvbuff);
  for (int p = 0; p < n; p++) {
    // In place, rank p's input is its share p of its output (sendFlat: the output's start).
    const int64_t from = (w.s.inPlace ? (int64_t)p * count : 0) + chOff;
    const S* src = reinterpret_cast<const S*>(symFlat(flat0, w.s.sendStride4G, p, (size_t)from * sizeof(S)));
    S* dst = out + (int64_t)p * count + chOff;
    if (p == me && w.s.inPlace) continue;
    symCopy(reinterpret_cast<const char*>(src), dst, chN, g);
  }
  g.sync();
  if (!symBarrier(c, g, block, ep.e0 + 2, 2)) return false;
  symFinish(g, ep, 2);
  return true;
}

// ReduceScatter: block b reduces its share of this rank's count elements
// (elements [rank * count, (rank + 1) * count) of every rank's input, read
// through the flat range) in rank order 0, 1, ..., n-1 and writes them to
// the local output. Nobody writes what peers read: peer q reads share q of
// every input and this rank writes only its own output (in place, share
// `rank` of its own input, which each thread reads before it writes the
// same element), so two barriers do: inputs ready, then every peer done
// reading before a later kernel may overwrite this rank's input.
template <typename Fn>
UDEV_NOINLINE bool symReduceScatter(const Work& w, const CollCtx& c, const Group& g, const Fn& fn) {
  using S = typename Fn::S;
  const int n = c.comm->nRanks, me = c.comm->rank;
  const int block = (int)blockIdx.x;
  const SymEpoch ep = symEpoch(c, block);
  if (!symBarrier(c, g, block, ep.e0 + 1, 1)) return false;
  const int64_t count = (int64_t)w.s.count;
  int64_t chOff, chN;
  channelShare<S>(count, c, &chOff, &chN);
  S* dst = static_cast<S*>(w.s.recvbuff) + chOff;
  const int64_t from = (int64_t)me * count + chOff;
  symReduce(fn, w.s.sendFlat + (size_t)from * sizeof(S), w.s.sendStride4G, n, chN, (uintptr_t)dst, g,
            SymOutLocal<S>{dst});
  g.sync();
  if (!symBarrier(c, g, block, ep.e0 + 2, 2)) return false;
  symFinish(g, ep, 2);
  return true;
}

}  // namespace uniccl::dev
