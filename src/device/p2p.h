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
  return g;
}

// Byte range of this channel: contiguous parts with 16-byte aligned sizes.
UDEV void p2pShare(uint64_t bytes, const CollCtx& c, int64_t* off, int64_t* n) {
  const int64_t per = alignUp(divUp((int64_t)bytes, c.nch), 16);
  *off = per * c.chIndex;
  *n = imax(0, imin(per, (int64_t)bytes - *off));
}

template <int Proto>
UDEV_NOINLINE bool p2pHalf(const Work& w, const CollCtx& c, const Group& g, bool sending) {
  using Fn = RedFn<TU8, kOpSum>;
  const Fn fn{};
  const int peer = sending ? w.p.sendPeer : w.p.recvPeer;
  Peer* peers = c.channel->peers;
  Prims<Fn, Proto> p(g, c.comm, fn, sending ? nullptr : &peers[peer].recv, sending ? &peers[peer].send : nullptr);
  int64_t off, n;
  p2pShare(sending ? w.p.sendBytes : w.p.recvBytes, c, &off, &n);
  const int64_t slice = sliceElems<uint8_t>(c.comm, Proto, w.p.sliceBytes);
  const uint8_t* src = static_cast<const uint8_t*>(w.p.sendBuff) + off;
  uint8_t* dst = static_cast<uint8_t*>(w.p.recvBuff) + off;
  for (int64_t o = 0; o < n; o += slice) {
    const int64_t len = imin(slice, n - o);
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
    p2pShare(w.p.sendBytes, c, &off, &n);
    reduceCopy<Fn, true, false, true, false, false, false>(Fn{}, tid, kThreadsPerBlock,
        static_cast<const uint8_t*>(w.p.sendBuff) + off, nullptr, static_cast<uint8_t*>(w.p.recvBuff) + off,
        nullptr, n);
    return;
  }
  const bool sending = tid < kP2pHalf;
  if (sending ? w.p.sendPeer < 0 : w.p.recvPeer < 0) return;
  const Group g = makeGroup(sh, c.comm, sending ? 1 : 2, sending ? tid : tid - kP2pHalf, kP2pHalf);
  const uint8_t proto = sending ? w.p.sendProto : w.p.recvProto;
  if (proto == kProtoLL) p2pHalf<kProtoLL>(w, c, g, sending);
  else if (proto == kProtoLL128) p2pHalf<kProtoLL128>(w, c, g, sending);
  else p2pHalf<kProtoSimple>(w, c, g, sending);
}

}  // namespace uniccl::dev
