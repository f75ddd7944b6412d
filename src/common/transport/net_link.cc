// Network connections: setup through the net plugin table, the persistent
// proxy ops, and the teardown order docs/proxy.md prescribes (stop the ops,
// wait for them, deregister, close, free).
#include "common/transport/net_link.h"

#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/check.h"
#include "common/gpu.h"
#include "common/proxy/conn_fifo.h"
#include "common/transport/net_devices.h"
#include "common/util/debug.h"
#include "common/util/param.h"

namespace uniccl {

namespace {
// A persistent op never reaches its step count (2^62 steps of even one byte
// would take centuries); stop() ends it.
constexpr uint64_t kForeverSteps = uint64_t{1} << 62;

using Clock = std::chrono::steady_clock;

// How long an orderly teardown waits for the steps our kernels already
// handed to the proxy to leave (the peer is still receiving them).
constexpr auto kDrainTimeout = std::chrono::seconds(5);

}  // namespace

MappedBuffer::~MappedBuffer() {
  if (host_ != nullptr) (void)gpu::hostFree(host_);   // a destructor: the backend logs a failure
}

ncclResult_t MappedBuffer::allocate(size_t bytes) {
  void* h = nullptr;
  void* d = nullptr;
  UCHECK(gpu::hostAllocMapped(&h, &d, bytes));
  host_ = static_cast<char*>(h);
  device_ = static_cast<char*>(d);
  return ncclSuccess;
}

// One direction of one channel: what the proxy progresses and the
// completion context its callback needs.
struct NetLink::Direction {
  void* comm = nullptr;      // net sendComm / recvComm
  void* mhandle = nullptr;   // regMr of this direction's staging slots
  void* llMhandle = nullptr; // regMr of its LL slots
  ConnFifoBuffer fifo;
  ProxyConnection conn;
  ProxyOp op;
  // Completion context (the callback runs on the proxy thread).
  NetLink* link = nullptr;
  int channel = 0;
  bool send = false;
  std::atomic<bool> callbackDone{false};
  bool posted = false;
};

struct NetLink::Channel {
  void* listenComm = nullptr;
  Direction send;
  Direction recv;
};

NetLink::NetLink() = default;
NetLink::~NetLink() { stop(); }

ncclResult_t NetLink::listen(const TransportComm& comm, int peer, int nChannels, size_t stepBytes,
                             std::vector<char>* handles,
                             const std::vector<topo::ChannelNic>* nics) {
  peer_ = peer;
  aborted_ = comm.aborted;
  peerUnreachable_ = comm.peerUnreachable;
  failed_ = comm.failed;
  rank_ = comm.rank;
  nChannels_ = nChannels;
  stepBytes_ = stepBytes;
  UCHECK(netSelectByName(comm.netName.c_str(), &net_));
  int ndev = 0;
  UCHECK(net_->devices(&ndev));
  if (ndev < 1) {
    WARN("Rank %d: the %s network has no device (NCCL_SOCKET_IFNAME / NCCL_IB_HCA select them): cannot reach rank %d",
         comm.rank, net_->name, peer);
    return ncclSystemError;
  }
  std::vector<ncclNetProperties_v8_t> props(ndev);
  std::vector<std::string> devNames(ndev);
  for (int d = 0; d < ndev; d++) {
    memset(&props[d], 0, sizeof(props[d]));
    UCHECK(net_->getProperties(d, &props[d]));
    devNames[d] = props[d].name != nullptr ? props[d].name : "";
  }
  std::vector<topo::ChannelNic> chNics(nChannels);
  for (int c = 0; nics != nullptr && c < nChannels && c < (int)nics->size(); c++) chNics[c] = (*nics)[c];
  devs_ = channelNetDevices(chNics, devNames, comm.gpuDev);
  nicNames_.resize(nChannels);
  std::vector<bool> checked(ndev, false);
  for (int c = 0; c < nChannels; c++) {
    const int d = devs_[c];
    nicNames_[c] = !chNics[c].name.empty() ? chNics[c].name : devNames[d];
    if (checked[d]) continue;
    checked[d] = true;
    if ((props[d].ptrSupport & NCCL_PTR_HOST) == 0) {
      WARN("Rank %d: network %s device %d (%s) cannot move host memory; uniccl stages network traffic in host memory",
           comm.rank, net_->name, d, devNames[d].c_str());
      return ncclInvalidUsage;
    }
  }
  channels_ = std::make_unique<Channel[]>(nChannels);
  handles->assign((size_t)nChannels * kHandleBytes, 0);
  for (int c = 0; c < nChannels; c++) {
    UCHECK(net_->listen(devs_[c], handles->data() + (size_t)c * kHandleBytes, &channels_[c].listenComm));
  }
  UCHECK(sendStaging_.allocate((size_t)nChannels * kConnSteps * stepBytes));
  UCHECK(recvStaging_.allocate((size_t)nChannels * kConnSteps * stepBytes));
  if (llStepBytes_ > 0) {
    // Their size is checked where every connection is (ProxyRef::post).
    const size_t llBytes = (size_t)nChannels * kConnSteps * llStepBytes_;
    UCHECK(sendLL_.allocate(llBytes));
    UCHECK(recvLL_.allocate(llBytes));
    // Flags 0: no step's (the first step's flag is 1).
    memset(sendLL_.host(), 0, llBytes);
    memset(recvLL_.host(), 0, llBytes);
  }
  for (int c = 0; c < nChannels; c++) {
    UCHECK(channels_[c].send.fifo.allocateMapped());
    UCHECK(channels_[c].recv.fifo.allocateMapped());
  }
  UCHECK(ProxyRef::acquire(&proxy_, proxyGroup_));
  UCHECK(ProxyRef::acquire(&recvProxy_, proxyGroup_, ProxyLane::kReceive));
  std::string where;   // "dev(nic)" per channel, as NCCL logs its channels' NICs
  for (int c = 0; c < nChannels && c < 16; c++)
    where += " " + std::to_string(devs_[c]) + "(" + nicNames_[c] + ")";
  INFO(kSubsysNet | kSubsysInit, "Rank %d: listening for rank %d on %s, %d channels, devices per channel:%s%s",
       comm.rank, peer, net_->name, nChannels, where.c_str(), nChannels > 16 ? " ..." : "");
  return ncclSuccess;
}

ncclResult_t NetLink::setPeerHandles(const std::vector<char>& handles) {
  if (handles.size() != (size_t)nChannels_ * kHandleBytes) {
    WARN("Rank %d: rank %d sent %zu bytes of network handles, expected %zu", rank_, peer_, handles.size(),
         (size_t)nChannels_ * kHandleBytes);
    return ncclInternalError;
  }
  peerHandles_ = handles;
  return ncclSuccess;
}

bool NetLink::handshakeDone() const {
  for (int c = 0; c < nChannels_; c++)
    if (channels_[c].send.comm == nullptr || channels_[c].recv.comm == nullptr) return false;
  return nChannels_ > 0;
}

ncclResult_t NetLink::progressHandshake(bool* done) {
  for (int c = 0; c < nChannels_; c++) {
    Channel& ch = channels_[c];
    if (ch.send.comm == nullptr)
      UCHECK(net_->connect(devs_[c], peerHandles_.data() + (size_t)c * kHandleBytes, &ch.send.comm, nullptr));
    if (ch.recv.comm == nullptr) {
      UCHECK(net_->accept(ch.listenComm, &ch.recv.comm, nullptr));
      if (ch.recv.comm != nullptr) {
        UCHECK(net_->closeListen(ch.listenComm));
        ch.listenComm = nullptr;
      }
    }
  }
  *done = handshakeDone();
  return ncclSuccess;
}

ncclResult_t NetLink::connectAll(const std::vector<NetLink*>& links) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(netConnectTimeoutMs());
  int spins = 0;
  for (;;) {
    const NetLink* waiting = nullptr;
    for (NetLink* l : links) {
      if (l->handshakeDone()) continue;
      if (l->peerHandles_.empty()) {
        WARN("Rank %d: connecting to rank %d over the network before its handles arrived", l->rank_, l->peer_);
        return ncclInternalError;
      }
      bool done = false;
      const ncclResult_t res = l->progressHandshake(&done);
      if (res != ncclSuccess) {
        // The transport's WARN says what; the caller's last error must say with whom.
        char text[256];
        snprintf(text, sizeof(text), "the network %s connection setup with rank %d failed: %s", l->net_->name,
                 l->peer_, ncclGetErrorString(res));
        WARN("Rank %d: %s", l->rank_, text);
        if (res == ncclRemoteError && l->peerUnreachable_) l->peerUnreachable_(l->peer_, text);
        return res;
      }
      if (!done && waiting == nullptr) waiting = l;
    }
    if (waiting == nullptr) return ncclSuccess;
    for (NetLink* l : links) {
      if (!l->aborted_ || !l->aborted_()) continue;
      WARN("Rank %d: network connection setup with rank %d stopped: the communicator was aborted", l->rank_,
           l->peer_);
      return ncclRemoteError;
    }
    if (Clock::now() > deadline) {
      WARN("Rank %d: network connection setup with rank %d did not complete within %lld ms (is rank %d alive and "
           "reachable on the network interface? UNICCL_NET_CONNECT_TIMEOUT_MS sets the limit)",
           waiting->rank_, waiting->peer_, (long long)netConnectTimeoutMs(), waiting->peer_);
      return ncclRemoteError;
    }
    if (++spins < 1000) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

ncclResult_t NetLink::start(const TransportComm& comm) {
  if (!handshakeDone()) {
    WARN("Rank %d: starting the network link to rank %d before its connections exist", comm.rank, peer_);
    return ncclInternalError;
  }
  const size_t chBytes = kConnSteps * stepBytes_;
  for (int c = 0; c < nChannels_; c++) {
    Channel& ch = channels_[c];
    UCHECK(net_->regMr(ch.send.comm, sendStaging_.host() + c * chBytes, chBytes, NCCL_PTR_HOST, &ch.send.mhandle));
    UCHECK(net_->regMr(ch.recv.comm, recvStaging_.host() + c * chBytes, chBytes, NCCL_PTR_HOST, &ch.recv.mhandle));
    if (llStepBytes_ == 0) continue;
    const size_t llBytes = kConnSteps * llStepBytes_;
    UCHECK(net_->regMr(ch.send.comm, sendLL_.host() + c * llBytes, llBytes, NCCL_PTR_HOST, &ch.send.llMhandle));
    UCHECK(net_->regMr(ch.recv.comm, recvLL_.host() + c * llBytes, llBytes, NCCL_PTR_HOST, &ch.recv.llMhandle));
  }
  UCHECK(startOps(comm));
  started_ = true;
  INFO(kSubsysNet | kSubsysInit, "Rank %d <-> rank %d connected via NET/%s on %d channels (%zu-byte steps)",
       comm.rank, peer_, net_->name, nChannels_, stepBytes_);
  return ncclSuccess;
}

ncclResult_t NetLink::startOps(const TransportComm& comm) {
  const size_t chBytes = kConnSteps * stepBytes_;
  for (int c = 0; c < nChannels_; c++) {
    for (int s = 0; s < 2; s++) {
      const bool send = s == 0;
      Direction& d = send ? channels_[c].send : channels_[c].recv;
      ProxyConnection& pc = d.conn;
      pc.net = net_;
      pc.netComm = d.comm;
      pc.mhandle = d.mhandle;
      pc.fifo = d.fifo.host();
      pc.staging = (send ? sendStaging_.host() : recvStaging_.host()) + c * chBytes;
      pc.stepBytes = (int64_t)stepBytes_;
      pc.needFlush = false;   // host staging: nothing landed in GPU memory behind the CPU's back
      if (llStepBytes_ > 0) {
        pc.llStaging = (send ? sendLL_.host() : recvLL_.host()) + c * kConnSteps * llStepBytes_;
        pc.llStepBytes = (int64_t)llStepBytes_;
        pc.llMhandle = d.llMhandle;
      }
      pc.abortFlag = &stopFlag_;
      d.link = this;
      d.channel = c;
      d.send = send;
      ProxyOp& op = d.op;
      op.conn = &pc;
      op.kind = send ? ProxyOpKind::kSend : ProxyOpKind::kRecv;
      op.tag = c;
      op.nsteps = kForeverSteps;
      op.onComplete = &NetLink::onOpFinished;
      op.onCompleteArg = &d;
      // ProxyOp events span the link's life (persistent ops): no task parent.
      op.prof = comm.profiler;
      op.profChannel = c;
      op.profPeer = peer_;
      UCHECK((send ? proxy_ : recvProxy_).post(&op));
      d.posted = true;
    }
  }
  return ncclSuccess;
}

// Proxy thread. A persistent op only finishes when stop() ends it or the
// network failed.
//  - A send failed: data we produced cannot reach the peer. Abort the
//    communicator (as a timeout would), so kernels waiting on this peer exit
//    and ncclCommGetAsyncError reports it.
//  - A receive failed: the irecvs are posted ahead of any need, so this is
//    also how a peer's ordinary ncclCommDestroy looks (TCP cannot tell it
//    from a death at a message boundary). Only remember it: the next launch
//    on this communicator fails with a clear error (Transports::lostNetPeer),
//    a kernel that was sending to the peer fails through its send op, and a
//    kernel only receiving from a dead peer is ended by the watchdog.
void NetLink::onOpFinished(void* arg, ncclResult_t result) {
  Direction* d = static_cast<Direction*>(arg);
  NetLink* link = d->link;
  if (__atomic_load_n(&link->stopFlag_, __ATOMIC_ACQUIRE) == 0 && !d->send) {
    INFO(kSubsysNet, "Rank %d: the network %s connection from rank %d (channel %d) closed (%s): rank %d destroyed "
         "its communicator or died", link->rank_, link->net_->name, link->peer_, d->channel,
         ncclGetErrorString(result), link->peer_);
    link->peerGone_.store(true, std::memory_order_release);
  } else if (__atomic_load_n(&link->stopFlag_, __ATOMIC_ACQUIRE) == 0) {
    char text[256];
    snprintf(text, sizeof(text), "the network %s connection to rank %d (channel %d) failed: %s", link->net_->name,
             link->peer_, d->channel, ncclGetErrorString(result));
    WARN("Rank %d: %s; aborting the communicator", link->rank_, text);
    if (link->failed_) link->failed_(link->peer_, result, text);
  }
  d->callbackDone.store(true, std::memory_order_release);  // last touch of *d by the proxy
}

NetLink::HostChannel NetLink::hostChannel(int c) const {
  const size_t chBytes = kConnSteps * stepBytes_;
  const Channel& ch = channels_[c];
  return HostChannel{ch.send.fifo.host(), sendStaging_.host() + c * chBytes, ch.recv.fifo.host(),
                     recvStaging_.host() + c * chBytes, stepBytes_};
}

void NetLink::fillPeer(int c, dev::Peer* p) const {
  memset(p, 0, sizeof(*p));   // not connected: the kernel sees connected == 0
  if (!started_ || c < 0 || c >= nChannels_) return;
  const size_t chBytes = kConnSteps * stepBytes_;
  const Channel& ch = channels_[c];
  ConnFifo* sf = ch.send.fifo.device();
  ConnFifo* rf = ch.recv.fifo.device();
  // LL lines in host memory (setLLStepBytes), Simple steps in the staging slots; never LL128.
  const size_t llBytes = kConnSteps * llStepBytes_;
  p->send.buffs[dev::kProtoLL] = llStepBytes_ > 0 ? sendLL_.device() + c * llBytes : nullptr;
  p->send.buffs[dev::kProtoLL128] = nullptr;
  p->send.buffs[dev::kProtoSimple] = sendStaging_.device() + c * chBytes;
  p->send.remoteTail = &sf->tail;
  p->send.head = &sf->head;
  p->send.fifo = reinterpret_cast<dev::ConnSlot*>(sf->slots);
  p->recv.buffs[dev::kProtoLL] = llStepBytes_ > 0 ? recvLL_.device() + c * llBytes : nullptr;
  p->recv.buffs[dev::kProtoLL128] = nullptr;
  p->recv.buffs[dev::kProtoSimple] = recvStaging_.device() + c * chBytes;
  p->recv.tail = &rf->tail;
  p->recv.remoteHead = &rf->head;
  p->recv.fifo = reinterpret_cast<dev::ConnSlot*>(rf->slots);
  p->connected = 1;
}

void NetLink::stop() {
  if (!channels_) return;
  // A kernel ends once its last send step is in the staging slots, before the
  // proxy has passed it to the network: an orderly destroy right after the
  // stream is done must not drop it (the peer's receive would wait forever).
  // Wait until every send op has freed all published steps (the net took
  // them), the op ended (a send failed), or the communicator is aborted.
  const auto deadline = Clock::now() + kDrainTimeout;
  for (int c = 0; started_ && c < nChannels_; c++) {
    Direction& d = channels_[c].send;
    if (!d.posted) continue;
    const ConnFifo* f = d.fifo.host();
    // Published and not yet sent: steps below the tail, and an LL step,
    // which advances no tail (its slot's size is set until the proxy frees it).
    auto unsent = [f] {
      const uint64_t head = connLoadAcquire(&f->head);
      return head < connLoadAcquire(&f->tail) || connLoadSize(f->slots[head % kConnSteps]) != -1;
    };
    while (unsent() && !d.callbackDone.load(std::memory_order_acquire) && !(aborted_ && aborted_())) {
      if (Clock::now() > deadline) {
        WARN("Rank %d: %llu steps to rank %d (channel %d) were still not sent %lld s into the communicator's "
             "destroy; dropping them (is rank %d still receiving?)", rank_,
             (unsigned long long)(connLoadAcquire(&f->tail) - connLoadAcquire(&f->head)), peer_, c,
             (long long)std::chrono::duration_cast<std::chrono::seconds>(kDrainTimeout).count(), peer_);
        c = nChannels_;   // no more waiting for any channel
        break;
      }
      proxy_.wake();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  __atomic_store_n(&stopFlag_, 1u, __ATOMIC_RELEASE);
  if (proxy_) proxy_.wake();
  if (recvProxy_) recvProxy_.wake();
  for (int c = 0; c < nChannels_; c++) {
    for (Direction* d : {&channels_[c].send, &channels_[c].recv}) {
      if (!d->posted) continue;
      while (!d->callbackDone.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::microseconds(50));
      d->posted = false;
    }
  }
  for (int c = 0; c < nChannels_; c++) {
    Channel& ch = channels_[c];
    for (Direction* d : {&ch.send, &ch.recv}) {
      if (d->mhandle != nullptr) net_->deregMr(d->comm, d->mhandle);
      if (d->llMhandle != nullptr) net_->deregMr(d->comm, d->llMhandle);
      d->mhandle = d->llMhandle = nullptr;
    }
    if (ch.send.comm != nullptr) net_->closeSend(ch.send.comm);
    else if (!peerHandles_.empty()) netAbandonConnect(net_, peerHandles_.data() + (size_t)c * kHandleBytes);
    if (ch.recv.comm != nullptr) net_->closeRecv(ch.recv.comm);
    if (ch.listenComm != nullptr) net_->closeListen(ch.listenComm);
    ch.send.comm = ch.recv.comm = ch.listenComm = nullptr;
  }
  channels_.reset();   // conn FIFOs
  proxy_.release();
  recvProxy_.release();
  started_ = false;
}

}  // namespace uniccl
