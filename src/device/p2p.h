// Point-to-point items: the block splits into a send half and a receive half
// that progress concurrently with their own barriers, so a rank that sends to
// and receives from the same peer in one item never waits on itself.
#pragma once

#include "device/coll_ring.h"
#include "device/dev_types.h"
#include "device/port.h"
#include "device/prims.h"
#include "device/reduce.h"

namespace uniccl::dev {

// Shared memory of a block: the current work item, copies of the
// communicator and of the block's channel, sub-group barriers and the
// per-group abort flags (group 0: whole block, 1: send half, 2: recv half).
// The copies are taken at kernel entry (kernel.h): the algorithms find ranks,
// ring neighbours and connection pointers there without a dependent load
// from device memory. Only fields the host fixed before the launch are read
// from them; Channel::profCount is not (profiling stamps use the global one).
struct BlockShared {
  Work work;
  DevComm comm;
  Channel channel;
  SubBarrierState bars[3];
  uint32_t abortA[3];
  uint32_t abortB[3];
  uint64_t words[3][2];
  uint8_t skipItem[kMaxInlineWorks];   // inline item i > 0 has nothing for this block (kernel.h)
};

constexpr int kP2pHalf = kThreadsPerBlock / 2;

UDEV Group makeGroup(BlockShared& sh, const DevComm* comm, int id, int tid, int nthreads) {
  Group g;
  g.tid = tid;
  g.nthreads = nthreads;
  g.barId = id;
  g.bar = &sh.bars[id];
  g.abortA = &sh.abortA[id];
  g.abortB = &sh.abortB[id];
  g.abortFlag = comm->abortFlag;
  g.word = sh.words[id];
  return g;
}

// A part of a message is at least this long: one pass of a half block's
// LL lines moves 2 KiB, so a smaller part only adds channels (and their
// round trips) without making the message faster, and spread over more
// channels than p2pPart gives a round, the rounds of an AlltoAll would meet
// on the same blocks again (4 H200s: 1 KiB per peer in 16-byte parts over
// 64 channels took 10-11.7 us per AlltoAll against 8.3-8.6 below that).
constexpr int64_t kP2pMinPartBytes = 1024;

// Byte range of part `part` of `nch`: contiguous parts with 16-byte
// aligned sizes (a small message fills the first parts only). Every block
// works this out for every p2p item of a launch, most blocks only to find
// they have no part, and a block reaches its own item after all earlier
// ones: a part that would start at or past the message's end (parts are at
// least kP2pMinPartBytes) is answered without dividing, and the division
// is 32-bit where the size allows (divUpFast).
UDEV void p2pShare(uint64_t bytes, int part, int nch, int64_t* off, int64_t* n) {
  if ((uint64_t)part * kP2pMinPartBytes >= bytes) {
    *off = 0;
    *n = 0;
    return;
  }
  const int64_t per = imax(alignUp(divUpFast((int64_t)bytes, nch), 16), kP2pMinPartBytes);
  *off = per * part;
  *n = imax(0, imin(per, (int64_t)bytes - *off));
}

// Which part of a message of round `round` (the item's peer is rank +-
// round) this channel carries: rounds start their parts on channels
// spread evenly over the item's channels. A block runs its items one after
// another, so small messages of different rounds (an AlltoAll's, each on
// the first few parts) land on different blocks and travel at once instead
// of one round after the other. Both ends of a message compute the same
// round and channel count, hence the same channel for every part.
UDEV int p2pPart(int chIndex, int nch, int nRanks, int round) {
  const int first = nRanks > 2 ? (int)((uint32_t)((round - 1) * nch) / (uint32_t)(nRanks - 1)) : 0;
  const int part = chIndex - first;
  return part < 0 ? part + nch : part;
}

// How many parts a message of `bytes` is cut into: a message up to
// kP2pRoundSpreadBytes stays within its round's own nch / (nRanks - 1)
// channels, so that the rounds of an AlltoAll of such messages never share
// a block (4 H200s, graphs: 128 KiB per peer took 13.5 us per AlltoAll over
// up to 128 channels, 10.2 within 42, NCCL 10.7; 256 KiB per peer 54.9 GB/s
// busbw against 70.0, NCCL 53.8). A larger one takes every channel: a lone
// large message needs them all (the copy is SM-bound). A lone message of
// 128-512 KiB pays for it: SendRecv 5.2 -> 5.6 us at 128 KiB, 7.8 -> 8.5 at
// 512 KiB (NCCL 10.0 and 18.3).
constexpr uint64_t kP2pRoundSpreadBytes = 512 << 10;
UDEV int p2pParts(int nch, int nRanks, uint64_t bytes) {
  if (nRanks <= 2 || bytes > kP2pRoundSpreadBytes) return nch;
  return (int)imax(1, nch / (nRanks - 1));
}

// The byte range [*off, *off + *n) of a message of `bytes` to or from
// `peer` (sent if `sending`) that block chIndex of the item's nch carries
// (*n == 0: none; the peer's block computes the same).
UDEV void p2pHalfShare(int peer, uint64_t bytes, bool sending, int chIndex, int nch, int rank, int nRanks,
                       int64_t* off, int64_t* n) {
  int round = sending ? peer - rank : rank - peer;
  if (round < 0) round += nRanks;
  p2pShare(bytes, p2pPart(chIndex, nch, nRanks, round), p2pParts(nch, nRanks, bytes), off, n);
}

// The part of a message to itself of `bytes` that block chIndex of nch
// copies. Its parts are laid from the last channel down, away from round
// 1's first part (channel 0), so a small AlltoAll's own block and its first
// round travel at once.
UDEV void p2pSelfShare(uint64_t bytes, int chIndex, int nch, int64_t* off, int64_t* n) {
  p2pShare(bytes, nch - 1 - chIndex, nch, off, n);
}

// Whether block chIndex of nch has anything to do in a p2p item with these
// halves (peer -1: no such half; sendPeer == rank: a copy to itself).
UDEV bool p2pBlockHasPart(int sendPeer, uint64_t sendBytes, int recvPeer, uint64_t recvBytes, int chIndex, int nch,
                          int rank, int nRanks) {
  int64_t off, n;
  if (sendPeer == rank) {
    p2pSelfShare(sendBytes, chIndex, nch, &off, &n);
    return n > 0;
  }
  if (sendPeer >= 0) {
    p2pHalfShare(sendPeer, sendBytes, true, chIndex, nch, rank, nRanks, &off, &n);
    if (n > 0) return true;
  }
  if (recvPeer >= 0) {
    p2pHalfShare(recvPeer, recvBytes, false, chIndex, nch, rank, nRanks, &off, &n);
    if (n > 0) return true;
  }
  return false;
}

template <int Proto>
UDEV_NOINLINE bool p2pHalf(const Work& w, const CollCtx& c, const Group& g, bool sending) {
  using Fn = RedFn<TU8, kOpSum>;
  const Fn fn{};
  const int peer = sending ? w.p.sendPeer : w.p.recvPeer;
  int64_t off, n;
  const uint64_t bytes = sending ? w.p.sendBytes : w.p.recvBytes;
  p2pHalfShare(peer, bytes, sending, c.chIndex, c.nch, c.comm->rank, c.comm->nRanks, &off, &n);
  // No part of this message here (the peer's channel computes the same):
  // no step moves, so the connection is not even looked at. Most blocks of
  // a small message's item take this exit, and the blocks that carry a
  // later round get to it sooner.
  if (n == 0) return true;
  Peer* peers = c.channel->peers;
  Prims<Fn, Proto> p(g, c.comm, fn, sending ? nullptr : &peers[peer].recv, sending ? &peers[peer].send : nullptr);
  const int64_t slice = sliceElems<uint8_t>(c.comm, Proto, w.p.sliceBytes);
  const uint8_t* src = static_cast<const uint8_t*>(w.p.sendBuff) + off;
  uint8_t* dst = static_cast<uint8_t*>(w.p.recvBuff) + off;
  // A direct message (dev_types.h, p2pExchanges): the receiver offers its
  // destination; the sender looks for the offer before each step and, once
  // it is there, stores the rest of the part at once.
  bool exchange = false;
  if constexpr (Proto == kProtoSimple)
    exchange = p2pExchanges(Proto, bytes, c.comm->p2pDirectMinBytes) &&
               (sending ? p.sendCanExchange() : p.recvCanExchange());
  uint64_t view = 0;
  if (exchange && !sending) {
    view = p2pRecvView(w);
    p.offerDirect(view != 0 ? view + (uint64_t)off : 0);
  }
  const uint64_t tag = exchange && sending ? p.sendStep() + 1 : 0;
  bool looking = exchange && sending;
  for (int64_t o = 0; o < n; o += slice) {
    const int64_t len = imin(slice, n - o);
    if (looking) {
      const uint64_t to = p.checkOffer(tag);
      if (to > 1) {
        p.sendDirect(src + o, reinterpret_cast<uint8_t*>(to) + o, n - o);
        break;
      }
      looking = to == 0;   // 1: the receiver offered none, stop looking
    }
    if (view != 0) {
      const int r = p.recvOrDirect(dst + o, len);
      if (r < 0) return false;
      if (r == 1) break;
      continue;
    }
    const bool ok = sending ? p.send(src + o, len)
                            : p.recv(dst + o, len);
    if (!ok) return false;
  }
  p.finish();
  return true;
}

// Runs the item on this block. Aborts are reported through the groups'
// shared flags, which the caller reads after the end-of-item barrier.
UDEV void runP2p(const Work& w, const CollCtx& c, BlockShared& sh) {
  const int tid = threadIdx.x;
  if (w.p.sendPeer == c.comm->rank) {
    // Local copy: the whole block, no connection.
    using Fn = RedFn<TU8, kOpSum>;
    int64_t off, n;
    p2pSelfShare(w.p.sendBytes, c.chIndex, c.nch, &off, &n);
    reduceCopy<Fn, true, false, true, false, false, false>(Fn{}, tid, kThreadsPerBlock,
        static_cast<const uint8_t*>(w.p.sendBuff) + off, nullptr, static_cast<uint8_t*>(w.p.recvBuff) + off,
        nullptr, n);
    return;
  }
  const bool sending = tid < kP2pHalf;
  if (sending ? w.p.sendPeer < 0 : w.p.recvPeer < 0) return;
  const Group g = makeGroup(sh, c.comm, sending ? 1 : 2, sending ? tid : tid - kP2pHalf, kP2pHalf);
  const uint8_t proto = sending ? w.p.sendProto : (uint8_t)(w.p.recvProto & kP2pProtoBits);
  if (proto == kProtoLL) p2pHalf<kProtoLL>(w, c, g, sending);
  else if (proto == kProtoLL128) p2pHalf<kProtoLL128>(w, c, g, sending);
  else p2pHalf<kProtoSimple>(w, c, g, sending);
}

}  // namespace uniccl::dev
