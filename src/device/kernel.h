// The per-datatype kernel body: one block per channel walks the launch's
// work items in order and runs those whose channel range holds it.
// Instantiated per datatype and protocol by the generated kernel sources
// (device/meson.build).
#pragma once

#include "device/coll_ring.h"
#include "device/dev_types.h"
#include "device/p2p.h"
#include "device/p2p_reduce.h"
#include "device/port.h"

namespace uniccl::dev {

// The thread that reports launch progress: lane 0 of the second warp or
// wavefront (32 on NVIDIA and RDNA, 64 on CDNA), off warp 0's work loading.
constexpr int kProgressThread = kWarpSize;
static_assert(kThreadsPerBlock > kProgressThread, "the progress thread must exist");

// Copies item i into shared memory (once: it may sit in host memory).
UDEV void loadWork(const KernelArgs& args, uint32_t i, BlockShared& sh) {
  const int tid = threadIdx.x;
  if (args.works) {
    if (tid < (int)(sizeof(Work) / 16)) {
      const char* base = reinterpret_cast<const char*>(args.works);
      const Pack16* item = reinterpret_cast<const Pack16*>(base + ((args.workOffset + i * sizeof(Work)) & args.workMask));
      reinterpret_cast<Pack16*>(&sh.work)[tid] = loadVolatile16(item + tid);
    }
  } else if (tid == 0) {
    // Constant indices keep the parameter reads in the parameter space.
    static_assert(kMaxInlineWorks == 4, "one case per inline work item");
    switch (i) {
      case 0: sh.work = args.inlineWorks[0]; break;
      case 1: sh.work = args.inlineWorks[1]; break;
      case 2: sh.work = args.inlineWorks[2]; break;
      default: sh.work = args.inlineWorks[3]; break;
    }
  }
}

// Threads of the kernel preamble: 0-3 load the first work item (loadWork),
// the DevComm and the Channel copies start at these lanes, so that every
// load of the preamble is in flight at once.
constexpr int kCommCopyLane = 8;
constexpr int kChannelCopyLane = 24;
static_assert(sizeof(Work) / 16 <= kCommCopyLane && kCommCopyLane + sizeof(DevComm) / 8 <= kChannelCopyLane &&
                  kChannelCopyLane + sizeof(Channel) / 8 <= kThreadsPerBlock,
              "preamble lanes overlap");

// The fields of a work item that say which blocks it needs, taken by value
// from an inline item in the kernel's parameters: a reference into the
// parameters that reaches a real call copies them all to local memory (the
// p2p kernel's stack frame went from 40 to 560 bytes with the check below
// out of line).
struct ItemPeek {
  uint64_t profMask, sendBytes, recvBytes;
  int32_t sendPeer, recvPeer;
  uint8_t coll, channelLo, channelHi;
};
UDEV ItemPeek peekItem(const Work& w) {
  ItemPeek p;
  p.profMask = w.profMask;
  p.coll = w.coll;
  p.channelLo = w.channelLo;
  p.channelHi = w.channelHi;
  p.sendPeer = w.p.sendPeer;
  p.recvPeer = w.p.recvPeer;
  p.sendBytes = w.p.sendBytes;
  p.recvBytes = w.p.recvBytes;
  return p;
}

// Whether this block has anything to do in item w: its channel range holds
// the block and, for a p2p item, the block carries a part of one of its
// messages (or stamps the item for the profiler).
UDEV bool itemNeedsBlock(const ItemPeek& w, const DevComm* comm, int block) {
  if (comm->profRings != nullptr && block < kMaxProfiledChannels && ((w.profMask >> block) & 1ull) != 0) return true;
  if (block < w.channelLo || block > w.channelHi) return false;
  if (w.coll != kCollP2p) return true;
  return p2pBlockHasPart(w.sendPeer, w.sendBytes, w.recvPeer, w.recvBytes, block - w.channelLo,
                         w.channelHi - w.channelLo + 1, comm->rank, comm->nRanks);
}

// Inline items 1..3 are looked at after the preamble, each by a thread of
// its own warp (the warps run these in parallel), while the launch waits
// for the previous one: a block then skips an item it has no part in
// without loading it and without the two block barriers around it. Most
// blocks of a small p2p launch have a part in one item at most (an
// AlltoAll's rounds lie on different blocks), and the block that carries
// the last round starts it at once instead of after every earlier item.
constexpr int kSkipCheckThread = kThreadsPerBlock - kWarpSize;   // item 1's; item i's is i - 1 warps lower
UDEV void checkInlineItem(const KernelArgs& args, BlockShared& sh, int tid, int block) {
  static_assert(kMaxInlineWorks == 4, "one check per inline work item after the first");
  if (tid > kSkipCheckThread || (kSkipCheckThread - tid) % kWarpSize != 0) return;
  const int k = (kSkipCheckThread - tid) / kWarpSize + 1;   // the item this thread checks
  if (k >= (int)args.nWorks) return;
  ItemPeek w;
  switch (k) {   // constant indices keep the reads in the parameter space
    case 1: w = peekItem(args.inlineWorks[1]); break;
    case 2: w = peekItem(args.inlineWorks[2]); break;
    default: w = peekItem(args.inlineWorks[3]); break;
  }
  sh.skipItem[k] = itemNeedsBlock(w, &sh.comm, block) ? 0 : 1;
}

// Thread `lane` (0 <= lane < sizeof(T) / 8) copies 8-byte word `lane` of
// *src; other lanes do nothing. The words of one struct load in parallel.
template <typename T>
UDEV void copyWord(T* dst, const T* src, int lane) {
  static_assert(sizeof(T) % 8 == 0 && alignof(T) >= 8, "whole 8-byte words");
  if (lane >= 0 && lane < (int)(sizeof(T) / 8))
    reinterpret_cast<uint64_t*>(dst)[lane] = reinterpret_cast<const uint64_t*>(src)[lane];
}

// KernelCh profiling: thread 0 of a block stamps the start / stop of a
// profiled item (the host counts the same items per channel, in order).
UDEV void profStamp(const DevComm* comm, int block, bool stop) {
  Channel* ch = &comm->channels[block];
  uint64_t c = ch->profCount;
  if (!stop) ch->profCount = ++c;
  ProfStamp* s = stop ? &comm->profRings[block].stop[c % kProfSlots] : &comm->profRings[block].start[c % kProfSlots];
  static_assert(offsetof(ProfStamp, counter) == 0 && offsetof(ProfStamp, timer) == 8, "stamp layout");
  storeStampPair(&s->counter, c, globalTimer());
}

// What a kernel entry runs. The symmetric collectives have entries of their
// own: reached from the collective kernel (even out of line) they grew its
// stack frame from 560 to 720 bytes with more spills, and every graph-mode
// AllReduce 8 B went from 4.27 to 4.64 us on an H200 (docs/performance-history.md,
// "The launch plan's host time").
enum KernelKind : int {
  kKernelP2pOnly = 0,    // p2p items only (datatype-free)
  kKernelColl = 1,       // ring/tree collectives of one datatype, and p2p items
  kKernelSymmetric = 2,  // kAlgoSymmetric collectives of one datatype only
};

// Runs the launch's work items in order (item 0 is already in shared
// memory); returns early when one aborted. Proto: the protocol of every
// collective item of a kKernelColl launch (its p2p items choose their own).
template <typename Tag, int Kind, int Proto>
UDEV void runWorks(const KernelArgs& args, BlockShared& sh) {
  const int tid = threadIdx.x;
  const DevComm* comm = &sh.comm;
  const int block = blockIdx.x;
  for (uint32_t i = 0; i < args.nWorks; i++) {
    if (i > 0) {
      // Nobody writes sh.work for a skipped item: the last barrier still guards it.
      if constexpr (Kind == kKernelP2pOnly)
        if (args.works == nullptr && sh.skipItem[i] != 0) continue;
      loadWork(args, i, sh);
      barrierBlock();
    }
    const Work& w = sh.work;
    const bool stamp = comm->profRings != nullptr && block < kMaxProfiledChannels && ((w.profMask >> block) & 1ull) != 0;
    if (stamp && tid == 0) profStamp(comm, block, /*stop=*/false);
    if (block >= w.channelLo && block <= w.channelHi) {
      CollCtx c;
      c.comm = comm;
      c.channel = &sh.channel;
      c.chIndex = block - w.channelLo;
      c.nch = w.channelHi - w.channelLo + 1;
      if constexpr (Kind == kKernelSymmetric) {
        runSymmetric<Tag>(w, c, makeGroup(sh, comm, 0, tid, kThreadsPerBlock));
      } else if (w.coll == kCollP2p) {
        // Receives that reduce need the datatype: the Simple collective
        // kernels run them (the host launches them there only).
        if constexpr (Kind == kKernelColl && Proto == kProtoSimple) runP2pReducing<Tag>(w, c, sh);
        else runP2p(w, c, sh);
      } else if constexpr (Kind == kKernelColl) {
        runColl<Tag, Proto>(w, c, makeGroup(sh, comm, 0, tid, kThreadsPerBlock));
      }
    }
    barrierBlock();
    if (stamp && tid == 0) profStamp(comm, block, /*stop=*/true);
    // Nobody writes the flags between this barrier and the next item's.
    uint32_t aborted = 0;
#pragma unroll
    for (int gi = 0; gi < 3; gi++) aborted |= sh.abortA[gi] | sh.abortB[gi];
    if (aborted) return;
  }
}

// Tag: datatype of collective items (ignored by the p2p-only kernel);
// Kind: KernelKind; Proto: the collective items' protocol (kKernelColl).
template <typename Tag, int Kind, int Proto = kProtoSimple>
UDEV void runKernel(const KernelArgs& args) {
  BlockShared& sh = blockShared<BlockShared>();
  const int tid = threadIdx.x;
  if (tid < 3) {
    sh.abortA[tid] = 0;
    sh.abortB[tid] = 0;
    sh.bars[tid].arrived = 0;
    sh.bars[tid].generation = 0;
  }
  const int block = blockIdx.x;
  // Before waitPriorGrids() the block reads only what the host wrote before
  // this launch: its arguments, its work items (the FIFO slots are not
  // reused before the launch that read them ended) and the communicator's
  // and channel's fields fixed at setup. Launched programmatically (PDL),
  // this part and the launch itself overlap the previous kernel.
  if (args.nWorks > 0) loadWork(args, 0, sh);
  copyWord(&sh.comm, args.comm, tid - kCommCopyLane);
  copyWord(&sh.channel, &args.channels[block], tid - kChannelCopyLane);
  barrierBlock();
  // Read only after item 0's end-of-item barrier. The p2p kernel only: the
  // collective kernel's launches rarely have items without work for a
  // block, and there the check cost every collective of one item 0.1-0.15 us
  // (4 H200s, graphs: Broadcast 3.34 -> 3.49, Reduce 3.70 -> 3.82).
  if constexpr (Kind == kKernelP2pOnly)
    if (args.works == nullptr && args.nWorks > 1) checkInlineItem(args, sh, tid, block);
  // From here on, what earlier kernels wrote (connection steps, user
  // buffers, graph replay counters) is visible.
  waitPriorGrids();
  // A short launch lets the next one start its preamble now; its blocks
  // then wait on SMs until this launch ends. A long one (many channels)
  // does not: waiting blocks would hold SMs for its whole run that other
  // kernels use meanwhile (a side-stream copy, the user's compute); the
  // next launch starts when this one's blocks exit.
  if (args.releaseEarly) releaseDependentGrids();
  // Watchdog: this launch is running (posted stores; nobody waits for them).
  uint64_t id = args.launchId;
  const GraphTrack& gt = args.graph;
  if (tid == kProgressThread) {
    if (gt.words != nullptr) {
      // Only this thread of this block touches the counter during the launch.
      uint64_t* counter = &gt.replays[(uint32_t)block < gt.replayBlocks ? block : 0];
      const uint64_t replay = gt.index == 1 ? ++*counter : *counter;
      id = (replay << kGraphIndexBits) | gt.index;
      storeVolatileU64(&gt.words->started[block], id);
    } else if (id != 0 && block == 0) {
      storeVolatileU64(&sh.comm.progress->started, id);
    }
  }
  runWorks<Tag, Kind, Proto>(args, sh);
  // ... and this block is done with it (also when it stopped on abort).
  if (tid == kProgressThread) {
    if (gt.words != nullptr) storeVolatileU64(&gt.words->done[block], id);
    else if (id != 0) storeVolatileU64(&sh.comm.progress->done[block], id);
  }
}

}  // namespace uniccl::dev
