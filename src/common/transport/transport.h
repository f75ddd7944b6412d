// Transports. A connection between two ranks has a direction each way on
// every channel; the receiving side of a direction owns the memory it
// receives into (slot buffers + tail counter) and the sending side the head
// counter the receiver frees slots with, and each maps the other's. P2P puts
// all of it in GPU memory (raw pointers inside one process, IPC handles
// across processes) and gives a direction's slots only where a rank receives
// from that peer: a ring rank holds slots for its predecessor, not for its
// successor. SHM puts both directions in a POSIX shared-memory segment both
// GPUs map. Device-side counters follow dev_types.h. NET (another host, or
// P2P and SHM both disabled) goes through the net plugin table and the proxy
// thread: net_link.h. SHM and NET links always carry both directions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/gpu.h"
#include "common/topo/host_ranks.h"
#include "common/topo/nics.h"
#include "common/transport/net_link.h"
#include "common/transport/peer_need.h"
#include "common/transport/traffic.h"
#include "common/transport/transport_comm.h"
#include "uniccl.h"

namespace uniccl {

enum class TransportKind : uint8_t { None = 0, P2p = 1, Shm = 2, Net = 3 };
const char* transportName(TransportKind kind);

// Each rank owns, per peer and channel: [tail | head | LL slots | LL128
// slots | Simple slots], each part 128-byte aligned (the head's 128 bytes
// also hold the direct-message offer words). SHM keeps all of it in one
// segment per peer (stride()); P2P in two GPU blocks per peer: the counters
// of every channel (kCounterBytes each), and the slots of every channel
// (slotStride() each) only when this rank receives from the peer. LL128
// slots exist (ll128Bytes > 0) only in communicators that may run LL128
// (Transports::ll128(): every pair of ranks P2P, every GPU delivering
// 128-byte warp stores whole). The tail and slots serve the direction peer
// -> us (the peer writes them); the head serves us -> peer (the peer bumps
// it when it freed a slot, and we poll it in our own memory).
struct ChannelLayout {
  static constexpr size_t kCounterBytes = 256;
  size_t llBytes;
  size_t simpleBytes;
  size_t ll128Bytes;
  size_t tailOffset() const { return 0; }
  size_t headOffset() const { return 128; }
  // Two words [address, tag] on the head's line (which only the receiver
  // writes), where the receiver offers a direct message's destination.
  size_t ptrExchangeOffset() const { return 128 + 64; }
  size_t llOffset() const { return 256; }
  size_t ll128Offset() const { return 256 + llBytes; }
  size_t simpleOffset() const { return 256 + llBytes + ll128Bytes; }
  size_t stride() const { return 256 + llBytes + ll128Bytes + simpleBytes; }
  // P2P's slot block: [LL | LL128 | Simple] per channel.
  size_t slotStride() const { return llBytes + ll128Bytes + simpleBytes; }
  size_t slotLlOffset() const { return 0; }
  size_t slotLl128Offset() const { return llBytes; }
  size_t slotSimpleOffset() const { return llBytes + ll128Bytes; }
  // The network carries LL when an LL slot fits a staging slot: a received
  // message lands in a staging slot first (common/proxy/ll_lines.h).
  bool netCarriesLL() const { return llBytes <= simpleBytes; }
};


// A POSIX shared-memory segment mapped into this process (and registered
// with the GPU runtime so kernels can address it). open() removes the name
// once it holds the segment, so a connected pair leaves nothing in /dev/shm
// (shm_segment.cc).
class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  [[nodiscard]] ncclResult_t create(size_t bytes);                    // unique name, zero-filled
  [[nodiscard]] ncclResult_t open(const std::string& name, size_t bytes);
  void* host() const { return host_; }
  void* dev() const { return dev_; }
  const std::string& name() const { return name_; }
  void unlinkName();   // the creator's: remove the name if the peer has not (release() does)

 private:
  void release();
  std::string name_;
  bool owner_ = false;
  void* host_ = nullptr;
  void* dev_ = nullptr;
  size_t bytes_ = 0;
};

// What this rank owns for one peer.
struct PeerLink {
  TransportKind kind = TransportKind::None;
  bool offered = false;     // our resources allocated and described to the peer
  bool connected = false;   // wired into the device channels (P2P: the counters; the slots below)
  // P2P
  void* ownBlock = nullptr;       // our counters (ChannelLayout::kCounterBytes per channel)
  void* peerBlock = nullptr;      // the peer's counters, mapped
  bool peerIpcMapped = false;     // mapped through an IPC handle (close it on release)
  void* ownSlots = nullptr;       // the slots we receive the peer's data in (ChannelLayout::slotStride per channel)
  void* peerSlots = nullptr;      // the peer's slots we send into, mapped
  bool peerSlotsIpcMapped = false;
  bool recvWired = false;         // the channels' receive halves point at ownSlots
  bool sendWired = false;         // the channels' send halves point at peerSlots
  // SHM
  std::unique_ptr<ShmSegment> ownSegment;   // our block
  std::unique_ptr<ShmSegment> peerSegment;  // the peer's block
  // NET
  std::unique_ptr<NetLink> net;
  bool netHandles = false;     // the peer's handles are in: connectAll() may progress it
};

class Transports {
 public:
  Transports() = default;
  ~Transports();
  Transports(const Transports&) = delete;
  Transports& operator=(const Transports&) = delete;

  // This rank's P2P reach row, as init() takes every rank's: one byte per
  // rank of its host (hosts: topo::hostRanks of the peers' host hashes; by
  // local index, hosts.rowWidth bytes), 1 where this rank's GPU can address
  // that rank's, 2 where the link also keeps LL128 lines whole. Reads
  // NCCL_P2P_DISABLE. Init exchanges the rows together with the topology's.
  [[nodiscard]] static ncclResult_t reachRow(const TransportComm& comm, const std::vector<TransportPeer>& peers,
                                             const topo::HostRanks& hosts, std::vector<uint8_t>* row);
  // Called once at init after the exchange of reach rows: decides P2P
  // reachability with every peer and sizes buffers. Uses NCCL_BUFFSIZE
  // (Simple), UNICCL_LL_BUFFSIZE, NCCL_SHM_DISABLE. peers: every rank's,
  // [nRanks] (kept for the connections); reachRows: every rank's reachRow(),
  // [nRanks][rowWidth], the same on every rank.
  [[nodiscard]] ncclResult_t init(const TransportComm& comm, std::vector<TransportPeer> peers,
                                  std::vector<uint8_t> reachRows);
  // The connection to peer is wired (P2P: at least its counters).
  bool connected(int peer) const { return links_[peer].connected; }
  // The connection to peer carries the directions dirs (ConnDir bits).
  bool ready(int peer, uint8_t dirs) const;
  // Both ranks' GPUs can address each other's memory (same decision on every rank).
  bool p2pReachable(int a, int b) const { return reachByHost(a, b) && reachByHost(b, a); }
  TransportKind kind(int peer) const { return links_[peer].kind; }
  // init() ran and p2pReachable() may be asked (hand-built test comms lack it).
  bool reachKnown() const { return nRanks_ > 0 && hosts_.host.size() == (size_t)nRanks_; }
  // Sets the reach init() would exchange as a full matrix ([a * nRanks + b]:
  // a can address b's GPU), all ranks on one host, for unit tests of what
  // is decided from it.
  void setReachForTesting(int nRanks, std::vector<uint8_t> reach);

  // Connection in phases so that one thread can connect several
  // communicators of a group without deadlock (each phase waits only on
  // earlier phases of the peer): offer() allocates our side and sends its
  // description; accept() receives the peer's and wires channels (NET: only
  // receives the peer's handles); then NetLink::connectAll() over the
  // netLinksToConnect() of every communicator the thread sets up (the
  // network handshakes, all together); complete() finishes NET links
  // (starts the proxy ops, wires). Each phase for every peer before the next.
  // A P2P link gets the slots of a direction when a need first names it:
  // the receiver offers its slots (offer), the sender maps them (accept).
  [[nodiscard]] ncclResult_t offer(const TransportComm& comm, const PeerNeed& need);
  [[nodiscard]] ncclResult_t accept(const TransportComm& comm, const PeerNeed& need);
  void netLinksToConnect(const std::vector<PeerNeed>& needs, std::vector<NetLink*>* out);
  [[nodiscard]] ncclResult_t complete(const TransportComm& comm, int peer);
  // All phases, for a set of peers of one communicator.
  [[nodiscard]] ncclResult_t connect(const TransportComm& comm, const std::vector<PeerNeed>& needs);

  // The transport ranks a and b use with each other (same answer on every
  // rank once init() ran); sameHost: their host hashes are equal.
  TransportKind kindBetween(int a, int b, bool sameHost) const;
  // Some ring neighbour pair goes through the network: collectives use the
  // Simple protocol and the NET channel count (decided at init, before any
  // connection exists).
  bool ringUsesNet() const { return ringUsesNet_; }
  // The communicator may run LL128 (decided at init, the same on every
  // rank): every pair of ranks is reached through P2P, every rank's GPU
  // delivers a warp's aligned 128-byte store as one unit
  // (gpu::DeviceProps::lineStoreAtomic128) and every link between two GPUs
  // keeps such stores whole (gpu::p2pLinkKeepsLines: NVLink on CUDA); its connections then carry
  // LL128 slots (UNICCL_LL128_BUFFSIZE). Never over SHM (host memory makes
  // no such promise) or the network (the proxy moves whole Simple slots).
  bool ll128() const { return layout_.ll128Bytes > 0; }
  // Unit tests: a layout without init().
  void setLayoutForTesting(const ChannelLayout& l) { layout_ = l; }
  void setRingUsesNetForTesting(bool net) { ringUsesNet_ = net; }
  // Tells the proxy a kernel was launched (no-op without NET links).
  void wakeNetProxy();
  // A NET peer closed its connection (NetLink::peerGone): its rank, or -1.
  int lostNetPeer() const;
  bool netPeerLost(int peer) const {
    return netLinks_ > 0 && peer >= 0 && peer < (int)links_.size() && links_[peer].net && links_[peer].net->peerGone();
  }

  // The topology's NIC per channel for this rank's host (topo/nics.h), set
  // at init before any connection: network links open each channel on it.
  void setChannelNics(std::vector<topo::ChannelNic> nics) { channelNics_ = std::move(nics); }
  const std::vector<topo::ChannelNic>& channelNics() const { return channelNics_; }
  // This rank's tree parents and children over every channel, set at init:
  // they connect (both ways) when the first collective on the tree is
  // planned. treeReady(): every one of them is connected.
  void setTreePeers(std::vector<int> peers) { treePeers_ = std::move(peers); }
  const std::vector<int>& treePeers() const { return treePeers_; }
  bool treeReady() const {
    for (int p : treePeers_)
      if (!ready(p, kDirBoth)) return false;
    return true;
  }
  // Bytes this rank sent so far, by link class, NIC and channel (traffic.h).
  // Read when no kernel of the communicator runs (after a stream sync).
  [[nodiscard]] ncclResult_t readTraffic(const TransportComm& comm, Traffic* out) const;

  // Frees every resource (safe after errors, idempotent).
  void release();
  const ChannelLayout& layout() const { return layout_; }

 private:
  TransportKind choose(const TransportComm& comm, int peer) const;
  [[nodiscard]] ncclResult_t offerP2p(const TransportComm& comm, int peer, PeerLink& link, struct ConnectOffer* offer);
  [[nodiscard]] ncclResult_t offerShm(const TransportComm& comm, int peer, PeerLink& link, struct ConnectOffer* offer);
  [[nodiscard]] ncclResult_t acceptP2p(const TransportComm& comm, int peer, PeerLink& link,
                                       const struct ConnectOffer& offer);
  [[nodiscard]] ncclResult_t acceptShm(const TransportComm& comm, int peer, PeerLink& link,
                                       const struct ConnectOffer& offer);
  [[nodiscard]] ncclResult_t offerNet(const TransportComm& comm, int peer, PeerLink& link);
  [[nodiscard]] ncclResult_t acceptNet(const TransportComm& comm, int peer, PeerLink& link);
  [[nodiscard]] ncclResult_t wireShm(const TransportComm& comm, int peer, char* ownBlockDev, char* peerBlockDev);
  [[nodiscard]] ncclResult_t offerP2pSlots(const TransportComm& comm, int peer, PeerLink& link);
  [[nodiscard]] ncclResult_t acceptP2pSlots(const TransportComm& comm, int peer, PeerLink& link);
  [[nodiscard]] ncclResult_t wireP2p(const TransportComm& comm, int peer, const PeerLink& link, bool whole);

  ChannelLayout layout_{};
  std::vector<PeerLink> links_;
  std::vector<TransportPeer> peers_;   // [nRanks], from init()
  // a can address b's GPU (2: and keeps LL128 lines whole); only ranks of one host can.
  uint8_t reachByHost(int a, int b) const {
    return hosts_.sameHost(a, b) ? p2pReach_[(size_t)a * hosts_.rowWidth + hosts_.localIndex[b]] : 0;
  }
  topo::HostRanks hosts_;           // which ranks share a host (from peers_)
  std::vector<uint8_t> p2pReach_;   // [nRanks][hosts_.rowWidth]: each rank's row over its host's ranks
  int nRanks_ = 0;
  bool shmDisabled_ = false;
  bool ringUsesNet_ = false;
  int netLinks_ = 0;           // links of kind NET (wakeNetProxy walks them only when nonzero)
  std::vector<topo::ChannelNic> channelNics_;
  std::vector<int> treePeers_;
};

}  // namespace uniccl
