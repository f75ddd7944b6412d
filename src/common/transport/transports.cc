// Connection setup shared by the transports: reachability, the phased
// offer/accept/complete exchange through the bootstrap, and wiring the
// device-side connection structs. NET resources live in net_link.cc.
#include <cstddef>
#include <cstring>
#include <utility>

#include "common/bootstrap/bootstrap.h"
#include "common/check.h"
#include "common/transport/transport.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl {

namespace {
constexpr uint32_t kOfferMagic = 0x4f464652;   // "OFFR"
constexpr uint32_t kTagConnect = 0x434f4e00;   // bootstrap tag of connection offers
constexpr uint32_t kTagNetHandles = 0x434f4e01; // NET: the listen handles, one per channel
constexpr uint32_t kTagSlots = 0x434f4e02;      // P2P: a receiver's slots for the direction towards it
constexpr uint32_t kSlotsMagic = 0x534c4f54;    // "SLOT"

// What a receiver tells its sender about the slots it owns for the pair's
// direction towards it (P2P).
struct SlotsOffer {
  uint32_t magic;
  int32_t nChannels;
  uint64_t stride;         // ChannelLayout::slotStride(), must match
  uint64_t blockPtr;       // same process: device pointer of the slots
  gpu::IpcMemHandle ipc;   // across processes
};

// One channel's device-side connection: each side's counters (tail, head,
// offer words) and slots ([LL | LL128 | Simple]; nullptr: that direction is
// not carried, its buffers stay null). direct: the peer's GPU can store into
// our user buffers (P2P), so the connection carries direct messages' offers
// (dev_types.h, p2pExchanges).
dev::Peer channelPeer(const ChannelLayout& L, char* own, char* remote, char* ownSlots, char* remoteSlots,
                      bool direct) {
  dev::Peer p;
  memset(&p, 0, sizeof(p));
  if (remoteSlots != nullptr) {
    p.send.buffs[dev::kProtoLL] = remoteSlots + L.slotLlOffset();
    p.send.buffs[dev::kProtoSimple] = remoteSlots + L.slotSimpleOffset();
    p.send.buffs[dev::kProtoLL128] = L.ll128Bytes > 0 ? remoteSlots + L.slotLl128Offset() : nullptr;
  }
  p.send.remoteTail = reinterpret_cast<uint64_t*>(remote + L.tailOffset());
  p.send.head = reinterpret_cast<uint64_t*>(own + L.headOffset());
  if (ownSlots != nullptr) {
    p.recv.buffs[dev::kProtoLL] = ownSlots + L.slotLlOffset();
    p.recv.buffs[dev::kProtoSimple] = ownSlots + L.slotSimpleOffset();
    p.recv.buffs[dev::kProtoLL128] = L.ll128Bytes > 0 ? ownSlots + L.slotLl128Offset() : nullptr;
  }
  p.recv.tail = reinterpret_cast<uint64_t*>(own + L.tailOffset());
  p.recv.remoteHead = reinterpret_cast<uint64_t*>(remote + L.headOffset());
  if (direct) {
    p.send.ptrExchange = reinterpret_cast<uint64_t*>(own + L.ptrExchangeOffset());
    p.recv.remotePtrExchange = reinterpret_cast<uint64_t*>(remote + L.ptrExchangeOffset());
  }
  p.connected = 1;
  return p;
}
}  // namespace

void addPeerNeed(std::vector<PeerNeed>* needs, int peer, uint8_t dirs) {
  for (PeerNeed& n : *needs) {
    if (n.peer == peer) {
      n.dirs |= dirs;
      return;
    }
  }
  needs->push_back(PeerNeed{peer, dirs});
}

// What one side tells the other about the block it owns for this pair.
struct ConnectOffer {
  uint32_t magic;
  uint8_t kind;            // TransportKind
  uint8_t pad[3];
  int32_t nChannels;
  uint64_t stride;         // ChannelLayout::stride(), must match
  uint64_t blockPtr;       // P2P, same process: device pointer of the block
  gpu::IpcMemHandle ipc;   // P2P across processes
  char shmName[64];        // SHM
  uint64_t blockBytes;
};

const char* transportName(TransportKind kind) {
  switch (kind) {
    case TransportKind::P2p: return "P2P";
    case TransportKind::Shm: return "SHM";
    case TransportKind::Net: return "NET";
    default: return "none";
  }
}

Transports::~Transports() { release(); }

void Transports::setReachForTesting(int nRanks, std::vector<uint8_t> reach) {
  nRanks_ = nRanks;
  hosts_ = topo::hostRanks(std::vector<uint64_t>(nRanks, 0));
  p2pReach_ = std::move(reach);
}

ncclResult_t Transports::reachRow(const TransportComm& comm, const std::vector<TransportPeer>& peers,
                                  const topo::HostRanks& hosts, std::vector<uint8_t>* row) {
  row->assign((size_t)hosts.rowWidth, 0);
  if (knobInt(Knob::NCCL_P2P_DISABLE) != 0) return ncclSuccess;
  const TransportPeer& me = peers[comm.rank];
  for (int j = 0; j < (int)peers.size(); j++) {
    const TransportPeer& p = peers[j];
    if (j == comm.rank || !hosts.sameHost(j, comm.rank)) continue;
    int peerDev = -1;
    if (p.processHash == me.processHash) {
      peerDev = p.gpuDev;
    } else if (gpu::deviceGetByBusId(p.busId.c_str(), &peerDev) != ncclSuccess) {
      continue;   // that GPU is not visible in this process
    }
    // Ranks sharing this GPU (gpu_sharing.h) address each other's memory as
    // their own; the runtime answers "no peer access" for a device and itself.
    bool can = p.busIdNum == me.busIdNum;
    if (!can && gpu::canAccessPeer(comm.gpuDev, peerDev, &can) != ncclSuccess) can = false;
    // 2: the link also keeps a warp's 128-byte stores whole (LL128, below):
    // a GPU and itself always, other GPUs where the backend says so.
    bool lines = can && me.lineStoreAtomic128 && p.lineStoreAtomic128;
    if (lines && p.busIdNum != me.busIdNum && gpu::p2pLinkKeepsLines(comm.gpuDev, peerDev, &lines) != ncclSuccess)
      lines = false;
    if (can) (*row)[hosts.localIndex[j]] = lines ? 2 : 1;
  }
  return ncclSuccess;
}

ncclResult_t Transports::init(const TransportComm& comm, std::vector<TransportPeer> peers,
                              std::vector<uint8_t> reachRows) {
  nRanks_ = comm.nRanks;
  if ((int)peers.size() != nRanks_) {
    WARN("Rank %d: %zu peer infos for %d ranks", comm.rank, peers.size(), nRanks_);
    return ncclInternalError;
  }
  peers_ = std::move(peers);
  links_.clear();
  links_.resize(nRanks_);
  layout_.simpleBytes = (size_t)knobInt(Knob::NCCL_BUFFSIZE);
  layout_.llBytes = (size_t)knobInt(Knob::UNICCL_LL_BUFFSIZE);
  const size_t ll128Bytes = (size_t)std::max<int64_t>(0, knobInt(Knob::UNICCL_LL128_BUFFSIZE));
  layout_.ll128Bytes = 0;   // below, once the reach is known
  // Slots must hold whole 16-byte lines (LL128: 128-byte lines) and stay 128-byte aligned.
  size_t unit = 128 * dev::kSteps;
  if (layout_.simpleBytes < unit || layout_.simpleBytes % unit != 0 ||
      layout_.llBytes < unit || layout_.llBytes % unit != 0 || ll128Bytes % unit != 0) {
    WARN("NCCL_BUFFSIZE=%zu / UNICCL_LL_BUFFSIZE=%zu / UNICCL_LL128_BUFFSIZE=%zu must be multiples of %zu "
         "(the first two positive; 0 turns LL128 off)",
         layout_.simpleBytes, layout_.llBytes, ll128Bytes, unit);
    return ncclInvalidArgument;
  }

  // Every rank's reach over its host's ranks (reachRow), gathered at init,
  // so that both sides of every pair take the same decision.
  shmDisabled_ = knobInt(Knob::NCCL_SHM_DISABLE) != 0;
  std::vector<uint64_t> hashes(nRanks_);
  for (int r = 0; r < nRanks_; r++) hashes[r] = peers_[r].hostHash;
  hosts_ = topo::hostRanks(hashes);
  if (reachRows.size() != (size_t)nRanks_ * hosts_.rowWidth) {
    WARN("Rank %d: %zu bytes of P2P reach rows for %d ranks of rows of %d", comm.rank, reachRows.size(), nRanks_,
         hosts_.rowWidth);
    return ncclInternalError;
  }
  p2pReach_ = std::move(reachRows);
  ringUsesNet_ = false;
  bool ringAllP2p = nRanks_ > 1;
  for (int r = 0; r < nRanks_ && nRanks_ > 1; r++) {
    const int next = (r + 1) % nRanks_;
    const bool sameHost = peers_[r].hostHash == peers_[next].hostHash;
    ringUsesNet_ = ringUsesNet_ || kindBetween(r, next, sameHost) == TransportKind::Net;
    ringAllP2p = ringAllP2p && p2pReachable(r, next);
  }
  // All-P2P communicators run 64 or 128 channels (tuning.cc's
  // defaultP2pChannels): 2 MiB Simple buffers halve the memory 4 MiB ones
  // would take, and measured as fast or faster on H200 NVLink
  // (docs/performance-history.md). The reach matrix is common, so every rank
  // picks the same size.
  if (ringAllP2p && knobValue(Knob::NCCL_BUFFSIZE) == nullptr) layout_.simpleBytes = 2 << 20;
  // LL128 (device/prims.h) needs every line a warp stores to reach the peer
  // whole: only P2P between GPUs that promise it, so only where every pair
  // of ranks is P2P (ring, tree and point-to-point peers alike) and every
  // rank's GPU promises it (the peer info all ranks share). Then every
  // rank's connections get LL128 slots; otherwise none does (the layout's
  // stride must match on both sides of every connection).
  // Every pair P2P needs one host; the pairs are then walked until one fails.
  bool allPairsP2p = nRanks_ > 1 && hosts_.nHosts == 1, lines = true, links = true;
  for (int a = 0; a < nRanks_; a++) lines = lines && peers_[a].lineStoreAtomic128;
  for (int a = 0; a < nRanks_ && allPairsP2p; a++) {
    for (int b = a + 1; b < nRanks_ && allPairsP2p; b++) {
      allPairsP2p = p2pReachable(a, b);
      links = links && reachByHost(a, b) == 2 && reachByHost(b, a) == 2;
    }
  }
  if (allPairsP2p && lines && links && ll128Bytes > 0) layout_.ll128Bytes = ll128Bytes;
  if (nRanks_ > 1)
    INFO(kSubsysInit | kSubsysTune, "Rank %d: LL128 %s", comm.rank,
         layout_.ll128Bytes > 0 ? "available (every pair of ranks P2P, links that keep 128-byte stores whole)"
         : ll128Bytes == 0      ? "off (UNICCL_LL128_BUFFSIZE=0)"
         : !allPairsP2p ? "off: some pair of ranks is not reached through P2P (SHM and the network carry LL and Simple only)"
         : !lines ? "off: some GPU does not promise that a warp's 128-byte store reaches a peer whole "
                    "(HIP targets, pre-Volta NVIDIA: docs/amd.md)"
                  : "off: some P2P link is not NVLink (no native P2P atomics: PCIe P2P may split 128-byte stores)");
  return ncclSuccess;
}

// Every rank sees the same reach matrix, host hashes and (by documented
// requirement) the same NCCL_SHM_DISABLE, so both sides of a pair agree.
TransportKind Transports::kindBetween(int a, int b, bool sameHost) const {
  if (p2pReachable(a, b)) return TransportKind::P2p;
  if (sameHost && !shmDisabled_) return TransportKind::Shm;
  return TransportKind::Net;
}

int Transports::lostNetPeer() const {
  if (netLinks_ == 0) return -1;
  for (const PeerLink& link : links_)
    if (link.net && link.net->peerGone()) return link.net->peer();
  return -1;
}

TransportKind Transports::choose(const TransportComm& comm, int peer) const {
  return kindBetween(comm.rank, peer, peers_[comm.rank].hostHash == peers_[peer].hostHash);
}

bool Transports::ready(int peer, uint8_t dirs) const {
  const PeerLink& l = links_[peer];
  if (!l.connected) return false;
  if (l.kind != TransportKind::P2p) return true;   // SHM and NET carry both directions
  return ((dirs & kDirSend) == 0 || l.sendWired) && ((dirs & kDirRecv) == 0 || l.recvWired);
}

void Transports::wakeNetProxy() {
  if (netLinks_ == 0) return;
  // One proxy thread serves every link: waking through any of them suffices.
  for (PeerLink& link : links_) {
    if (link.net && link.net->connected()) {
      link.net->wakeProxy();
      return;
    }
  }
}

ncclResult_t Transports::offer(const TransportComm& comm, const PeerNeed& need) {
  const int peer = need.peer;
  PeerLink& link = links_[peer];
  if (!link.offered && !link.connected) {
    link.kind = choose(comm, peer);
    ConnectOffer msg;
    memset(&msg, 0, sizeof(msg));
    msg.magic = kOfferMagic;
    msg.kind = (uint8_t)link.kind;
    msg.nChannels = comm.nChannels;
    msg.stride = layout_.stride();
    msg.blockBytes = (link.kind == TransportKind::P2p ? ChannelLayout::kCounterBytes : layout_.stride()) *
                     comm.nChannels;
    switch (link.kind) {
      case TransportKind::P2p: UCHECK(offerP2p(comm, peer, link, &msg)); break;
      case TransportKind::Shm: UCHECK(offerShm(comm, peer, link, &msg)); break;
      case TransportKind::Net: break;   // the handles follow the offer
      default:
        WARN("No transport to reach rank %d from rank %d", peer, comm.rank);
        return ncclInternalError;
    }
    UCHECK(comm.bootstrap->send(peer, kTagConnect, &msg, sizeof(msg)));
    if (link.kind == TransportKind::Net) UCHECK(offerNet(comm, peer, link));
    link.offered = true;
  }
  if (link.kind == TransportKind::P2p && (need.dirs & kDirRecv) != 0 && link.ownSlots == nullptr)
    UCHECK(offerP2pSlots(comm, peer, link));
  return ncclSuccess;
}

ncclResult_t Transports::accept(const TransportComm& comm, const PeerNeed& need) {
  const int peer = need.peer;
  PeerLink& link = links_[peer];
  if (link.netHandles) return ncclSuccess;
  const bool first = !link.connected;
  if (first) {
    ConnectOffer msg;
    UCHECK(comm.bootstrap->recv(peer, kTagConnect, &msg, sizeof(msg)));
    if (msg.magic != kOfferMagic || msg.kind != (uint8_t)link.kind || msg.nChannels != comm.nChannels ||
        msg.stride != layout_.stride()) {
      WARN("Connection offer from rank %d does not match ours (transport %s/%s, channels %d/%d, stride %llu/%llu): "
           "are all ranks running the same uniccl with the same NCCL_BUFFSIZE/NCCL_*_NCHANNELS settings?",
           peer, transportName((TransportKind)msg.kind), transportName(link.kind), msg.nChannels, comm.nChannels,
           (unsigned long long)msg.stride, (unsigned long long)layout_.stride());
      return ncclInvalidUsage;
    }
    if (link.kind == TransportKind::Net) return acceptNet(comm, peer, link);   // complete() wires
    if (link.kind == TransportKind::Shm) {
      UCHECK(acceptShm(comm, peer, link, msg));
      link.connected = link.sendWired = link.recvWired = true;
      INFO(kSubsysInit | kSubsysP2p, "Rank %d <-> rank %d connected via SHM on %d channels", comm.rank, peer,
           comm.nChannels);
      return ncclSuccess;
    }
    UCHECK(acceptP2p(comm, peer, link, msg));
  }
  if (link.kind != TransportKind::P2p) return ncclSuccess;
  if ((need.dirs & kDirSend) != 0 && link.peerSlots == nullptr) UCHECK(acceptP2pSlots(comm, peer, link));
  const bool newSend = link.peerSlots != nullptr && !link.sendWired;
  const bool newRecv = link.ownSlots != nullptr && !link.recvWired;
  if (!first && !newSend && !newRecv) return ncclSuccess;
  UCHECK(wireP2p(comm, peer, link, first));
  link.connected = true;
  link.sendWired = link.sendWired || newSend;
  link.recvWired = link.recvWired || newRecv;
  INFO(kSubsysInit | kSubsysP2p, "Rank %d <-> rank %d connected via P2P on %d channels (%s%s%s)", comm.rank, peer,
       comm.nChannels, link.sendWired ? "send" : "", link.sendWired && link.recvWired ? " and " : "",
       link.recvWired ? "receive" : (link.sendWired ? "" : "counters only"));
  return ncclSuccess;
}

ncclResult_t Transports::complete(const TransportComm& comm, int peer) {
  PeerLink& link = links_[peer];
  if (link.connected || link.kind != TransportKind::Net) return ncclSuccess;
  UCHECK(link.net->start(comm));
  for (int c = 0; c < comm.nChannels; c++) {
    dev::Peer p;
    link.net->fillPeer(c, &p);
    UCHECK(gpu::memcpy(comm.channelsHost[c].peers + peer, &p, sizeof(p)));
  }
  link.connected = true;
  netLinks_++;
  return ncclSuccess;
}

void Transports::netLinksToConnect(const std::vector<PeerNeed>& needs, std::vector<NetLink*>* out) {
  for (const PeerNeed& n : needs) {
    PeerLink& link = links_[n.peer];
    if (!link.connected && link.kind == TransportKind::Net && link.netHandles && !link.net->handshakeDone())
      out->push_back(link.net.get());
  }
}

ncclResult_t Transports::connect(const TransportComm& comm, const std::vector<PeerNeed>& needs) {
  for (const PeerNeed& n : needs) UCHECK(offer(comm, n));
  for (const PeerNeed& n : needs) UCHECK(accept(comm, n));
  std::vector<NetLink*> net;
  netLinksToConnect(needs, &net);
  UCHECK(NetLink::connectAll(net));
  for (const PeerNeed& n : needs) UCHECK(complete(comm, n.peer));
  return ncclSuccess;
}

// Fills the Peer entry of every channel from one block per side holding
// every part of the layout (SHM: the peer's GPU cannot store into our user
// buffers, so no direct-message offers).
ncclResult_t Transports::wireShm(const TransportComm& comm, int peer, char* own, char* remote) {
  const ChannelLayout& L = layout_;
  for (int c = 0; c < comm.nChannels; c++) {
    char* o = own + c * L.stride();
    char* r = remote + c * L.stride();
    const dev::Peer p = channelPeer(L, o, r, o + L.llOffset(), r + L.llOffset(), false);
    UCHECK(gpu::memcpy(comm.channelsHost[c].peers + peer, &p, sizeof(p)));
  }
  return ncclSuccess;
}

// P2P: the counters and whichever slots exist. whole: the first wiring
// (the entry is written entire). Otherwise a direction added later: only
// its buffer pointers are written, so the persistent step counters the
// kernels keep in the entry (dev_types.h) are left as they are.
ncclResult_t Transports::wireP2p(const TransportComm& comm, int peer, const PeerLink& link, bool whole) {
  const ChannelLayout& L = layout_;
  const bool addSend = !whole && link.peerSlots != nullptr && !link.sendWired;
  const bool addRecv = !whole && link.ownSlots != nullptr && !link.recvWired;
  for (int c = 0; c < comm.nChannels; c++) {
    char* o = static_cast<char*>(link.ownBlock) + c * ChannelLayout::kCounterBytes;
    char* r = static_cast<char*>(link.peerBlock) + c * ChannelLayout::kCounterBytes;
    char* os = link.ownSlots != nullptr ? static_cast<char*>(link.ownSlots) + c * L.slotStride() : nullptr;
    char* rs = link.peerSlots != nullptr ? static_cast<char*>(link.peerSlots) + c * L.slotStride() : nullptr;
    const dev::Peer p = channelPeer(L, o, r, os, rs, true);
    dev::Peer* dst = comm.channelsHost[c].peers + peer;
    if (whole) UCHECK(gpu::memcpy(dst, &p, sizeof(p)));
    if (addSend) UCHECK(gpu::memcpy(&dst->send.buffs, &p.send.buffs, sizeof(p.send.buffs)));
    if (addRecv) UCHECK(gpu::memcpy(&dst->recv.buffs, &p.recv.buffs, sizeof(p.recv.buffs)));
  }
  return ncclSuccess;
}

// ------------------------------------------------------------------- P2P
ncclResult_t Transports::offerP2p(const TransportComm& comm, int peer, PeerLink& link, ConnectOffer* msg) {
  size_t bytes = msg->blockBytes;
  // The peer spins on the tail, this GPU on the head: polled memory.
  UCHECK(gpu::deviceAllocPolled(&link.ownBlock, bytes));
  UCHECK(gpu::memset(link.ownBlock, 0, bytes));
  if (peers_[peer].processHash == peers_[comm.rank].processHash) {
    msg->blockPtr = reinterpret_cast<uint64_t>(link.ownBlock);
  } else {
    UCHECK(gpu::ipcGetMemHandle(&msg->ipc, link.ownBlock));
  }
  return ncclSuccess;
}

// Maps the peer's counters; accept() wires them with the slots.
ncclResult_t Transports::acceptP2p(const TransportComm& comm, int peer, PeerLink& link, const ConnectOffer& msg) {
  const TransportPeer& p = peers_[peer];
  if (p.processHash == peers_[comm.rank].processHash) {
    if (p.gpuDev != comm.gpuDev) UCHECK(gpu::enablePeerAccess(p.gpuDev));   // not for a GPU and itself
    link.peerBlock = reinterpret_cast<void*>(msg.blockPtr);
  } else {
    UCHECK(gpu::ipcOpenMemHandle(&link.peerBlock, msg.ipc));
    link.peerIpcMapped = true;
  }
  return ncclSuccess;
}

// The slots this rank receives the peer's data in, offered to the peer.
ncclResult_t Transports::offerP2pSlots(const TransportComm& comm, int peer, PeerLink& link) {
  const size_t bytes = layout_.slotStride() * comm.nChannels;
  // This GPU spins on LL flags in the slots: polled memory.
  UCHECK(gpu::deviceAllocPolled(&link.ownSlots, bytes));
  UCHECK(gpu::memset(link.ownSlots, 0, bytes));
  SlotsOffer msg;
  memset(&msg, 0, sizeof(msg));
  msg.magic = kSlotsMagic;
  msg.nChannels = comm.nChannels;
  msg.stride = layout_.slotStride();
  if (peers_[peer].processHash == peers_[comm.rank].processHash) {
    msg.blockPtr = reinterpret_cast<uint64_t>(link.ownSlots);
  } else {
    UCHECK(gpu::ipcGetMemHandle(&msg.ipc, link.ownSlots));
  }
  return comm.bootstrap->send(peer, kTagSlots, &msg, sizeof(msg));
}

// The peer's slots this rank sends into, mapped.
ncclResult_t Transports::acceptP2pSlots(const TransportComm& comm, int peer, PeerLink& link) {
  SlotsOffer msg;
  UCHECK(comm.bootstrap->recv(peer, kTagSlots, &msg, sizeof(msg)));
  if (msg.magic != kSlotsMagic || msg.nChannels != comm.nChannels || msg.stride != layout_.slotStride()) {
    WARN("Slot offer from rank %d does not match ours (channels %d/%d, stride %llu/%llu)", peer, msg.nChannels,
         comm.nChannels, (unsigned long long)msg.stride, (unsigned long long)layout_.slotStride());
    return ncclInvalidUsage;
  }
  if (peers_[peer].processHash == peers_[comm.rank].processHash) {
    link.peerSlots = reinterpret_cast<void*>(msg.blockPtr);
  } else {
    UCHECK(gpu::ipcOpenMemHandle(&link.peerSlots, msg.ipc));
    link.peerSlotsIpcMapped = true;
  }
  return ncclSuccess;
}

// ------------------------------------------------------------------- SHM
ncclResult_t Transports::offerShm(const TransportComm& comm, int peer, PeerLink& link, ConnectOffer* msg) {
  link.ownSegment = std::make_unique<ShmSegment>();
  UCHECK(link.ownSegment->create(msg->blockBytes));
  snprintf(msg->shmName, sizeof(msg->shmName), "%s", link.ownSegment->name().c_str());
  return ncclSuccess;
}

ncclResult_t Transports::acceptShm(const TransportComm& comm, int peer, PeerLink& link, const ConnectOffer& msg) {
  char name[sizeof(msg.shmName) + 1];
  memcpy(name, msg.shmName, sizeof(msg.shmName));
  name[sizeof(msg.shmName)] = '\0';
  link.peerSegment = std::make_unique<ShmSegment>();
  UCHECK(link.peerSegment->open(name, msg.blockBytes));
  return wireShm(comm, peer, static_cast<char*>(link.ownSegment->dev()), static_cast<char*>(link.peerSegment->dev()));
}

// ------------------------------------------------------------------- NET
ncclResult_t Transports::offerNet(const TransportComm& comm, int peer, PeerLink& link) {
  link.net = std::make_unique<NetLink>();
  if (layout_.netCarriesLL()) link.net->setLLStepBytes(layout_.llBytes / dev::kSteps);
  std::vector<char> handles;
  UCHECK(link.net->listen(comm, peer, comm.nChannels, layout_.simpleBytes / dev::kSteps, &handles, &channelNics_));
  return comm.bootstrap->send(peer, kTagNetHandles, handles.data(), handles.size());
}

ncclResult_t Transports::acceptNet(const TransportComm& comm, int peer, PeerLink& link) {
  if (link.netHandles) return ncclSuccess;
  std::vector<char> handles((size_t)comm.nChannels * NetLink::kHandleBytes);
  UCHECK(comm.bootstrap->recv(peer, kTagNetHandles, handles.data(), handles.size()));
  UCHECK(link.net->setPeerHandles(handles));
  link.netHandles = true;
  return ncclSuccess;
}

void Transports::release() {
  // Network links first: their proxy ops read conn FIFOs and staging memory.
  for (PeerLink& link : links_) {
    if (link.net) link.net->stop();
  }
  netLinks_ = 0;
  // Teardown: a release that fails was logged by the backend; the others still run.
  for (PeerLink& link : links_) {
    if (link.peerIpcMapped && link.peerBlock != nullptr) (void)gpu::ipcCloseMemHandle(link.peerBlock);
    if (link.peerSlotsIpcMapped && link.peerSlots != nullptr) (void)gpu::ipcCloseMemHandle(link.peerSlots);
    if (link.ownBlock != nullptr) (void)gpu::deviceFree(link.ownBlock);
    if (link.ownSlots != nullptr) (void)gpu::deviceFree(link.ownSlots);
    link = PeerLink{};
  }
  links_.clear();
}

}  // namespace uniccl
