// The symmetric kernels' data movement (device/coll_symmetric.h): a range
// of elements read from every LSA rank through a window's flat range and
// reduced in rank order 0, 1, ..., n-1, or copied from one rank.
//
// Speed: 16-byte vectors wherever the source and the destination have the
// same alignment (a scalar head brings both to 16 bytes, a scalar tail
// ends the range), and several loads in flight per thread: a thread loads
// kSymUnroll vectors of each of kSymPeerBatch peers before it reduces the
// first. The loads are plain ones: the barrier before them (symBarrier: a
// system-scope acquire after the poll, then the group's barrier) is what
// makes the peers' data visible, and it is also a compiler barrier; a
// volatile load would add nothing but an order among the loads (on AMD a
// wait for each before the next).
//
// symReduce and symCopy are out of line: their loops get the registers to
// themselves. Inlined into the collectives (at 512 threads a block, CUDA
// gives a thread 128 registers) 4 x 4 vectors in flight spilled about 1 KB
// per thread; 2 x 2 leaves the loops nearly spill-free.
#pragma once

#include "device/port.h"
#include "device/prims.h"
#include "device/reduce.h"

namespace uniccl::dev {

constexpr int kSymUnroll = 2;     // vectors per thread and peer loaded at once
constexpr int kSymPeerBatch = 2;  // peers loaded before the first of them is reduced

// Byte `off` of LSA rank `peer`'s buffer in a flat range.
UDEV char* symFlat(char* flat0, uint32_t stride4G, int peer, size_t off) {
  return flat0 + (size_t)peer * ((size_t)stride4G << 32) + off;
}

// Elements [0, head) and [head + nVec * 16 / sizeof(S), count) move one by
// one, the rest as nVec 16-byte vectors. `src` is the address of element 0
// in any rank's buffer (ranks are 4 GiB multiples apart in a flat range,
// so they share its alignment), `dst` the same for the destination.
struct SymSplit {
  int64_t head, nVec;
};
template <typename S>
UDEV SymSplit symSplit(uintptr_t src, uintptr_t dst, int64_t count) {
  constexpr int64_t kE = 16 / (int64_t)sizeof(S);
  if (((src ^ dst) & 15) != 0 || src % sizeof(S) != 0) return SymSplit{count, 0};
  const int64_t head = imin(count, (int64_t)(((16 - (src & 15)) & 15) / sizeof(S)));
  return SymSplit{head, (count - head) / kE};
}

// Element `i` of the range reduced over the n ranks (from src0, rank 0's element 0).
template <typename Fn>
UDEV typename Fn::S symReduceOne(const Fn& fn, const char* src0, size_t peerStride, int n, int64_t i) {
  using S = typename Fn::S;
  const char* p = src0 + (size_t)i * sizeof(S);
  S a = *reinterpret_cast<const S*>(p);
  for (int r = 1; r < n; r++) a = fn.op(a, *reinterpret_cast<const S*>(p + (size_t)r * peerStride));
  return a;
}

// Vectors v, v + nt, ..., v + (U - 1) nt (from vsrc, rank 0's first vector)
// reduced over the n ranks into acc: kSymPeerBatch ranks' loads, all U of
// each, are issued before the first is used.
template <int U, typename Fn>
UDEV void symReduceVectors(const Fn& fn, const char* vsrc, size_t peerStride, int n, int64_t v, int64_t nt,
                           Pack16 (&acc)[U]) {
  using S = typename Fn::S;
  for (int r0 = 0; r0 < n; r0 += kSymPeerBatch) {
    Pack16 x[kSymPeerBatch][U];
#pragma unroll
    for (int b = 0; b < kSymPeerBatch; b++) {
      if (r0 + b < n) {
        const char* rank = vsrc + (size_t)(r0 + b) * peerStride;
#pragma unroll
        for (int u = 0; u < U; u++) x[b][u] = *reinterpret_cast<const Pack16*>(rank + (size_t)(v + u * nt) * 16);
      }
    }
#pragma unroll
    for (int b = 0; b < kSymPeerBatch; b++) {
      if (r0 + b < n) {
#pragma unroll
        for (int u = 0; u < U; u++) {
          if (r0 + b == 0) {
            acc[u] = x[b][u];
          } else {
            PackView<S, 16> a = toView<S>(acc[u]);
            PackOps<Fn, 16>::op(fn, a, toView<S>(x[b][u]));
            acc[u] = toPack(a);
          }
        }
      }
    }
  }
}

// Elements [0, count) of the range starting at src0 (rank 0's element 0)
// reduced over the n ranks, in rank order, by the group's threads. out
// takes the results: out.vec(i, pack) the 16-byte vector of elements i..,
// out.one(i, value) element i alone. dst: the address of the destination's
// element 0 (vectors only where its alignment is src0's).
template <typename Fn, typename Out>
UDEV_NOINLINE void symReduce(const Fn& fnRef, const char* src0, uint32_t stride4G, int n, int64_t count,
                             uintptr_t dst, const Group& g, const Out& outRef) {
  using S = typename Fn::S;
  // Copies: through the references, every store to the output could change
  // them, so the compiler would reload them after each one.
  const Fn fn = fnRef;
  const Out out = outRef;
  constexpr int64_t kE = 16 / (int64_t)sizeof(S);
  const size_t peerStride = (size_t)stride4G << 32;
  const SymSplit sp = symSplit<S>((uintptr_t)src0, dst, count);
  const char* vsrc = src0 + (size_t)sp.head * sizeof(S);
  const int64_t nt = g.nthreads;
  int64_t v = g.tid;
  for (; v + (kSymUnroll - 1) * nt < sp.nVec; v += kSymUnroll * nt) {
    Pack16 acc[kSymUnroll];
    symReduceVectors<kSymUnroll>(fn, vsrc, peerStride, n, v, nt, acc);
#pragma unroll
    for (int u = 0; u < kSymUnroll; u++) out.vec(sp.head + (v + u * nt) * kE, acc[u]);
  }
  for (; v < sp.nVec; v += nt) {
    Pack16 acc[1];
    symReduceVectors<1>(fn, vsrc, peerStride, n, v, nt, acc);
    out.vec(sp.head + v * kE, acc[0]);
  }
  for (int64_t i = g.tid; i < sp.head; i += nt) out.one(i, symReduceOne(fn, src0, peerStride, n, i));
  for (int64_t i = sp.head + sp.nVec * kE + g.tid; i < count; i += nt)
    out.one(i, symReduceOne(fn, src0, peerStride, n, i));
}

// Results into one local buffer (dst: element 0 of the range).
template <typename S>
struct SymOutLocal {
  S* dst;
  UDEV void vec(int64_t i, const Pack16& v) const { *reinterpret_cast<Pack16*>(dst + i) = v; }
  UDEV void one(int64_t i, S v) const { dst[i] = v; }
};

// Results into every rank's buffer of a flat range (dst0: rank 0's element 0).
template <typename S>
struct SymOutAllRanks {
  char* dst0;
  uint32_t stride4G;
  int n;
  UDEV void vec(int64_t i, const Pack16& v) const {
    for (int r = 0; r < n; r++) *reinterpret_cast<Pack16*>(symFlat(dst0, stride4G, r, (size_t)i * sizeof(S))) = v;
  }
  UDEV void one(int64_t i, S v) const {
    for (int r = 0; r < n; r++) *reinterpret_cast<S*>(symFlat(dst0, stride4G, r, (size_t)i * sizeof(S))) = v;
  }
};

// count elements from src (a rank's buffer in a flat range) to dst, by the
// group's threads: 2 kSymUnroll vectors per thread loaded before the first store.
template <typename S>
UDEV_NOINLINE void symCopy(const char* src, S* dst, int64_t count, const Group& g) {
  constexpr int64_t kE = 16 / (int64_t)sizeof(S);
  constexpr int U = 2 * kSymUnroll;
  const SymSplit sp = symSplit<S>((uintptr_t)src, (uintptr_t)dst, count);
  const Pack16* vs = reinterpret_cast<const Pack16*>(src + (size_t)sp.head * sizeof(S));
  Pack16* vd = reinterpret_cast<Pack16*>(dst + sp.head);
  const int64_t nt = g.nthreads;
  int64_t v = g.tid;
  for (; v + (U - 1) * nt < sp.nVec; v += U * nt) {
    Pack16 x[U];
#pragma unroll
    for (int u = 0; u < U; u++) x[u] = vs[v + u * nt];
#pragma unroll
    for (int u = 0; u < U; u++) vd[v + u * nt] = x[u];
  }
  for (; v < sp.nVec; v += nt) vd[v] = vs[v];
  const S* s = reinterpret_cast<const S*>(src);
  for (int64_t i = g.tid; i < sp.head; i += nt) dst[i] = s[i];
  for (int64_t i = sp.head + sp.nVec * kE + g.tid; i < count; i += nt) dst[i] = s[i];
}

}  // namespace uniccl::dev
