// The proxy: one progress thread per process, shared by every communicator
// that has network peers, that moves conn-FIFO slots over a net plugin
// (ncclNet_v8_t). Send: the producer (kernel) fills a slot and advances the
// FIFO's tail; the proxy isends it, tests it, frees the slot and advances
// head. Receive: the proxy irecvs into a free staging slot, tests it,
// flushes when the bytes landed in GPU memory, and publishes it (size, then
// tail); the consumer (kernel) frees it and advances head.
//
// Ops are posted by their owner and owned by it (NetLink posts one
// persistent op per direction and channel at connect time): posting
// allocates nothing, the thread links them into its lists, and after an op is
// finished (status != kProxyOpPending) the proxy never touches it again.
// See docs/proxy.md.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/proxy/conn_fifo.h"
#include "common/proxy/net_api.h"
#include "uniccl.h"

namespace uniccl {

struct ProxyOp;
class ProfilerContext;

// One network connection as the proxy progresses it. The transport that set
// it up owns it; it must outlive every op posted on it. Ops of one
// connection run one after another in post order, each continuing at the
// step where the previous one ended (like the kernel's persistent step).
struct ProxyConnection {
  const ProxyNet* net = nullptr;
  void* netComm = nullptr;   // the net's sendComm (send ops) or recvComm (recv ops)
  void* mhandle = nullptr;   // regMr of the staging buffer (nullptr if the net needs none)
  ConnFifo* fifo = nullptr;  // host address of the conn FIFO
  char* staging = nullptr;   // host address of kConnSteps * stepBytes staging bytes
  int64_t stepBytes = 0;     // bytes of one staging slot
  bool needFlush = false;    // staging is GPU memory the NIC wrote: iflush before publishing
  // LL slots (optional, host memory): kConnSteps slots of llStepBytes
  // (common/proxy/ll_lines.h). Send: a step whose size has kConnSizeLL
  // leaves from here once its lines are complete. Receive: a message of
  // LL lines of its step is copied here as well. nullptr: Simple only.
  char* llStaging = nullptr;
  int64_t llStepBytes = 0;
  void* llMhandle = nullptr;  // regMr of the LL slots
  const volatile uint32_t* abortFlag = nullptr;  // owner's abort flag; nonzero stops its ops

  // Proxy-thread state; zero when the connection is set up, never written by the owner later.
  uint64_t step = 0;              // next step of this connection
  ProxyOp* current = nullptr;     // the op progressing on it
  ncclResult_t error = ncclSuccess;  // sticky transport error: later ops fail at once
};

enum class ProxyOpKind : uint8_t { kSend = 0, kRecv = 1 };

enum ProxyOpStatus : int {
  kProxyOpIdle = 0,     // never posted
  kProxyOpPending = 1,  // posted, the proxy owns it
  kProxyOpDone = 2,     // all steps done; result == ncclSuccess
  kProxyOpFailed = 3,   // transport or protocol error; result says which
  kProxyOpAborted = 4,  // the abort flag or the proxy's shutdown stopped it; result == ncclRemoteError
};

struct ProxyOp {
  // ---- filled by the poster ----
  ProxyConnection* conn = nullptr;
  ProxyOpKind kind = ProxyOpKind::kSend;
  int tag = 0;
  uint64_t nsteps = 0;   // send: each step sends the size the producer wrote in its slot; recv: a whole slot
  // Called on the proxy thread once the op is finished, after which the
  // proxy no longer touches the op (the callback may free or re-post it; it
  // must not block, nor release the last ProxyRef: that joins this thread).
  void (*onComplete)(void* arg, ncclResult_t result) = nullptr;
  void* onCompleteArg = nullptr;
  // Profiler (optional): ProxyOp / ProxyStep events go to `prof` with
  // `profParent` as the op's parent; channel and peer describe it.
  ProfilerContext* prof = nullptr;
  void* profParent = nullptr;
  int profChannel = -1;
  int profPeer = -1;

  // ---- progress, written by the proxy thread (stable once finished) ----
  // Steps are counted from `base` (the connection's step when the op started).
  // send: posted = slots seen filled, transmitted = isends accepted, done = isends completed + slots freed
  // recv: posted = irecvs accepted, received = irecvs completed, transmitted = published to the
  //       consumer (after flush), done = freed by the consumer
  uint64_t base = 0, posted = 0, received = 0, transmitted = 0, done = 0;
  ncclResult_t result = ncclSuccess;
  std::atomic<int> status{kProxyOpIdle};  // ProxyOpStatus; release-stored by the proxy

  bool finished() const { return status.load(std::memory_order_acquire) > kProxyOpPending; }

  // ---- proxy-internal ----
  void* requests[kConnSteps] = {};
  int sizes[kConnSteps] = {};
  void* profOp = nullptr;                 // the ProxyOp event while the op runs
  void* profSteps[kConnSteps] = {};       // ProxyStep events of the steps in flight
  ProxyOp* next = nullptr;
};

class Proxy;

// A function the progress thread calls on every pass, besides its ops (GIN's
// descriptor queues, device_api/gin.h): returns true when it moved
// something (which restarts the idle back-off). It must not block, nor add
// or remove pollers. Owned by whoever adds it. If poll throws, the thread
// stops calling it and calls fail (optional) with the error once.
struct ProxyPoller {
  bool (*poll)(void* arg) = nullptr;
  void (*fail)(void* arg, ncclResult_t result) = nullptr;
  void* arg = nullptr;
  ProxyPoller* next = nullptr;   // proxy-internal
};

// Which thread of a key's pair an op or poller runs on. Receives have a
// thread of their own (unless UNICCL_PROXY_RECV_THREAD=0): a step that
// arrives while the other thread is in a send system call (3-4 us on
// loopback TCP) is taken at once, not after it, and the two directions of a
// symmetric exchange progress in parallel.
enum class ProxyLane : uint8_t { kMain = 0, kReceive = 1 };

// A reference on a proxy thread: the process's, or a group's own. The first
// acquire starts the thread; the release of the last reference stops and
// joins it (ops still pending then finish as kProxyOpAborted). Move-only RAII.
class ProxyRef {
 public:
  ProxyRef() = default;
  ~ProxyRef() { release(); }
  ProxyRef(const ProxyRef&) = delete;
  ProxyRef& operator=(const ProxyRef&) = delete;
  ProxyRef(ProxyRef&& o) noexcept : p_(o.p_), group_(o.group_), lane_(o.lane_) { o.p_ = nullptr; }
  ProxyRef& operator=(ProxyRef&& o) noexcept;

  // group nullptr: the process's proxy thread, which every communicator's
  // network connections share. Any other key: a thread of its own that the
  // references acquired with the same key share (GIN: a device
  // communicator's links and poller, whose every step waits on a proxy pass,
  // so that it is not behind the process's other connections, and the
  // ranks of one process progress in parallel).
  // kReceive: the key's receive thread, for the receive ops of its
  // connections (the main thread itself when UNICCL_PROXY_RECV_THREAD=0).
  [[nodiscard]] static ncclResult_t acquire(ProxyRef* out, const void* group = nullptr,
                                            ProxyLane lane = ProxyLane::kMain);
  void release();
  explicit operator bool() const { return p_ != nullptr; }

  // Hands `op` to the proxy thread. Validates it; allocates nothing; never
  // blocks on the network. The op must stay alive until finished().
  [[nodiscard]] ncclResult_t post(ProxyOp* op);
  // Makes the thread look at its ops now (e.g. right after raising an abort flag).
  void wake();
  // Adds / removes a poller; once removePoller returns the thread is not in
  // (and never again enters) its poll function.
  [[nodiscard]] ncclResult_t addPoller(ProxyPoller* poller);
  void removePoller(ProxyPoller* poller);

 private:
  Proxy* p_ = nullptr;
  const void* group_ = nullptr;
  ProxyLane lane_ = ProxyLane::kMain;
};

// Diagnostics / tests: references held on the process's proxy threads
// (both lanes) and whether one of them is running.
int proxyRefCount();
bool proxyThreadRunning();

}  // namespace uniccl
