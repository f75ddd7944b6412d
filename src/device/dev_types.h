// Plain structs shared by the host core (g++) and the kernels (nvcc/hipcc):
// the device-side view of a communicator, its channels and connections, and
// the work items the host hands to a launch. No vendor names, no virtuals,
// no host-only types: host code fills these and copies them to the device.
//
// Counter protocol of a connection (every protocol):
//   the sender may fill step s only when s - head < kSteps (the receiver has
//   freed that slot); the receiver may read step s only when tail > s (Simple)
//   or when the slot's flags equal s + 1 (LL, LL128). Counters are 64-bit and
//   only grow; a slot is s % kSteps.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uniccl::dev {

// Blocks of one launch. NVLink needs >32 x 512 threads to fill; one-way SM
// stores reach 352 GB/s on 64 blocks and 367-369 on 132+ (H200, NV18). P2P
// communicators use 128 where every GPU has 128+ SMs (core/tuning.cc);
// KernelCh profiling stamps channels 0-63 only (Work::profMask).
constexpr int kMaxChannels = 128;
constexpr int kMaxProfiledChannels = 64;
constexpr int kSteps = 8;               // slots per connection (NCCL_STEPS)
#if defined(UNICCL_DEV_CPU) && defined(UNICCL_EMU_WAVE) && UNICCL_EMU_WAVE == 64
constexpr int kThreadsPerBlock = 128;   // the emulator's wave64 build: half a block is one wavefront
#elif defined(UNICCL_DEV_CPU)
constexpr int kThreadsPerBlock = 64;    // the CPU emulator: each thread is a fiber (tests/emu/emu_fiber.h)
#else
constexpr int kThreadsPerBlock = 512;   // every collective block runs this many
#endif
constexpr int kMaxInlineWorks = 4;      // work items that travel in the kernel arguments

// LL: 16-byte lines {data, flag, data, flag}, half of the line is data.
// LL128: 128-byte lines whose last 8 bytes are the flag (15 of 16 words are
// data), each stored by 8 lanes of one warp at once (device/prims.h); only
// where the GPU delivers a warp's 128-byte store as one unit (the host
// decides: common/core/tuning.cc). Simple: whole slots behind a counter.
enum Proto : uint8_t { kProtoLL = 0, kProtoSimple = 1, kProtoLL128 = 2, kNumProtos = 3 };
constexpr int kLL128LineBytes = 128;
constexpr int kLL128LineWords = 16;     // uint64 words of a line (NCCL_LL128_LINEELEMS)
constexpr int kLL128DataWords = 15;     // words 0..14 data, word 15 the flag (NCCL_LL128_DATAELEMS)
constexpr int kLL128LanesPerLine = 8;   // lanes that store a line together, 16 bytes each

// What a work item does. P2p items carry a send half and a recv half that
// progress concurrently on separate warps (so paired send/recv never deadlock).
enum Coll : uint8_t {
  kCollAllReduce = 0,
  kCollBroadcast = 1,
  kCollReduce = 2,
  kCollAllGather = 3,
  kCollReduceScatter = 4,
  kCollP2p = 5,
  kNumColls = 6,
};

// Reduction as the kernels see it. The host lowers ncclAvg to PreMulSum
// (1/n, floating types) or SumPostDiv (n, integer types).
enum RedOp : uint8_t {
  kOpSum = 0,
  kOpProd = 1,
  kOpMax = 2,
  kOpMin = 3,
  kOpPreMulSum = 4,   // sum of (scalar * x_i): each rank's input is scaled when it enters
  kOpSumPostDiv = 5,  // sum, then divide by scalar (integer average)
  kNumRedOps = 6,
};

// What a collective's `scalar` holds (PreMulSum, SumPostDiv).
enum ScalarKind : uint8_t {
  kScalarBits = 0,      // the scalar's bits in the datatype's format (low bytes)
  kScalarPtr = 1,       // a device pointer to it (ncclScalarDevice)
  // fp8 ncclAvg: the number of ranks n; the kernel makes 1/n in its own fp8
  // encoding (OCP or FNUZ per target: device/port.h), which the host does
  // not know.
  kScalarInvRanks = 2,
};

// Algorithm of a collective work item. AllReduce may run on any; the
// other collectives use the ring, or (AllGather, ReduceScatter)
// kAlgoSymmetric. kAlgoSymmetric: an AllReduce (one-shot or two-shot),
// AllGather or ReduceScatter through symmetric windows (Work::s,
// device/coll_symmetric.h).
enum Algo : uint8_t { kAlgoRing = 0, kAlgoTree = 1, kAlgoSymmetric = 2, kNumAlgos = 3 };

// The communicator's symmetric-collective barrier (common/symmetric,
// "collective barrier"): one buffer per rank in an internal window, of
// kMaxChannels epoch words (written only by this rank's block c) followed
// by kMaxChannels x nRanks inbox words (inbox[c][q]: the epoch rank q's
// block c last reached, written by q). Epochs only grow.
constexpr size_t symBarrierBytes(int nRanks) { return (size_t)kMaxChannels * 8 * (1 + (size_t)nRanks); }

// Datatypes use ncclDataType_t's numbering (0..11): ncclInt8 .. ncclFloat8e5m2.
constexpr int kNumDataTypes = 12;

// One slot of a network connection's conn FIFO, as the kernel sees it (the
// host's ConnFifoSlot in common/proxy/conn_fifo.h, same layout, asserted
// there). The kernel writes `size` before it advances tail (send) and sets
// it to -1 before it advances head (receive). An LL send step advances no
// tail: its size carries kConnSizeLL and the lines' flags tell the proxy
// when the data is there (as NCCL's proxy checks LL lines before it sends).
constexpr int64_t kConnSizeLL = int64_t{1} << 62;
struct ConnSlot {
  int32_t mode;
  int32_t offset;
  int64_t size;
  void* ptr;
  uint64_t pad;
};

// Sender side of a connection to one peer. Over the network the "receiver"
// is the proxy: buffs is our host-mapped staging memory, remoteTail and head
// are the conn FIFO's counters, and fifo its slots.
struct SendConn {
  char* buffs[kNumProtos];    // the RECEIVER's slot buffers (peer-visible addresses)
  uint64_t* remoteTail;       // the receiver's tail counter (Simple); we store step+1 after filling a slot
  uint64_t* head;             // our own counter the receiver bumps when it freed a slot
  uint64_t step;              // persistent: next step to fill (kernel loads at start, stores at end)
  ConnSlot* fifo;             // network connections: the conn FIFO's slots; nullptr for P2P/SHM
  uint64_t headSeen;          // persistent: a value `head` had (it only grows), so most steps need not load it
  uint64_t* ptrExchange;      // P2P only (else nullptr): our own two words [address, tag] where the receiver
                              // offers a direct message's destination (p2pExchanges)
  uint64_t bytesSent;         // persistent: payload bytes sent so far (traffic accounting, transport/traffic.h);
                              // one writer (the sending group's poller, once per Prims), read by the host when idle
};

// Receiver side of a connection from one peer.
struct RecvConn {
  char* buffs[kNumProtos];    // our own slot buffers
  uint64_t* tail;             // our own counter the sender bumps after filling a slot (Simple)
  uint64_t* remoteHead;       // the sender's head counter; we store step+1 after consuming a slot
  uint64_t step;              // persistent: next step to consume
  ConnSlot* fifo;             // network connections: the conn FIFO's slots; nullptr for P2P/SHM
  uint64_t* remotePtrExchange;  // P2P only (else nullptr): the sender's ptrExchange words
};

struct Peer {
  SendConn send;
  RecvConn recv;
  uint32_t connected;         // nonzero once the host wired this peer on this channel
  uint32_t pad;
};

struct Channel {
  int ringPrev;               // rank we receive from in the ring
  int ringNext;               // rank we send to in the ring
  int ringIndex;              // our position in this channel's ring (0..nRanks-1)
  int treeUp;                 // tree algorithm: our parent (-1: we are the root); channel c uses tree c % 2
  int treeDown[2];            // our children (-1: none; [0] is filled before [1])
  const int* ringRanks;       // device array [nRanks]: user rank at each ring position
  Peer* peers;                // device array [nRanks]: connections to every rank
  uint64_t profCount;         // profiled work items this channel ran (KernelCh stamps; block thread 0 only)
};

// KernelCh profiling (common/profiler/kernel_ch.h, same layout, asserted
// there): per channel, the kernel stamps when it starts and stops the c-th
// profiled work item into slot c % kProfSlots: timer, system fence, counter.
constexpr int kProfSlots = 64;
struct alignas(16) ProfStamp {
  uint64_t counter;
  uint64_t timer;
};
struct ProfRing {
  ProfStamp start[kProfSlots];
  ProfStamp stop[kProfSlots];
};

// Launch progress the kernels report for the watchdog (common/watchdog),
// in host-mapped memory: block 0 stores a launch's id into `started` when
// it begins, and every block b stores it into done[b] when it ends. Eager
// launches of a communicator run in issue order, so their ids (1, 2, ...)
// only grow in these words; a launch with id 0 (captured into a graph, which
// reports in GraphProgress instead) stores nothing here. The host thus
// times a launch from when it really started, with no event records on the
// launch path.
struct LaunchProgress {
  uint64_t started;
  uint64_t pad[7];            // `started` alone on its cache line
  uint64_t done[kMaxChannels];
};

// The same for the launches one communicator captured into one graph
// (watchdog/graph_tracker.h), host-mapped, one per tracked graph. Replays
// repeat the captured arguments, so the id a block reports is made on the
// GPU: (replay << kGraphIndexBits) | index, where index (1-based) is the
// launch's place in the graph and replay comes from the graph's counters in
// device memory (GraphTrack::replays): block b of the graph's first launch
// bumps counter b, every later launch reads it (counter 0 for blocks the
// first launch did not have). Each block stores its id into started[b] at
// entry and done[b] at exit; consecutive launches on a block always differ
// in id, so started[b] != done[b] says exactly "block b is running launch
// started[b]", with no event node or host node in the graph.
constexpr int kGraphIndexBits = 24;
struct GraphProgress {
  uint64_t started[kMaxChannels];
  uint64_t done[kMaxChannels];
};
struct GraphTrack {
  GraphProgress* words;       // host-mapped; nullptr: not a tracked captured launch
  uint64_t* replays;          // device memory [kMaxChannels]
  uint32_t index;             // 1-based place of this launch among the comm's launches in the graph
  uint32_t replayBlocks;      // grid of the graph's first launch (the blocks that bump the counters)
};

struct DevComm {
  int rank;
  int nRanks;
  int nChannels;              // channels wired for rings (blocks of a full-width launch)
  int buffBytes[kNumProtos];  // bytes of one connection's buffer per protocol (kSteps slots)
  volatile uint32_t* abortFlag;  // host-mapped; nonzero: every spin loop gives up and the kernel exits
  Channel* channels;          // device array [kMaxChannels]
  ProfRing* profRings;        // host-mapped [nChannels], or nullptr: no KernelCh profiling
  LaunchProgress* progress;   // host-mapped, or nullptr: the watchdog is off (UNICCL_TIMEOUT=0)
  // The symmetric collectives' barrier (symBarrierBytes per rank, an
  // internal window made with the first NCCL_WIN_COLL_SYMMETRIC window):
  // LSA rank 0's buffer in its flat range, and the range's stride.
  char* symBarFlat;
  uint32_t symBarStride4G;
  uint32_t pad;
  // Simple p2p messages of at least this many bytes over P2P connections
  // offer a direct destination first (p2pExchanges; 0: never). Every rank
  // reads the same knob (UNICCL_P2P_DIRECT_MIN_BYTES).
  uint64_t p2pDirectMinBytes;
};

// Direct messages (ncclCommRegister'ed receive buffers written in place,
// docs/architecture.md "Direct receives"): a Simple p2p message of at least
// DevComm::p2pDirectMinBytes over a P2P connection begins, on every channel
// that carries a part, with the receiver's offer: it posts the address at
// which the sender's process sees the part's destination (0: none) into
// the sender's ptrExchange words, tagged with the connection's step at the
// message's start + 1. The sender never waits for it: before each step it
// looks once; with an address there, it stores the rest of the part at
// once, sets the step's direct mark in the receiver's tail line
// (device/prims.h, directMark) to the step + 1 and posts tail = step + 1;
// else it fills the slot as any message. The receiver, after each tail it
// waited for, reads the step's mark: equal to that step + 1, the rest of
// the part is in place. So a
// sender never waits for a receiver that is not there yet (a message fits
// the slots exactly as before), both ends agree on every step, and late
// offers are ignored (their tag is behind the sender's step).
constexpr bool p2pExchanges(uint8_t proto, uint64_t bytes, uint64_t minBytes) {
  return proto == kProtoSimple && minBytes != 0 && bytes >= minBytes;
}

// One work item: 64 bytes, so items never straddle the work FIFO's wrap
// (the ring size is a power of two >= 64). Collective fields and p2p fields
// share the union.
struct alignas(16) Work {
  uint8_t coll;               // Coll
  uint8_t proto;              // Proto
  uint8_t channelLo;          // blocks [channelLo, channelHi] run this item
  uint8_t channelHi;
  uint32_t recvViewLo;        // bits 0-31 of a direct view: p2p items' receive half (p2pRecvView), AllGather
                              // and Broadcast items' output (collRecvView)
  uint64_t profMask;          // bit c: channel c < kMaxProfiledChannels stamps this item (KernelCh; 0: none)
  union {
    struct {                  // collectives
      uint8_t redOp;          // RedOp
      uint8_t dtype;          // ncclDataType_t value
      uint8_t scalarKind;     // ScalarKind: what `scalar` holds
      uint8_t algo;           // Algo (kAlgoTree: AllReduce only)
      int32_t root;           // Broadcast/Reduce root (user rank)
      uint32_t sliceBytes;    // bytes moved per step (<= one slot of the protocol)
      uint8_t exchange;       // ring AllReduce on 2 ranks: one exchange step, not reduce-scatter + all-gather
      uint8_t pad1;
      uint16_t recvViewHi;    // AllGather, Broadcast: bits 32-47 of where the ring predecessor's process sees
                              // recvbuff (with Work::recvViewLo; 0: not offered; collRecvView)
      const void* sendbuff;
      void* recvbuff;
      uint64_t count;         // elements: total for AllReduce/Broadcast/Reduce; per rank for AllGather/ReduceScatter
      uint64_t scalar;        // raw bits of the scalar in dtype's format, a device pointer to it, or n
    } c;
    struct {                  // collectives with c.algo == kAlgoSymmetric (AllReduce, ReduceScatter: ops without a scalar)
      uint8_t redOp;          // the first four bytes, recvbuff and count as in c
      uint8_t dtype;
      uint8_t scalarKind;
      uint8_t algo;
      uint32_t sendStride4G;  // the send window's flat stride (4 GiB units)
      uint32_t recvStride4G;  // the receive window's (two-shot AllReduce)
      uint32_t inPlace;       // AllGather: sendbuff is this rank's share of recvbuff (its own copy is skipped)
      const char* sendFlat;   // LSA rank 0's copy of sendbuff in the send window's flat range
                              // (AllGather in place: of recvbuff, rank p's input at share p;
                              // ReduceScatter: the input's start, in place too)
      void* recvbuff;
      uint64_t count;
      char* recvFlat;         // AllReduce: nullptr for one-shot; two-shot: LSA rank 0's copy of
                              // recvbuff in the receive window's flat range (every rank's output)
    } s;
    struct {                  // p2p: a send half and a recv half (either may be empty)
      int32_t sendPeer;       // -1: no send part; == rank: local copy sendBuff -> recvBuff
      int32_t recvPeer;       // -1: no recv part
      uint32_t sliceBytes;
      uint8_t sendProto;      // Proto of each half: a message's two ends choose the same one from
      uint8_t recvProto;      // its size and transport (the item's other half may differ); a receive
                              // that reduces carries its flag and op here too (p2pReduceRecvProto)
      uint16_t recvViewHi;    // bits 32-47 of the direct view: where the SENDER's process sees recvBuff
                              // (0: the message is not offered; p2pExchanges), or of a reducing
                              // receive's source (p2pReduceSrc)
      const void* sendBuff;
      void* recvBuff;
      uint64_t sendBytes;
      uint64_t recvBytes;
    } p;
  };
};
static_assert(sizeof(Work) == 64, "Work must stay 64 bytes (FIFO wrap, inline args)");

// A p2p item's direct view (0: none). 48 bits are every user-space address
// of the targets (x86-64 and arm64 Linux); the host offers nothing above.
constexpr uint64_t kP2pViewLimit = 1ull << 48;
constexpr uint64_t p2pRecvView(const Work& w) { return (uint64_t)w.recvViewLo | ((uint64_t)w.p.recvViewHi << 32); }
constexpr uint64_t collRecvView(const Work& w) { return (uint64_t)w.recvViewLo | ((uint64_t)w.c.recvViewHi << 32); }

// A p2p item whose receive half reduces (the rounds of a PAT ReduceScatter,
// common/core/reducescatter_pat.h): each received element is combined
// with the element at the same offset of a source buffer, and the result
// written to recvBuff (recvBuff[i] = op(received[i], src[i]); src may be
// recvBuff). recvProto then holds the protocol in bits 0-1 (always
// Simple), the reduce flag in bit 2 and the RedOp (sum, prod, max or min)
// in bits 3-5; the 48 bits of the direct view hold the source, since such
// a receive never takes a direct store (the data must pass through the
// reduction). Only the datatype's Simple collective kernel runs it
// (device/p2p_reduce.h); the host launches such items nowhere else.
constexpr uint8_t kP2pProtoBits = 0x3;
constexpr uint8_t kP2pRecvReduceFlag = 0x4;
constexpr uint8_t p2pReduceRecvProto(uint8_t op) { return (uint8_t)(kProtoSimple | kP2pRecvReduceFlag | (op << 3)); }
constexpr bool p2pRecvReduces(uint8_t recvProto) { return (recvProto & kP2pRecvReduceFlag) != 0; }
constexpr int p2pRecvRedOp(uint8_t recvProto) { return recvProto >> 3; }
constexpr uint64_t p2pReduceSrc(const Work& w) { return p2pRecvView(w); }
static_assert(p2pRecvRedOp(p2pReduceRecvProto(kOpMin)) == kOpMin && (p2pReduceRecvProto(kOpMin) & kP2pProtoBits) == kProtoSimple,
              "the op and the protocol share recvProto without overlap");

// Arguments of every collective kernel. Work item i of this launch is at
//   works ? (const Work*)((const char*)works + ((workOffset + i*sizeof(Work)) & workMask))
//         : &inlineWorks[i]
// so the same code reads the work FIFO ring (mask = ring bytes - 1), a
// persistent buffer of a captured graph (offset 0, mask = ~0u), or the
// arguments themselves (works == nullptr, nWorks <= kMaxInlineWorks).
struct KernelArgs {
  DevComm* comm;
  Channel* channels;          // comm->channels, passed along so a block finds its channel without loading comm first
  const Work* works;
  uint32_t workOffset;
  uint32_t workMask;
  uint32_t nWorks;
  uint32_t releaseEarly;      // 1: the next programmatic launch may start once this one passed its wait (kernel.h)
  uint64_t launchId;          // reported in DevComm::progress (0: not tracked, e.g. captured launches)
  GraphTrack graph;           // captured launches: where they report (words == nullptr: nowhere)
  Work inlineWorks[kMaxInlineWorks];
};

}  // namespace uniccl::dev

namespace uniccl::dev {
static_assert(offsetof(Work, s.algo) == offsetof(Work, c.algo) && offsetof(Work, s.redOp) == offsetof(Work, c.redOp) &&
                  offsetof(Work, s.dtype) == offsetof(Work, c.dtype) &&
                  offsetof(Work, s.recvbuff) == offsetof(Work, c.recvbuff) &&
                  offsetof(Work, s.count) == offsetof(Work, c.count),
              "symmetric items share the collective fields' places");
}  // namespace uniccl::dev
