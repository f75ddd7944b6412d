// The network flavour of a connection to one peer: for every channel a net
// send comm and a net receive comm (the net plugin table, e.g. the socket
// transport), a conn FIFO and host-mapped staging slots per direction, and
// one proxy op per direction that lives as long as the link.
//
// Why persistent proxy ops (instead of ops posted per launch, as NCCL does):
// the kernel's step counters already persist across launches and the proxy
// continues at the connection's running step, so one op per direction that
// never ends moves whatever the kernels publish. The host never has to
// recompute how many steps each algorithm takes per channel (a mismatch
// would hang), graph replays need no host node to post ops, and a launch
// costs one wake of the proxy thread. See docs/network.md.
//
// Setup is three phases so that one thread can connect several
// communicators of a group (each phase only waits on earlier phases of
// the peer): listen() (offer); setPeerHandles(), then connectAll() over
// every link the thread sets up (accept: connects and accepts together);
// start() (complete: staging registered, proxy ops running).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/proxy/proxy.h"
#include "common/topo/nics.h"
#include "common/transport/transport_comm.h"
#include "device/dev_types.h"
#include "net/net.h"
#include "uniccl.h"

namespace uniccl {

// Pinned host memory the GPU addresses too (staging slots). Owns it.
class MappedBuffer {
 public:
  MappedBuffer() = default;
  ~MappedBuffer();
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  [[nodiscard]] ncclResult_t allocate(size_t bytes);
  char* host() const { return host_; }
  char* device() const { return device_; }

 private:
  char* host_ = nullptr;
  char* device_ = nullptr;
};

class NetLink {
 public:
  NetLink();
  ~NetLink();   // stop(): the proxy's ops end before any resource goes
  NetLink(const NetLink&) = delete;
  NetLink& operator=(const NetLink&) = delete;

  static constexpr size_t kHandleBytes = NCCL_NET_HANDLE_MAXSIZE;

  // Phase 1: picks the net (comm.netName or NCCL_NET), listens once
  // per channel, and returns the handles the peer connects to. nics: the
  // topology's NIC per channel for this rank's host (net_devices.h picks the
  // transport's device from it); nullptr or short: GPU index mod devices.
  // Keeps comm's hooks: the handshake and the proxy's ops report through them.
  [[nodiscard]] ncclResult_t listen(const TransportComm& comm, int peer, int nChannels, size_t stepBytes,
                                    std::vector<char>* handles,
                      const std::vector<topo::ChannelNic>* nics = nullptr);
  // Before listen(): the link's proxy ops run on the proxy threads of this
  // group (ProxyRef::acquire) instead of the process's.
  void setProxyGroup(const void* group) { proxyGroup_ = group; }
  // Before listen(): the link carries the LL protocol too, in LL slots of
  // this many bytes (whole 16-byte lines, no more than a staging slot; the
  // proxy's LL path, common/proxy/ll_lines.h). 0: the Simple protocol only.
  void setLLStepBytes(size_t bytes) { llStepBytes_ = bytes; }
  // Phase 2: the handles the peer's listen() returned.
  [[nodiscard]] ncclResult_t setPeerHandles(const std::vector<char>& handles);
  // Phase 2, for every link a thread sets up at once (each after
  // setPeerHandles): connects our send side of every channel to the peer's
  // listeners and accepts the peer's connections on ours, all progressing
  // together until every link has both. A transport may finish a connect
  // only once the peer's accept answered it (IB exchanges the QPs so; NCCL's
  // net API allows it), while the peer, or this very thread for another
  // communicator of a group, waits the same way on our accept. Ends with an
  // error when a link's communicator is aborted or after
  // UNICCL_NET_CONNECT_TIMEOUT_MS.
  [[nodiscard]] static ncclResult_t connectAll(const std::vector<NetLink*>& links);
  bool handshakeDone() const;  // both directions of every channel exist
  // Phase 3: registers staging memory and starts the persistent proxy ops.
  // After this, fillPeer() may wire channels.
  [[nodiscard]] ncclResult_t start(const TransportComm& comm);
  bool connected() const { return started_; }
  // The device-side connection structs of channel c.
  void fillPeer(int c, dev::Peer* p) const;
  // Host addresses of channel c's FIFOs and staging slots, for a producer /
  // consumer on the host instead of a kernel (GIN: device_api/gin.cc).
  struct HostChannel {
    ConnFifo* sendFifo;
    char* sendStaging;
    ConnFifo* recvFifo;
    char* recvStaging;
    size_t stepBytes;
  };
  HostChannel hostChannel(int c) const;
  // Makes the proxy look now (a kernel that uses this link was launched).
  void wakeProxy() {
    proxy_.wake();
    recvProxy_.wake();
  }
  // The peer closed its side (it destroyed its communicator, or died) while
  // no data was leaving towards it: set by the proxy thread.
  bool peerGone() const { return peerGone_.load(std::memory_order_acquire); }
  int peer() const { return peer_; }
  const char* netName() const { return net_ != nullptr ? net_->name : "?"; }
  int nChannels() const { return nChannels_; }
  // The transport's device channel c's connections use (both directions).
  int netDevice(int c) const { return c >= 0 && c < (int)devs_.size() ? devs_[c] : -1; }
  // Channel c's NIC as traffic accounting names it: the topology's NIC when
  // it has one, else the transport's device name.
  const std::string& nicName(int c) const { return nicNames_[c]; }

  // Ends the proxy ops (waits for them), then closes comms and frees memory.
  // Idempotent.
  void stop();

 private:
  struct Direction;
  struct Channel;
  [[nodiscard]] ncclResult_t startOps(const TransportComm& comm);
  // One round of non-blocking connect and accept calls.
  [[nodiscard]] ncclResult_t progressHandshake(bool* done);
  static void onOpFinished(void* arg, ncclResult_t result);

  const NetApi* net_ = nullptr;
  // The communicator's hooks (TransportComm): its abort ends the handshake,
  // a failed handshake or send is its loss.
  std::function<bool()> aborted_;
  std::function<void(int, const std::string&)> peerUnreachable_;
  std::function<void(int, ncclResult_t, const std::string&)> failed_;
  std::vector<char> peerHandles_;      // connect() may keep state in them between calls
  std::vector<int> devs_;              // per channel: the net device
  std::vector<std::string> nicNames_;  // per channel: nicName()
  int peer_ = -1;
  int rank_ = -1;
  int nChannels_ = 0;
  size_t stepBytes_ = 0;
  size_t llStepBytes_ = 0;
  std::unique_ptr<Channel[]> channels_;
  MappedBuffer sendStaging_;   // [channel][kSteps slots]
  MappedBuffer recvStaging_;
  MappedBuffer sendLL_;        // [channel][kSteps LL slots], when llStepBytes_ > 0
  MappedBuffer recvLL_;
  ProxyRef proxy_;       // the send ops' thread
  ProxyRef recvProxy_;   // the receive ops' thread (ProxyLane::kReceive)
  const void* proxyGroup_ = nullptr;
  uint32_t stopFlag_ = 0;      // the ops' abort flag: set by stop()
  std::atomic<bool> peerGone_{false};
  bool started_ = false;
};

}  // namespace uniccl
