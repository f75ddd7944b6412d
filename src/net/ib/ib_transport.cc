// The IB table entries: devices, listen/connect/accept state machines, the
// FIFO data path, iflush. See ib_transport.h for the protocol.
#include "net/ib/ib_transport.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"
#include "common/util/socket.h"
#include "net/ib/ib_handshake.h"
#include "net/ib/ib_mr.h"
#include "net/listener_guard.h"
#include "net/net.h"

namespace uniccl {
namespace ib {
namespace {

constexpr int kMaxRequests = NCCL_NET_MAX_REQUESTS;
constexpr int kFifoDepth = NCCL_NET_MAX_REQUESTS;  // one entry per receive in flight
constexpr int kCqEntries = 4 * kMaxRequests;      // recv: FIFO write + receive + flush per request
constexpr int kPollBatch = 16;

// ------------------------------------------------------------------ state
struct Global {
  std::mutex mutex;
  Verbs* verbs = nullptr;
  bool initialized = false;
  std::vector<IbDevice> devices;
  SocketAddress oobAddr = emptySocketAddress();
  QpParams qp;
  bool gdr = false;
  bool flush = true;
};

Global& global() {
  static Global* g = new Global();  // never destroyed: comms may close at exit
  return *g;
}

bool getDevice(int dev, IbDevice* out, SocketAddress* oob = nullptr, QpParams* qp = nullptr, bool* flush = nullptr) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  if (dev < 0 || dev >= (int)g.devices.size()) return false;
  *out = g.devices[dev];
  if (oob) *oob = g.oobAddr;
  if (qp) *qp = g.qp;
  if (flush) *flush = g.gdr && g.flush;
  return true;
}

ncclResult_t badDevice(int dev) {
  WARN("NET/IB: device %d does not exist (call init first; devices() says how many there are; NCCL_IB_HCA and "
       "NCCL_IB_DISABLE select them)",
       dev);
  return ncclInvalidArgument;
}

// --------------------------------------------------------------- comms
// An entry of the sender's FIFO, written by the receiver's RDMA write.
struct FifoElem {
  uint64_t addr;
  uint32_t rkey;
  int32_t size;
  int32_t tag;
  uint32_t pad;
  uint64_t idx;  // message index + 1; written last, read first
};
static_assert(sizeof(FifoElem) == 32, "FIFO entries travel by RDMA");

enum class ReqKind : uint8_t { kSend, kRecv, kFlush };

struct Comm;

struct Request {
  Comm* comm = nullptr;
  bool used = false;
  ReqKind kind = ReqKind::kSend;
  int events = 0;  // completions still due
  int size = 0;    // posted size (receive: capacity)
  int actualSize = 0;
};

struct Comm {
  bool isSend = false;
  IbDevice dev;  // holds the device context (PD) alive: declared before every verbs object
  std::string peer;
  CqPtr cq;  // before the QPs: destroyed after them
  QpPtr qp;
  Request reqs[kMaxRequests];
  uint64_t seq = 0;  // next message index
  ncclResult_t error = ncclSuccess;
  std::string errorText;
  bool errorReported = false;

  // Sender: the FIFO the receiver writes into.
  alignas(64) FifoElem fifo[kFifoDepth] = {};
  MrPtr fifoMr;
  // Receiver: the entries it writes (the RDMA source) and where they go.
  alignas(64) FifoElem elems[kFifoDepth] = {};
  MrPtr elemsMr;
  MrKeys elemsKeys;
  uint64_t remoteFifoAddr = 0;
  uint32_t remoteFifoRkey = 0;
  // Receiver with GPUDirect: the loopback QP that flushes by RDMA read.
  QpPtr flushQp;
  alignas(64) char flushBuf[64] = {};
  MrPtr flushMr;
  MrKeys flushKeys;

  Verbs* verbs() const { return dev.context->verbs; }

  ncclResult_t fail(ncclResult_t res, const std::string& text) {
    if (error == ncclSuccess) {
      error = res;
      errorText = text;
    }
    return check();
  }
  ncclResult_t check() {
    if (error == ncclSuccess) return ncclSuccess;
    if (!errorReported) {
      errorReported = true;
      WARN("NET/IB: %s", errorText.c_str());
    }
    return error;
  }
};

const char* kindName(ReqKind k) {
  switch (k) {
    case ReqKind::kSend: return "send (RDMA write with immediate)";
    case ReqKind::kRecv: return "receive";
    default: return "flush (RDMA read)";
  }
}

// Reaps completions; each one belongs to a request (wr_id = its index).
ncclResult_t progress(Comm* comm) {
  UCHECK(comm->check());
  Wc wcs[kPollBatch];
  for (;;) {
    int n = comm->verbs()->pollCq(comm->cq.get(), kPollBatch, wcs);
    if (n < 0) return comm->fail(ncclSystemError, "ibv_poll_cq failed on " + comm->dev.name);
    for (int i = 0; i < n; i++) {
      const Wc& wc = wcs[i];
      if (wc.wrId >= (uint64_t)kMaxRequests || !comm->reqs[wc.wrId].used) {
        return comm->fail(ncclInternalError, "completion for unknown request " + std::to_string(wc.wrId) + " on " +
                                                 comm->dev.name);
      }
      Request& r = comm->reqs[wc.wrId];
      if (wc.status != kWcSuccess) {
        char text[512];
        snprintf(text, sizeof(text),
                 "%s %s %s failed on %s:%d: completion status %s (%d), vendor error %u, opcode %d (check the "
                 "link to the peer, NCCL_IB_GID_INDEX / NCCL_IB_TC / NCCL_IB_SL, and NCCL_IB_TIMEOUT / "
                 "NCCL_IB_RETRY_CNT)",
                 kindName(r.kind), comm->isSend ? "to" : "from", comm->peer.c_str(), comm->dev.name.c_str(),
                 comm->dev.port, comm->verbs()->wcStatusString(wc.status), wc.status, wc.vendorErr,
                 (int)wc.opcode);
        return comm->fail(ncclRemoteError, text);
      }
      if (wc.opcode == WcOpcode::kRecvRdmaWithImm) {
        if (r.kind != ReqKind::kRecv || (int64_t)wc.immData > (int64_t)r.size) {
          return comm->fail(ncclInternalError, "received " + std::to_string(wc.immData) + " bytes from " +
                                                   comm->peer + " into a receive of " + std::to_string(r.size) +
                                                   " bytes");
        }
        r.actualSize = (int)wc.immData;
      }
      r.events--;
    }
    if (n < kPollBatch) return ncclSuccess;
  }
}

Request* freeRequest(Comm* comm) {
  for (int i = 0; i < kMaxRequests; i++)
    if (!comm->reqs[i].used) return &comm->reqs[i];
  return nullptr;
}

uint64_t indexOf(Comm* comm, Request* r) { return (uint64_t)(r - comm->reqs); }

ncclResult_t createCq(const IbDevice& dev, CqPtr* out) {
  Cq* raw = nullptr;
  if (int err = dev.context->verbs->createCq(dev.context->ctx.get(), kCqEntries, &raw)) {
    WARN("NET/IB: ibv_create_cq on %s failed: %s", dev.name.c_str(), strerror(err));
    return ncclSystemError;
  }
  *out = own<CqPtr>(dev.context->verbs, raw);
  return ncclSuccess;
}

ncclResult_t regLocal(const IbDevice& dev, void* p, size_t n, int access, MrPtr* out, MrKeys* keys,
                      const char* what) {
  Mr* raw = nullptr;
  if (int err = dev.context->verbs->regMr(dev.context->pd.get(), p, n, access, &raw, keys)) {
    WARN("NET/IB: registering the %s on %s failed: %s (check `ulimit -l`)", what, dev.name.c_str(), strerror(err));
    return ncclSystemError;
  }
  *out = own<MrPtr>(dev.context->verbs, raw);
  return ncclSuccess;
}

std::unique_ptr<Comm> newComm(bool isSend, const IbDevice& dev, const std::string& peer) {
  auto c = std::make_unique<Comm>();
  c->isSend = isSend;
  c->dev = dev;
  c->peer = peer;
  return c;
}

// ------------------------------------------------------- listen / accept
// A connection accepted but not yet returned by accept(). Until its proof of
// the key checks out it is a socket and a fixed-size record; the verbs objects
// (comm) exist only for a connection that proved the key.
struct AcceptStage {
  Socket sock;
  Opening opening{};
  size_t got = 0;
  bool proven = false;
  bool replied = false;
  uint8_t ready = 0;
  size_t readyGot = 0;
  Deadline deadline;
  std::unique_ptr<Comm> comm;
};

struct ListenComm {
  int dev = 0;
  ListenerSecret secret;
  Socket listener;
  std::vector<std::unique_ptr<AcceptStage>> stages;  // in arrival order
  std::deque<std::unique_ptr<Comm>> accepted;        // ready, not returned by accept() yet
  RefusalLog refusals{"IB"};
  ~ListenComm() { refusals.summary(listener.address()); }
};

// Builds the receiving end once the connector's proof and ConnInfo are in, and replies.
ncclResult_t acceptBuild(ListenComm* lc, AcceptStage* st) {
  IbDevice dev;
  QpParams qpp;
  bool flush = false;
  if (!getDevice(lc->dev, &dev, nullptr, &qpp, &flush)) return badDevice(lc->dev);
  auto comm = newComm(false, dev, st->sock.address().toString());
  UCHECK(createCq(dev, &comm->cq));
  uint32_t qpn = 0;
  UCHECK(createRcQp(dev, qpp, comm->cq.get(), kMaxRequests + 1, kMaxRequests + 1, kAccessRemoteWrite, &comm->qp,
                    &qpn));
  std::string what = "connection from " + comm->peer;
  UCHECK(connectRcQp(dev, qpp, comm->qp.get(), endpointOf(st->opening.info), what.c_str()));
  UCHECK(regLocal(dev, comm->elems, sizeof(comm->elems), kAccessLocalWrite, &comm->elemsMr, &comm->elemsKeys,
                  "FIFO source"));
  comm->remoteFifoAddr = st->opening.info.fifoAddr;
  comm->remoteFifoRkey = st->opening.info.fifoRkey;
  if (flush) {
    uint32_t fqpn = 0;
    UCHECK(createRcQp(dev, qpp, comm->cq.get(), kMaxRequests + 1, 1, kAccessRemoteRead, &comm->flushQp, &fqpn));
    UCHECK(connectRcQp(dev, qpp, comm->flushQp.get(), localEndpoint(dev, fqpn), "flush QP (loopback)"));
    UCHECK(regLocal(dev, comm->flushBuf, sizeof(comm->flushBuf), kAccessLocalWrite, &comm->flushMr,
                    &comm->flushKeys, "flush buffer"));
  }
  Reply reply;
  reply.confirm = makeConfirm(lc->secret.key, kAuthContext, lc->secret.challenge, st->opening.response);
  reply.info = makeConnInfo(localEndpoint(dev, qpn), 0, 0);
  // A fresh socket's buffer takes these bytes at once: the deadline only bounds a peer that never reads.
  UCHECK(st->sock.sendAll(&reply, sizeof(reply), st->deadline));
  st->comm = std::move(comm);
  st->replied = true;
  return ncclSuccess;
}

// One step of one pending connection (acceptPending's step). Before its
// proof of the key, whatever the peer does (close, garbage) drops it quietly,
// and silence is dropped by acceptPending at the deadline; after, a failure
// is the real peer's and is returned as an error, and so is not finishing
// within the deadline.
ncclResult_t acceptStep(ListenComm* lc, AcceptStage* st, PendingStep* out) {
  *out = PendingStep::kWait;
  const SocketAddress& peer = st->sock.address();
  const SocketAddress& here = lc->listener.address();
  if (!st->proven) {
    int err = 0;
    ssize_t n = st->sock.tryRecv(reinterpret_cast<char*>(&st->opening) + st->got, sizeof(Opening) - st->got, &err);
    if (n < 0) {
      lc->refusals.note(Refusal::kClosed, peer, here);
      *out = PendingStep::kDropped;
      return ncclSuccess;
    }
    st->got += (size_t)n;
    if (st->got < sizeof(Opening)) return ncclSuccess;
    if (!checkResponse(lc->secret.key, kAuthContext, lc->secret.challenge, st->opening.response)) {
      lc->refusals.note(Refusal::kBadProof, peer, here);
      *out = PendingStep::kDropped;
      return ncclSuccess;
    }
    st->proven = true;
    std::string why;
    if (!checkConnInfo(st->opening.info, &why)) {
      WARN("NET/IB: rejected a connection from %s: %s", peer.toString().c_str(), why.c_str());
      *out = PendingStep::kDropped;
      return ncclSuccess;
    }
  }
  if (!st->replied) UCHECK(acceptBuild(lc, st));
  UCHECK(receiveSome(st->sock, &st->ready, 1, &st->readyGot, "accept (waiting for the peer's QP)"));
  if (st->readyGot == 1) {
    INFO(kSubsysNet, "NET/IB: accepted %s on %s:%d", st->comm->peer.c_str(), st->comm->dev.name.c_str(),
         st->comm->dev.port);
    lc->accepted.push_back(std::move(st->comm));
    *out = PendingStep::kDone;
    return ncclSuccess;
  }
  if (Clock::now() > st->deadline) {
    WARN("NET/IB: a peer (%s) began connecting to %s but did not finish within %lld ms "
         "(UNICCL_NET_CONNECT_TIMEOUT_MS sets the limit)",
         peer.toString().c_str(), here.toString().c_str(), (long long)netConnectTimeoutMs());
    return ncclRemoteError;
  }
  return ncclSuccess;
}

// --------------------------------------------------------------- connect
struct ConnectStage {
  Socket sock;
  std::unique_ptr<Comm> comm;
  ListenerSecret secret;
  AuthResponse response{};  // what we opened with: the listener's proof answers it
  Reply reply{};
  size_t got = 0;
  Deadline deadline;
};

ncclResult_t connectStart(int dev, IbHandle* h, ConnectStage* st) {
  IbDevice d;
  QpParams qpp;
  if (!getDevice(dev, &d, nullptr, &qpp)) return badDevice(dev);
  st->secret = h->secret;
  st->deadline = deadlineAfterMs(netConnectTimeoutMs());
  // The listener exists (the handle came from it): the kernel completes this
  // at once, or refuses it at once when the listener's process is gone.
  UCHECK(st->sock.connectToExisting(h->addr, st->deadline));
  auto comm = newComm(true, d, h->addr.toString());
  UCHECK(createCq(d, &comm->cq));
  uint32_t qpn = 0;
  UCHECK(createRcQp(d, qpp, comm->cq.get(), kMaxRequests + 1, 1, kAccessRemoteWrite, &comm->qp, &qpn));
  MrKeys keys;
  UCHECK(regLocal(d, comm->fifo, sizeof(comm->fifo), kAccessLocalWrite | kAccessRemoteWrite, &comm->fifoMr, &keys,
                  "FIFO"));
  Opening opening;
  if (!makeResponse(st->secret.key, kAuthContext, st->secret.challenge, &opening.response)) {
    WARN("NET/IB: the connect handle holds no listener challenge (was it written by an IB listen() of this uniccl "
         "version?)");
    return ncclInvalidArgument;
  }
  st->response = opening.response;
  opening.info = makeConnInfo(localEndpoint(d, qpn), (uint64_t)(uintptr_t)comm->fifo, keys.rkey);
  UCHECK(st->sock.sendAll(&opening, sizeof(opening), st->deadline));
  st->comm = std::move(comm);
  return ncclSuccess;
}

ncclResult_t connectStep(ConnectStage* st, bool* done) {
  *done = false;
  UCHECK(receiveSome(st->sock, &st->reply, sizeof(Reply), &st->got, "connect"));
  if (st->got < sizeof(Reply)) return ncclSuccess;
  if (!checkConfirm(st->secret.key, kAuthContext, st->secret.challenge, st->response, st->reply.confirm)) {
    WARN("NET/IB: the listener at %s does not prove the handle's key: refusing to connect to it",
         st->sock.address().toString().c_str());
    return ncclRemoteError;
  }
  std::string why;
  if (!checkConnInfo(st->reply.info, &why)) {
    WARN("NET/IB: the listener at %s answered with a bad handshake: %s", st->sock.address().toString().c_str(),
         why.c_str());
    return ncclRemoteError;
  }
  QpParams qpp;
  {
    std::lock_guard<std::mutex> lock(global().mutex);
    qpp = global().qp;
  }
  std::string what = "connection to " + st->comm->peer;
  UCHECK(connectRcQp(st->comm->dev, qpp, st->comm->qp.get(), endpointOf(st->reply.info), what.c_str()));
  uint8_t ready = 1;
  UCHECK(st->sock.sendAll(&ready, 1, st->deadline));
  *done = true;
  return ncclSuccess;
}

// ---------------------------------------------------------- table entries
ncclResult_t ibInit(ncclDebugLogger_t) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  if (g.initialized) return ncclSuccess;
  if (g.verbs == nullptr) {
    WARN("NET/IB: no verbs implementation installed (internal error: ibNetApi installs libibverbs)");
    return ncclInternalError;
  }
  g.devices.clear();
  if (knobInt(Knob::NCCL_IB_DISABLE) != 0) {
    INFO(kSubsysInit | kSubsysNet, "NET/IB: disabled by NCCL_IB_DISABLE");
    g.initialized = true;
    return ncclSuccess;
  }
  DiscoveryOptions opts;
  UCHECK(discoveryOptionsFromEnv(&opts));
  std::vector<IbDevice> devs;
  UCHECK(discoverDevices(g.verbs, opts, &devs));
  if (!devs.empty()) {
    std::vector<std::pair<std::string, SocketAddress>> ifs;
    if (findInterfaces(&ifs, 1) != ncclSuccess) {
      WARN("NET/IB: found %zu RDMA ports but no network interface for the connection handshake "
           "(check NCCL_SOCKET_IFNAME)",
           devs.size());
      return ncclSystemError;
    }
    g.oobAddr = ifs[0].second;
  }
  g.qp = qpParamsFromEnv();
  g.gdr = knobInt(Knob::UNICCL_IB_GDR) != 0;
  g.flush = knobInt(Knob::NCCL_GDR_FLUSH_DISABLE) == 0;
  g.devices = std::move(devs);
  g.initialized = true;
  INFO(kSubsysInit | kSubsysNet, "NET/IB: %zu device(s)%s", g.devices.size(),
       g.gdr ? ", GPUDirect RDMA enabled (UNICCL_IB_GDR)" : ", host memory (GPU data staged by the proxy)");
  return ncclSuccess;
}

ncclResult_t ibDevices(int* ndev) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  *ndev = (int)g.devices.size();
  return ncclSuccess;
}

ncclResult_t ibGetProperties(int dev, ncclNetProperties_v8_t* props) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  if (dev < 0 || dev >= (int)g.devices.size()) {
    WARN("NET/IB: device %d does not exist (%zu devices)", dev, g.devices.size());
    return ncclInvalidArgument;
  }
  const IbDevice& d = g.devices[dev];  // never changes once found
  memset(props, 0, sizeof(*props));
  props->name = const_cast<char*>(d.name.c_str());
  props->pciPath = d.pciPath.empty() ? nullptr : const_cast<char*>(d.pciPath.c_str());
  props->guid = d.context->attr.nodeGuid;
  props->ptrSupport = NCCL_PTR_HOST;
  if (g.gdr) {
    props->ptrSupport |= NCCL_PTR_CUDA;
    if (g.verbs->hasDmabuf()) props->ptrSupport |= NCCL_PTR_DMABUF;
  }
  props->regIsGlobal = 0;
  props->speed = d.speedMbps;
  props->port = d.port;
  props->latency = 0;
  props->maxComms = d.context->attr.maxQp > 0 ? d.context->attr.maxQp : 65536;
  props->maxRecvs = 1;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  return ncclSuccess;
}

ncclResult_t ibListen(int dev, void* opaqueHandle, void** listenComm) {
  *listenComm = nullptr;
  IbDevice d;
  SocketAddress oob = emptySocketAddress();
  if (!getDevice(dev, &d, &oob)) return badDevice(dev);
  auto lc = std::make_unique<ListenComm>();
  lc->dev = dev;
  UCHECK(newListenerSecret(&lc->secret));
  UCHECK(lc->listener.listen(oob));
  memset(opaqueHandle, 0, NCCL_NET_HANDLE_MAXSIZE);
  IbHandle* h = static_cast<IbHandle*>(opaqueHandle);
  h->addr = lc->listener.address();
  h->secret = lc->secret;
  h->stage = nullptr;
  INFO(kSubsysNet, "NET/IB: listening on %s for %s:%d", h->addr.toString().c_str(), d.name.c_str(), d.port);
  *listenComm = lc.release();
  return ncclSuccess;
}

ncclResult_t ibConnect(int dev, void* opaqueHandle, void** sendComm, ncclNetDeviceHandle_v8_t** sendDevComm) {
  *sendComm = nullptr;
  if (sendDevComm) *sendDevComm = nullptr;
  IbHandle* h = static_cast<IbHandle*>(opaqueHandle);
  ConnectStage* st = static_cast<ConnectStage*>(h->stage);
  ncclResult_t res = ncclSuccess;
  bool done = false;
  if (st == nullptr) {
    if (!h->addr.valid()) {
      WARN("NET/IB: connect handle holds no valid address (was it written by an IB listen()?)");
      return ncclInvalidArgument;
    }
    st = new ConnectStage();
    h->stage = st;
    res = connectStart(dev, h, st);
  }
  if (res == ncclSuccess) res = connectStep(st, &done);
  if (res == ncclSuccess && !done) {
    if (Clock::now() <= st->deadline) return ncclSuccess;  // in progress
    WARN("NET/IB: connect to %s: no answer within %lld ms (UNICCL_NET_CONNECT_TIMEOUT_MS sets the limit)",
         st->sock.address().toString().c_str(), (long long)netConnectTimeoutMs());
    res = ncclRemoteError;
  }
  if (res == ncclSuccess) {
    INFO(kSubsysNet, "NET/IB: connected to %s on %s:%d", st->comm->peer.c_str(), st->comm->dev.name.c_str(),
         st->comm->dev.port);
    *sendComm = st->comm.release();
  }
  delete st;  // closes the handshake socket; a failed comm's verbs objects go with it
  h->stage = nullptr;
  return res;
}

ncclResult_t ibAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t** recvDevComm) {
  *recvComm = nullptr;
  if (recvDevComm) *recvDevComm = nullptr;
  ListenComm* lc = static_cast<ListenComm*>(listenComm);
  UCHECK(acceptPending(lc->listener, lc->stages, lc->refusals,
                       [lc](AcceptStage& st, PendingStep* out) { return acceptStep(lc, &st, out); }));
  if (lc->accepted.empty()) return ncclSuccess;
  *recvComm = lc->accepted.front().release();
  lc->accepted.pop_front();
  return ncclSuccess;
}

ncclResult_t ibRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  *mhandle = nullptr;
  if (comm == nullptr) {
    WARN("NET/IB: regMr needs a send or receive comm");
    return ncclInvalidArgument;
  }
  bool gdr;
  {
    std::lock_guard<std::mutex> lock(global().mutex);
    gdr = global().gdr;
  }
  if (type != NCCL_PTR_HOST && !(type == NCCL_PTR_CUDA && gdr)) {
    WARN("NET/IB: regMr of memory type %d: only host memory (NCCL_PTR_HOST) is supported here%s", type,
         type == NCCL_PTR_CUDA ? " (GPU memory needs UNICCL_IB_GDR=1 and a peer-memory module)" : "");
    return ncclInternalError;
  }
  std::unique_ptr<MemHandle> mh;
  UCHECK(registerMemory(static_cast<Comm*>(comm)->dev.context, data, size, type == NCCL_PTR_CUDA, &mh));
  *mhandle = mh.release();
  return ncclSuccess;
}

ncclResult_t ibRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle) {
  *mhandle = nullptr;
  if (comm == nullptr) {
    WARN("NET/IB: regMrDmaBuf needs a send or receive comm");
    return ncclInvalidArgument;
  }
  if (type == NCCL_PTR_HOST) return ibRegMr(comm, data, size, type, mhandle);
  bool gdr;
  {
    std::lock_guard<std::mutex> lock(global().mutex);
    gdr = global().gdr;
  }
  if (!gdr) {
    WARN("NET/IB: regMrDmaBuf of GPU memory: GPUDirect RDMA is off (ptrSupport is NCCL_PTR_HOST; UNICCL_IB_GDR=1 "
         "enables it)");
    return ncclInternalError;
  }
  std::unique_ptr<MemHandle> mh;
  UCHECK(registerDmabuf(static_cast<Comm*>(comm)->dev.context, data, size, offset, fd, &mh));
  *mhandle = mh.release();
  return ncclSuccess;
}

ncclResult_t ibDeregMr(void*, void* mhandle) {
  delete static_cast<MemHandle*>(mhandle);
  return ncclSuccess;
}

ncclResult_t checkBuffer(const char* op, void* data, int size, void* mhandle) {
  if (size < 0) {
    WARN("NET/IB: %s of negative size %d", op, size);
    return ncclInvalidArgument;
  }
  if (size == 0) return ncclSuccess;
  if (mhandle == nullptr) {
    WARN("NET/IB: %s of %d bytes at %p without a memory handle: buffers must be registered with regMr", op, size,
         data);
    return ncclInvalidArgument;
  }
  const MemHandle* mh = static_cast<const MemHandle*>(mhandle);
  if (!inRegion(*mh, data, (size_t)size)) {
    WARN("NET/IB: %s buffer %p (+%d bytes) lies outside its registered region %p (+%zu bytes)", op, data, size,
         (void*)mh->base, mh->size);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t ibIsend(void* sendComm, void* data, int size, int tag, void* mhandle, void** request) {
  *request = nullptr;
  Comm* comm = static_cast<Comm*>(sendComm);
  UCHECK(checkBuffer("isend", data, size, mhandle));
  UCHECK(progress(comm));  // lands the receiver's FIFO writes (and reaps completions)
  Request* r = freeRequest(comm);
  if (r == nullptr) return ncclSuccess;
  FifoElem& slot = comm->fifo[comm->seq % kFifoDepth];
  if (__atomic_load_n(&slot.idx, __ATOMIC_ACQUIRE) != comm->seq + 1) return ncclSuccess;  // receiver not ready
  FifoElem e;
  e.addr = slot.addr;
  e.rkey = slot.rkey;
  e.size = slot.size;
  e.tag = slot.tag;
  if (e.tag != tag) {
    return comm->fail(ncclInvalidUsage, "message " + std::to_string(comm->seq) + " to " + comm->peer +
                                            " has tag " + std::to_string(tag) + " but the receive expects tag " +
                                            std::to_string(e.tag) + " (sends and receives must match in order)");
  }
  if (size > e.size) {
    return comm->fail(ncclInvalidUsage, "message " + std::to_string(comm->seq) + " to " + comm->peer + " of " +
                                            std::to_string(size) + " bytes does not fit the receive of " +
                                            std::to_string(e.size) + " bytes (message truncated)");
  }
  SendWr wr;
  wr.wrId = indexOf(comm, r);
  wr.opcode = WrOpcode::kRdmaWriteWithImm;
  wr.localAddr = (uint64_t)(uintptr_t)data;
  wr.length = (uint32_t)size;
  wr.lkey = size > 0 ? static_cast<MemHandle*>(mhandle)->keys.lkey : 0;
  wr.numSge = size > 0 ? 1 : 0;
  wr.remoteAddr = e.addr;
  wr.rkey = e.rkey;
  wr.immData = (uint32_t)size;
  wr.signaled = true;
  if (int err = comm->verbs()->postSend(comm->qp.get(), wr)) {
    return comm->fail(ncclSystemError, "ibv_post_send (RDMA write of " + std::to_string(size) + " bytes to " +
                                           comm->peer + ") failed: " + strerror(err));
  }
  *r = Request();
  r->comm = comm;
  r->used = true;
  r->kind = ReqKind::kSend;
  r->events = 1;
  r->size = size;
  r->actualSize = size;
  comm->seq++;
  *request = r;
  return ncclSuccess;
}

ncclResult_t ibIrecv(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) {
  *request = nullptr;
  Comm* comm = static_cast<Comm*>(recvComm);
  if (n != 1) {
    WARN("NET/IB: grouped receives (n=%d) are not supported: maxRecvs is 1", n);
    return ncclInternalError;
  }
  UCHECK(checkBuffer("irecv", data[0], sizes[0], mhandles ? mhandles[0] : nullptr));
  UCHECK(progress(comm));
  Request* r = freeRequest(comm);
  if (r == nullptr) return ncclSuccess;
  uint64_t id = indexOf(comm, r);
  RecvWr rwr;
  rwr.wrId = id;  // no scatter list: the data arrives by RDMA write
  if (int err = comm->verbs()->postRecv(comm->qp.get(), rwr)) {
    return comm->fail(ncclSystemError, std::string("ibv_post_recv failed: ") + strerror(err));
  }
  // The slot's previous entry (message seq - depth) was written out before its
  // request completed, and at most depth requests are in flight: it is free.
  size_t slot = comm->seq % kFifoDepth;
  FifoElem& e = comm->elems[slot];
  e.addr = (uint64_t)(uintptr_t)data[0];
  e.rkey = sizes[0] > 0 ? static_cast<MemHandle*>(mhandles[0])->keys.rkey : 0;
  e.size = sizes[0];
  e.tag = tags[0];
  e.pad = 0;
  e.idx = comm->seq + 1;
  SendWr wr;
  wr.wrId = id;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.localAddr = (uint64_t)(uintptr_t)&e;
  wr.length = sizeof(FifoElem);
  wr.lkey = comm->elemsKeys.lkey;
  wr.numSge = 1;
  wr.remoteAddr = comm->remoteFifoAddr + slot * sizeof(FifoElem);
  wr.rkey = comm->remoteFifoRkey;
  wr.signaled = true;
  if (int err = comm->verbs()->postSend(comm->qp.get(), wr)) {
    return comm->fail(ncclSystemError, "ibv_post_send (FIFO entry to " + comm->peer + ") failed: " + strerror(err));
  }
  *r = Request();
  r->comm = comm;
  r->used = true;
  r->kind = ReqKind::kRecv;
  r->events = 2;  // the FIFO write and the receive
  r->size = sizes[0];
  comm->seq++;
  *request = r;
  return ncclSuccess;
}

ncclResult_t ibIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  *request = nullptr;
  Comm* comm = static_cast<Comm*>(recvComm);
  if (n != 1) {
    WARN("NET/IB: iflush of n=%d buffers: maxRecvs is 1", n);
    return ncclInternalError;
  }
  MemHandle* mh = mhandles ? static_cast<MemHandle*>(mhandles[0]) : nullptr;
  // Host memory is coherent once the receive completed; a disabled flush or an
  // empty message needs nothing either (NULL request = done).
  if (mh == nullptr || !mh->gpu || !comm->flushQp || sizes[0] <= 0) return ncclSuccess;
  UCHECK(checkBuffer("iflush", data[0], sizes[0], mh));
  UCHECK(progress(comm));
  Request* r = freeRequest(comm);
  if (r == nullptr) return ncclSuccess;
  SendWr wr;
  wr.wrId = indexOf(comm, r);
  wr.opcode = WrOpcode::kRdmaRead;
  wr.localAddr = (uint64_t)(uintptr_t)comm->flushBuf;
  wr.length = 1;
  wr.lkey = comm->flushKeys.lkey;
  wr.numSge = 1;
  wr.remoteAddr = (uint64_t)(uintptr_t)data[0];
  wr.rkey = mh->keys.rkey;
  wr.signaled = true;
  if (int err = comm->verbs()->postSend(comm->flushQp.get(), wr)) {
    return comm->fail(ncclSystemError, std::string("ibv_post_send (flush read) failed: ") + strerror(err));
  }
  *r = Request();
  r->comm = comm;
  r->used = true;
  r->kind = ReqKind::kFlush;
  r->events = 1;
  *request = r;
  return ncclSuccess;
}

ncclResult_t ibTest(void* request, int* done, int* sizes) {
  if (done == nullptr) {
    WARN("NET/IB: test() needs a place for its done flag");
    return ncclInvalidArgument;
  }
  *done = 0;
  Request* r = static_cast<Request*>(request);
  if (r == nullptr || !r->used) {
    WARN("NET/IB: test() of a request that is not in flight");
    return ncclInvalidArgument;
  }
  UCHECK(progress(r->comm));
  if (r->events > 0) return ncclSuccess;
  *done = 1;
  if (sizes) *sizes = r->actualSize;
  r->used = false;
  return ncclSuccess;
}

ncclResult_t ibClose(void* comm) {
  delete static_cast<Comm*>(comm);  // QPs, then CQ and MRs; the device when it was the last user
  return ncclSuccess;
}

ncclResult_t ibCloseListen(void* listenComm) {
  delete static_cast<ListenComm*>(listenComm);
  return ncclSuccess;
}

const ncclNet_v8_t kIbNet = {
    "IB",
    ibInit,
    ibDevices,
    ibGetProperties,
    ibListen,
    ibConnect,
    ibAccept,
    ibRegMr,
    ibRegMrDmaBuf,
    ibDeregMr,
    ibIsend,
    ibIrecv,
    ibIflush,
    ibTest,
    ibClose,
    ibClose,
    ibCloseListen,
    nullptr,  // getDeviceMr: no device offload
    nullptr,  // irecvConsumed
};

}  // namespace

void installVerbs(Verbs* verbs) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  if (g.verbs == nullptr) g.verbs = verbs;
}

bool verbsInstalled() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  return g.verbs != nullptr;
}

const NetApi* ibNetTable() { return &kIbNet; }

void abandonConnect(void* handle) {
  IbHandle* h = static_cast<IbHandle*>(handle);
  delete static_cast<ConnectStage*>(h->stage);
  h->stage = nullptr;
}

void resetForTesting() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.devices.clear();
  g.initialized = false;
  g.verbs = nullptr;
}

}  // namespace ib
}  // namespace uniccl
