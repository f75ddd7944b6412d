// The "Socket" network: NCCL's net plugin table over TCP.
//
// A connection is one control socket plus nThreads x nSocksPerThread data
// sockets, each data socket served by one helper thread. For every message
// the sender writes {tag, size} on the control socket; both sides then cut the
// message into the same chunks and deal them to the data sockets round-robin
// (a counter that both sides advance identically), so every socket carries its
// chunks in order without per-chunk headers. The caller's thread moves the
// control headers inside isend/irecv/test; helper threads move the chunks.
// Messages up to UNICCL_SOCKET_INLINE_BYTES travel inline after their header
// on the control socket, moved by the caller's thread: no helper wake-up on
// either side (two thread hand-offs per message cost small messages about
// 40 us per AllReduce on loopback). The sender decides and says so in the
// header, so both sides agree whatever their settings. A header and its
// inline payload leave in one system call and arrive in one: the receiver
// reads the control stream ahead into a small buffer.
// Nothing blocks: connect/accept are state machines, test only polls.
// Every socket opens with a proof of the listener's key (listener_guard.h):
// the listener reads nothing else from a socket before that proof, and the
// sender moves no message before the listener has proven the key back.
#include "net/socket_transport.h"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/check.h"
#include "common/util/auth.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"
#include "common/util/socket.h"
#include "net/listener_guard.h"
#include "net/net.h"

namespace uniccl {
namespace {

constexpr int kMaxDevices = 4;
constexpr int kMaxSocks = 64;
constexpr int kMaxThreads = 16;
constexpr int kMaxRequests = NCCL_NET_MAX_REQUESTS;
constexpr size_t kMinChunk = 16 << 10;
constexpr size_t kMaxChunk = 128 << 10;
constexpr int kIdlePollMs = 100;  // how often an idle helper looks at its stop flag
constexpr size_t kReadAheadBytes = 4096;  // control bytes a receive comm reads past what it wanted
constexpr uint32_t kWireVersion = 3;   // 3: sockets open with a proof of the listener's key
constexpr const char* kAuthContext = "net-socket";

// ------------------------------------------------------------------ devices
struct Device {
  std::string name;
  SocketAddress addr;
  std::string pciPath;
  int speedMbps;
};

std::mutex gDevicesMutex;
std::vector<Device> gDevices;

int readSpeedMbps(const std::string& ifname) {
  std::ifstream f("/sys/class/net/" + ifname + "/speed");
  int speed = 0;
  if (f >> speed && speed > 0) return speed;
  return 10000;  // unknown (lo, virtual NICs): NCCL's default guess
}

std::string readPciPath(const std::string& ifname) {
  char buf[PATH_MAX];
  std::string dev = "/sys/class/net/" + ifname + "/device";
  if (realpath(dev.c_str(), buf) == nullptr) return std::string();
  return buf;
}

bool getDevice(int dev, Device* out) {
  std::lock_guard<std::mutex> lock(gDevicesMutex);
  if (dev < 0 || dev >= (int)gDevices.size()) return false;
  *out = gDevices[dev];
  return true;
}

// ------------------------------------------------------------ wire formats
// The handle travels between processes (through the bootstrap); `stage` is
// only meaningful in the process that calls connect() with it (listen()
// writes nullptr).
struct Handle {
  SocketAddress addr;
  uint32_t pad;
  ListenerSecret secret;
  void* stage;
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE, "handle must fit NCCL_NET_HANDLE_MAXSIZE");

// What the connector sends first on every socket of a connection: its answer
// to the listener's challenge, then which socket this is (index 0 = control).
struct Hello {
  uint32_t version;
  int32_t index;
  int32_t nSocks;
  int32_t nThreads;
};
struct Opening {
  AuthResponse response;
  Hello hello;
};
static_assert(sizeof(Opening) == 64, "wire layout");

struct MsgHeader {
  int32_t tag;
  int32_t size;
  int32_t flags;   // kMsgInline: the payload follows on the control socket
  int32_t pad;
};
constexpr int32_t kMsgInline = 1;

size_t inlineLimit() {
  static const size_t limit = (size_t)std::max<int64_t>(0, knobInt(Knob::UNICCL_SOCKET_INLINE_BYTES));
  return limit;
}

// --------------------------------------------------------------- requests
struct Comm;

struct Request {
  Comm* comm = nullptr;
  bool used = false;
  uint64_t seq = 0;
  char* data = nullptr;
  int size = 0;  // posted size (recv: capacity)
  int tag = 0;
  int actualSize = 0;
  bool ctrlDone = false;
  MsgHeader hdr{};
  size_t hdrDone = 0;
  size_t inlineDone = 0;   // payload bytes moved on the control socket (inline messages)
  std::atomic<int> chunksLeft{0};
};

struct Task {
  char* data;
  size_t len;
  size_t done;
  Request* req;
};

struct DataSocket {
  Socket sock;
  std::deque<Task> tasks;  // guarded by the owning helper's mutex
};

struct Helper {
  std::thread thread;
  std::mutex mutex;
  int wakeFd = -1;
  std::vector<int> socks;  // indices into Comm::socks
  ~Helper() {
    if (wakeFd >= 0) ::close(wakeFd);
  }
  void wake() {
    uint64_t one = 1;
    ssize_t rc = ::write(wakeFd, &one, sizeof(one));
    (void)rc;  // eventfd writes only fail when the counter saturates: it is awake then
  }
};

struct MemHandle {
  char* base;
  size_t size;
};

struct Comm {
  bool isSend = false;
  SocketAddress peer = emptySocketAddress();
  Socket ctrl;
  std::vector<std::unique_ptr<DataSocket>> socks;
  std::vector<std::unique_ptr<Helper>> helpers;
  Request reqs[kMaxRequests];
  uint64_t nextSeq = 0;  // seq of the next posted request
  uint64_t ctrlSeq = 0;  // seq of the next request whose header is due
  uint64_t nextSock = 0;
  // Receive comm: control bytes read ahead of the request that wanted them
  // (readControl); [aheadOff, aheadLen) is not consumed yet.
  std::unique_ptr<char[]> ahead;
  size_t aheadOff = 0, aheadLen = 0;
  std::atomic<bool> stop{false};
  std::atomic<int> error{ncclSuccess};
  std::mutex errorMutex;
  std::string errorText;
  bool errorReported = false;
  // Receive comm: the peer closed its side where the header of request
  // `closedAtSeq` was due (between messages: its destroy looks like this).
  // Not an error of the comm: the requests before it still complete with
  // their data; it and later ones fail when tested (INFO, not WARN).
  uint64_t closedAtSeq = UINT64_MAX;
  std::string closedText;
  // Send comm: the listener's proof of the key, one per socket (index 0 =
  // control), read by the caller's thread before the first header moves.
  // Helpers get no task before, so no data leaves for an unproven listener.
  struct ListenerProof {
    AuthResponse response;  // what we sent; the proof answers it
    AuthConfirm confirm;
    size_t got = 0;
  };
  std::vector<ListenerProof> proofs;  // empty once every proof checked out
  ListenerSecret secret;

  ~Comm() { shutdown(); }

  void shutdown() {
    stop.store(true, std::memory_order_release);
    for (auto& h : helpers) h->wake();
    for (auto& h : helpers)
      if (h->thread.joinable()) h->thread.join();
  }

  // First failure wins; later ones are consequences of it.
  void fail(ncclResult_t res, const std::string& text) {
    std::lock_guard<std::mutex> lock(errorMutex);
    if (error.load(std::memory_order_relaxed) != ncclSuccess) return;
    errorText = text;
    error.store(res, std::memory_order_release);
  }

  // The peer closed between messages: reported once, at INFO.
  ncclResult_t closedError() {
    std::lock_guard<std::mutex> lock(errorMutex);
    if (!errorReported) {
      errorReported = true;
      INFO(kSubsysNet, "NET/Socket: %s", closedText.c_str());
    }
    return ncclRemoteError;
  }

  // Reports a failure in the caller's thread (so ncclGetLastError sees it), once.
  ncclResult_t checkError() {
    int res = error.load(std::memory_order_acquire);
    if (res == ncclSuccess) return ncclSuccess;
    std::lock_guard<std::mutex> lock(errorMutex);
    if (!errorReported) {
      errorReported = true;
      WARN("NET/Socket: %s", errorText.c_str());
    }
    return (ncclResult_t)res;
  }
};

std::string describeIoError(const Comm* comm, int err, bool sending) {
  std::string peer = comm->peer.toString();
  if (!sending && err == 0) return "connection with " + peer + " closed by the peer during a transfer";
  return std::string(sending ? "send to " : "recv from ") + peer + " failed: " + strerror(err);
}

ncclResult_t ioErrorCode(int err) {
  return err == 0 || err == ECONNRESET || err == EPIPE || err == ETIMEDOUT ? ncclRemoteError : ncclSystemError;
}

// Moves the chunks of the sockets of one helper until the comm stops or fails.
void helperMain(Comm* comm, Helper* helper) {
  std::vector<pollfd> fds;
  while (!comm->stop.load(std::memory_order_acquire)) {
    bool progressed = false;
    fds.clear();
    fds.push_back({helper->wakeFd, POLLIN, 0});
    for (int idx : helper->socks) {
      DataSocket& ds = *comm->socks[idx];
      Task* task = nullptr;
      {
        std::lock_guard<std::mutex> lock(helper->mutex);
        if (!ds.tasks.empty()) task = &ds.tasks.front();  // deque: stable while others are pushed
      }
      if (task == nullptr) continue;
      int err = 0;
      ssize_t n = comm->isSend ? ds.sock.trySend(task->data + task->done, task->len - task->done, &err)
                               : ds.sock.tryRecv(task->data + task->done, task->len - task->done, &err);
      if (n < 0) {
        comm->fail(ioErrorCode(err), describeIoError(comm, err, comm->isSend));
        return;
      }
      if (n > 0) {
        progressed = true;
        task->done += (size_t)n;
      }
      if (task->done == task->len) {
        Request* req = task->req;
        {
          std::lock_guard<std::mutex> lock(helper->mutex);
          ds.tasks.pop_front();
        }
        req->chunksLeft.fetch_sub(1, std::memory_order_acq_rel);
      } else {
        fds.push_back({ds.sock.fd(), (short)(comm->isSend ? POLLOUT : POLLIN), 0});
      }
    }
    if (progressed) continue;
    if (poll(fds.data(), fds.size(), kIdlePollMs) < 0 && errno != EINTR) {
      comm->fail(ncclSystemError, std::string("poll failed: ") + strerror(errno));
      return;
    }
    if (fds[0].revents & POLLIN) {
      uint64_t count;
      ssize_t rc = ::read(helper->wakeFd, &count, sizeof(count));
      (void)rc;
    }
  }
}

ncclResult_t startHelpers(Comm* comm, int nThreads) {
  for (int t = 0; t < nThreads; t++) {
    auto h = std::make_unique<Helper>();
    h->wakeFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (h->wakeFd < 0) {
      WARN("NET/Socket: eventfd failed: %s", strerror(errno));
      return ncclSystemError;
    }
    for (int s = t; s < (int)comm->socks.size(); s += nThreads) h->socks.push_back(s);
    comm->helpers.push_back(std::move(h));
  }
  for (auto& h : comm->helpers) {
    try {
      h->thread = std::thread(helperMain, comm, h.get());
    } catch (const std::system_error& e) {
      WARN("NET/Socket: cannot start a helper thread: %s", e.what());
      return ncclSystemError;
    }
  }
  return ncclSuccess;
}

// Both sides cut a message the same way: chunks spread over every socket,
// between kMinChunk and kMaxChunk bytes.
size_t chunkBytes(size_t size, size_t nSocks) {
  size_t even = (size + nSocks - 1) / nSocks;
  return std::min(kMaxChunk, std::max(kMinChunk, even));
}

void postChunks(Comm* comm, Request* req, size_t size) {
  size_t chunk = chunkBytes(size, comm->socks.size());
  int nChunks = (int)((size + chunk - 1) / chunk);
  req->chunksLeft.store(nChunks, std::memory_order_release);
  std::vector<bool> touched(comm->helpers.size(), false);
  for (int c = 0; c < nChunks; c++) {
    size_t off = (size_t)c * chunk;
    int s = (int)(comm->nextSock++ % comm->socks.size());
    int h = s % (int)comm->helpers.size();
    {
      std::lock_guard<std::mutex> lock(comm->helpers[h]->mutex);
      comm->socks[s]->tasks.push_back({req->data + off, std::min(chunk, size - off), 0, req});
    }
    touched[h] = true;
  }
  for (size_t h = 0; h < touched.size(); h++)
    if (touched[h]) comm->helpers[h]->wake();
}

Request* findSeq(Comm* comm, uint64_t seq) {
  for (Request& r : comm->reqs)
    if (r.used && r.seq == seq) return &r;
  return nullptr;
}

// Receive comm: reads up to len bytes of the control stream into p. The
// stream is read ahead: one read takes the wanted bytes and what follows
// them (a header's inline payload, the next headers) into the comm's
// read-ahead buffer, which later calls drain first (a header and its
// payload then cost one system call, not two).
ssize_t readControl(Comm* comm, char* p, size_t len, int* err) {
  if (comm->aheadOff < comm->aheadLen) {
    const size_t n = std::min(len, comm->aheadLen - comm->aheadOff);
    memcpy(p, comm->ahead.get() + comm->aheadOff, n);
    comm->aheadOff += n;
    if (comm->aheadOff == comm->aheadLen) comm->aheadOff = comm->aheadLen = 0;
    return (ssize_t)n;
  }
  if (!comm->ahead) comm->ahead = std::make_unique<char[]>(kReadAheadBytes);
  iovec iov[2] = {{p, len}, {comm->ahead.get(), kReadAheadBytes}};
  const ssize_t n = comm->ctrl.tryRecvv(iov, 2, err);
  if (n <= (ssize_t)len) return n;
  comm->aheadLen = (size_t)n - len;
  return (ssize_t)len;
}

// Moves what is left of [p, p + len) on the control socket in the comm's
// direction without blocking: bytes moved, 0 if it would block, < 0 on
// end of stream or error (*err: errno, 0 for end of stream).
ssize_t moveOnControl(Comm* comm, char* p, size_t len, int* err) {
  *err = 0;
  return comm->isSend ? comm->ctrl.trySend(p, len, err) : readControl(comm, p, len, err);
}

// Send comm, inline message: what is left of the header and its payload in
// one call, so that a small message is one segment (on loopback, a second
// send costs a second trip through the network stack: 10 against 21 us
// one way for 8 bytes on a 2-core VM). 1: all sent; 0: would block; < 0 on
// error (*err: errno).
int sendInline(Comm* comm, Request* req, int* err) {
  *err = 0;
  char* hdr = reinterpret_cast<char*>(&req->hdr);
  const size_t size = (size_t)req->size;
  while (req->hdrDone < sizeof(MsgHeader) || req->inlineDone < size) {
    iovec iov[2];
    int n = 0;
    if (req->hdrDone < sizeof(MsgHeader)) iov[n++] = {hdr + req->hdrDone, sizeof(MsgHeader) - req->hdrDone};
    if (req->inlineDone < size) iov[n++] = {req->data + req->inlineDone, size - req->inlineDone};
    const ssize_t moved = comm->ctrl.trySendv(iov, n, err);
    if (moved <= 0) return (int)moved;
    const size_t h = std::min((size_t)moved, sizeof(MsgHeader) - req->hdrDone);
    req->hdrDone += h;
    req->inlineDone += (size_t)moved - h;
  }
  return 1;
}

// Send comm: reads and checks the listener's proofs without blocking. They
// come when the peer calls accept(), so until then messages just wait (as
// they would for a slow receiver); a listener that refused us closes the
// sockets, which fails the comm here.
ncclResult_t progressListenerProofs(Comm* comm) {
  bool all = true;
  for (size_t i = 0; i < comm->proofs.size(); i++) {
    Comm::ListenerProof& p = comm->proofs[i];
    if (p.got == sizeof(AuthConfirm)) continue;
    Socket& sock = i == 0 ? comm->ctrl : comm->socks[i - 1]->sock;
    int err = 0;
    ssize_t n = sock.tryRecv(reinterpret_cast<char*>(&p.confirm) + p.got, sizeof(AuthConfirm) - p.got, &err);
    if (n < 0) {
      comm->fail(ncclRemoteError, "the listener at " + comm->peer.toString() +
                                      " closed the connection before proving the handle's key (it refused this "
                                      "connection or failed: see its log)" +
                                      (err ? std::string(": ") + strerror(err) : std::string()));
      return comm->checkError();
    }
    p.got += (size_t)n;
    if (p.got < sizeof(AuthConfirm)) {
      all = false;
      continue;
    }
    if (!checkConfirm(comm->secret.key, kAuthContext, comm->secret.challenge, p.response, p.confirm)) {
      comm->fail(ncclRemoteError, "the listener at " + comm->peer.toString() +
                                      " does not prove the handle's key: refusing to send to it");
      return comm->checkError();
    }
  }
  if (all) comm->proofs.clear();
  return ncclSuccess;
}

// Moves control headers (and inline payloads), oldest request first, without blocking.
ncclResult_t progressControl(Comm* comm) {
  UCHECK(comm->checkError());
  if (!comm->proofs.empty()) {
    UCHECK(progressListenerProofs(comm));
    if (!comm->proofs.empty()) return ncclSuccess;
  }
  for (;;) {
    if (comm->ctrlSeq >= comm->closedAtSeq) return ncclSuccess;   // no header will ever come again
    Request* req = findSeq(comm, comm->ctrlSeq);
    if (req == nullptr) return ncclSuccess;
    if (comm->isSend && (req->hdr.flags & kMsgInline)) {
      int err = 0;
      const int sent = sendInline(comm, req, &err);
      if (sent < 0) {
        comm->fail(ioErrorCode(err), describeIoError(comm, err, true));
        return comm->checkError();
      }
      if (sent == 0) return ncclSuccess;  // would block: the rest at the next call
    }
    char* hdr = reinterpret_cast<char*>(&req->hdr);
    while (req->hdrDone < sizeof(MsgHeader)) {
      int err = 0;
      ssize_t n = moveOnControl(comm, hdr + req->hdrDone, sizeof(MsgHeader) - req->hdrDone, &err);
      if (n < 0) {
        // End of stream before any byte of the next header: the peer closed
        // its side between messages (destroyed its comm, or died at a
        // message boundary). The messages before it arrived whole (their
        // chunks may still be on the way on the data sockets): only this
        // receive and later ones fail, quietly, when tested.
        if (!comm->isSend && err == 0 && req->hdrDone == 0) {
          comm->closedAtSeq = comm->ctrlSeq;
          comm->closedText = "connection with " + comm->peer.toString() + " closed by the peer";
          return ncclSuccess;
        }
        comm->fail(ioErrorCode(err), describeIoError(comm, err, comm->isSend));
        return comm->checkError();
      }
      if (n == 0) return ncclSuccess;  // would block: try again at the next call
      req->hdrDone += (size_t)n;
    }
    if (comm->isSend) {
      req->actualSize = req->size;
    } else {
      if (req->hdr.tag != req->tag) {
        comm->fail(ncclInvalidUsage, "message from " + comm->peer.toString() + " has tag " +
                                         std::to_string(req->hdr.tag) + " but the receive expected tag " +
                                         std::to_string(req->tag) + " (sends and receives must match in order)");
        return comm->checkError();
      }
      if (req->hdr.size < 0 || req->hdr.size > req->size) {
        comm->fail(ncclInvalidUsage, "message from " + comm->peer.toString() + " of " +
                                         std::to_string(req->hdr.size) + " bytes does not fit the receive of " +
                                         std::to_string(req->size) + " bytes (message truncated)");
        return comm->checkError();
      }
      req->actualSize = req->hdr.size;
    }
    if (req->hdr.flags & kMsgInline) {
      // The payload follows the header on the control socket.
      while (req->inlineDone < (size_t)req->actualSize) {
        int err = 0;
        ssize_t n = moveOnControl(comm, req->data + req->inlineDone, (size_t)req->actualSize - req->inlineDone, &err);
        if (n < 0) {
          comm->fail(ioErrorCode(err), describeIoError(comm, err, comm->isSend));
          return comm->checkError();
        }
        if (n == 0) return ncclSuccess;  // would block: the rest at the next call
        req->inlineDone += (size_t)n;
      }
    } else {
      postChunks(comm, req, (size_t)req->actualSize);
    }
    req->ctrlDone = true;
    comm->ctrlSeq++;
  }
}

ncclResult_t postRequest(Comm* comm, void* data, int size, int tag, void** request) {
  *request = nullptr;
  UCHECK(comm->checkError());
  Request* slot = nullptr;
  for (Request& r : comm->reqs)
    if (!r.used) {
      slot = &r;
      break;
    }
  if (slot == nullptr) return ncclSuccess;  // all in flight: the caller retries later
  slot->comm = comm;
  slot->used = true;
  slot->seq = comm->nextSeq++;
  slot->data = static_cast<char*>(data);
  slot->size = size;
  slot->tag = tag;
  slot->actualSize = 0;
  slot->ctrlDone = false;
  slot->hdr = {tag, size, comm->isSend && (size_t)size <= inlineLimit() ? kMsgInline : 0, 0};
  slot->hdrDone = 0;
  slot->inlineDone = 0;
  slot->chunksLeft.store(0, std::memory_order_relaxed);
  // A failure found now (e.g. the peer's header does not match this receive)
  // breaks the comm: report it at once, and leave no request to test.
  ncclResult_t res = progressControl(comm);
  if (res != ncclSuccess) return res;
  *request = slot;
  return ncclSuccess;
}

bool complete(Request* r) { return r->ctrlDone && r->chunksLeft.load(std::memory_order_acquire) == 0; }

// ------------------------------------------------------ connection setup
void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool retryableConnectError(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
         err == ECONNRESET || err == EAGAIN || err == EINTR;
}

struct ConnectStage {
  SocketAddress addr;
  ListenerSecret secret;
  int nSocks = 0;
  int nThreads = 0;
  std::vector<Socket> socks;  // established, opening sent; index 0 = control
  std::vector<AuthResponse> responses;  // what each of socks was opened with
  int fd = -1;                // socket being connected
  bool connected = false;
  Opening opening{};
  size_t openingSent = 0;
  Deadline deadline;
  Clock::time_point retryAt;
  int backoffMs = 1;
  ~ConnectStage() {
    if (fd >= 0) ::close(fd);
  }
};

// A socket accepted but not yet part of the connection: a fixed-size record
// whatever the peer sends (listener_guard.h bounds how many exist).
struct PendingSocket {
  Socket sock;
  Opening opening{};
  size_t got = 0;
  bool proven = false;  // its proof checked out: it belongs to the peer with the handle
  AuthConfirm confirm{};
  size_t confirmSent = 0;
  Deadline deadline;  // to prove the key
};

struct ListenComm {
  int dev = 0;
  ListenerSecret secret;
  Socket listener;
  std::vector<std::unique_ptr<PendingSocket>> pending;  // in arrival order
  RefusalLog refusals{"Socket"};
  std::vector<Socket> socks;  // by index, for the connection being accepted
  int nSocks = -1;
  int nThreads = 0;
  int arrived = 0;
  Deadline deadline;  // for the rest of the connection, once its first socket proved the key
  ~ListenComm() { refusals.summary(listener.address()); }
};

int threadsParam() { return (int)std::min<int64_t>(std::max<int64_t>(knobInt(Knob::NCCL_SOCKET_NTHREADS), 1), kMaxThreads); }

int socksPerThreadParam() { return (int)std::max<int64_t>(knobInt(Knob::NCCL_NSOCKS_PERTHREAD), 1); }

// One step of a non-blocking connect of socket `stage->socks.size()`.
// Returns ncclSuccess (maybe without progress) or an error.
ncclResult_t connectStep(ConnectStage* st) {
  if (st->fd < 0) {
    if (Clock::now() < st->retryAt) return ncclSuccess;
    int fd = ::socket(st->addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      WARN("NET/Socket: socket() failed: %s", strerror(errno));
      return ncclSystemError;
    }
    st->fd = fd;
    st->connected = false;
    if (::connect(fd, &st->addr.sa, st->addr.length()) == 0) {
      st->connected = true;
    } else if (errno != EINPROGRESS) {
      int err = errno;
      ::close(st->fd);
      st->fd = -1;
      if (!retryableConnectError(err)) {
        WARN("NET/Socket: connect to %s failed: %s", st->addr.toString().c_str(), strerror(err));
        return ncclSystemError;
      }
      st->retryAt = Clock::now() + std::chrono::milliseconds(st->backoffMs);
      st->backoffMs = std::min(st->backoffMs * 2, 100);
      return ncclSuccess;
    }
  }
  if (!st->connected) {
    pollfd p = {st->fd, POLLOUT, 0};
    if (poll(&p, 1, 0) <= 0) return ncclSuccess;
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(st->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      ::close(st->fd);
      st->fd = -1;
      if (!retryableConnectError(err)) {
        WARN("NET/Socket: connect to %s failed: %s", st->addr.toString().c_str(), strerror(err));
        return ncclSystemError;
      }
      st->retryAt = Clock::now() + std::chrono::milliseconds(st->backoffMs);
      st->backoffMs = std::min(st->backoffMs * 2, 100);
      return ncclSuccess;
    }
    st->connected = true;
    setNoDelay(st->fd);
    if (!makeResponse(st->secret.key, kAuthContext, st->secret.challenge, &st->opening.response)) {
      WARN("NET/Socket: the connect handle holds no listener challenge (was it written by a Socket listen() of "
           "this uniccl version?)");
      return ncclInvalidArgument;
    }
    st->opening.hello = {kWireVersion, (int32_t)st->socks.size(), st->nSocks, st->nThreads};
    st->openingSent = 0;
  }
  while (st->openingSent < sizeof(Opening)) {
    ssize_t n = ::send(st->fd, reinterpret_cast<char*>(&st->opening) + st->openingSent,
                       sizeof(Opening) - st->openingSent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return ncclSuccess;
      WARN("NET/Socket: sending the handshake to %s failed: %s", st->addr.toString().c_str(), strerror(errno));
      return ncclRemoteError;
    }
    st->openingSent += (size_t)n;
  }
  st->socks.push_back(Socket::adopt(st->fd, st->addr));
  st->responses.push_back(st->opening.response);
  st->fd = -1;
  st->connected = false;
  st->backoffMs = 1;
  return ncclSuccess;
}

std::unique_ptr<Comm> makeComm(bool isSend, const SocketAddress& peer, std::vector<Socket>* socks) {
  auto comm = std::make_unique<Comm>();
  comm->isSend = isSend;
  comm->peer = peer;
  comm->ctrl = std::move((*socks)[0]);
  for (size_t i = 1; i < socks->size(); i++) {
    auto ds = std::make_unique<DataSocket>();
    ds->sock = std::move((*socks)[i]);
    comm->socks.push_back(std::move(ds));
  }
  return comm;
}

// ---------------------------------------------------------- table entries
// Devices are found once per process: getProperties hands out pointers to
// their names, which must stay valid while comms use them.
ncclResult_t socketInit(ncclDebugLogger_t) {
  {
    std::lock_guard<std::mutex> lock(gDevicesMutex);
    if (!gDevices.empty()) return ncclSuccess;
  }
  std::vector<std::pair<std::string, SocketAddress>> ifs;
  UCHECK(findInterfaces(&ifs, kMaxDevices));
  std::vector<Device> devs;
  for (auto& it : ifs) {
    devs.push_back({it.first, it.second, readPciPath(it.first), readSpeedMbps(it.first)});
    INFO(kSubsysNet | kSubsysInit, "NET/Socket: device %zu: %s %s", devs.size() - 1, it.first.c_str(),
         it.second.toString(false).c_str());
  }
  std::lock_guard<std::mutex> lock(gDevicesMutex);
  if (gDevices.empty()) gDevices = std::move(devs);  // another thread may have won
  return ncclSuccess;
}

ncclResult_t socketDevices(int* ndev) {
  std::lock_guard<std::mutex> lock(gDevicesMutex);
  *ndev = (int)gDevices.size();
  return ncclSuccess;
}

ncclResult_t badDevice(int dev) {
  WARN("NET/Socket: device %d does not exist (call init first; devices() says how many there are)", dev);
  return ncclInvalidArgument;
}

ncclResult_t socketGetProperties(int dev, ncclNetProperties_v8_t* props) {
  std::lock_guard<std::mutex> lock(gDevicesMutex);
  if (dev < 0 || dev >= (int)gDevices.size()) {
    WARN("NET/Socket: device %d does not exist (%zu devices)", dev, gDevices.size());
    return ncclInvalidArgument;
  }
  const Device& d = gDevices[dev];  // never changes once found
  memset(props, 0, sizeof(*props));
  props->name = const_cast<char*>(d.name.c_str());
  props->pciPath = d.pciPath.empty() ? nullptr : const_cast<char*>(d.pciPath.c_str());
  props->guid = (uint64_t)dev;
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 0;
  props->speed = d.speedMbps;
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = 1;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  return ncclSuccess;
}

ncclResult_t socketListen(int dev, void* opaqueHandle, void** listenComm) {
  *listenComm = nullptr;
  Device d;
  if (!getDevice(dev, &d)) return badDevice(dev);
  auto lc = std::make_unique<ListenComm>();
  lc->dev = dev;
  UCHECK(newListenerSecret(&lc->secret));
  UCHECK(lc->listener.listen(d.addr));
  Handle* h = static_cast<Handle*>(opaqueHandle);
  memset(opaqueHandle, 0, NCCL_NET_HANDLE_MAXSIZE);
  h->addr = lc->listener.address();
  h->secret = lc->secret;
  h->stage = nullptr;
  INFO(kSubsysNet, "NET/Socket: listening on %s (%s)", h->addr.toString().c_str(), d.name.c_str());
  *listenComm = lc.release();
  return ncclSuccess;
}

ncclResult_t socketConnect(int dev, void* opaqueHandle, void** sendComm, ncclNetDeviceHandle_v8_t** sendDevComm) {
  *sendComm = nullptr;
  if (sendDevComm) *sendDevComm = nullptr;  // no device offload
  Handle* h = static_cast<Handle*>(opaqueHandle);
  ConnectStage* st = static_cast<ConnectStage*>(h->stage);
  if (st == nullptr) {
    Device d;
    if (!getDevice(dev, &d)) return badDevice(dev);
    if (!h->addr.valid()) {
      WARN("NET/Socket: connect handle holds no valid address (was it written by a Socket listen()?)");
      return ncclInvalidArgument;
    }
    st = new ConnectStage();
    st->addr = h->addr;
    st->secret = h->secret;
    st->nThreads = threadsParam();
    st->nSocks = std::min(st->nThreads * socksPerThreadParam(), kMaxSocks);
    st->nThreads = std::min(st->nThreads, st->nSocks);
    st->deadline = deadlineAfterMs(netConnectTimeoutMs());
    st->retryAt = Clock::now();
    h->stage = st;
  }
  ncclResult_t res = ncclSuccess;
  while ((int)st->socks.size() < st->nSocks + 1) {
    size_t before = st->socks.size();
    res = connectStep(st);
    if (res != ncclSuccess) break;
    if (st->socks.size() == before) {  // no progress now
      if (Clock::now() > st->deadline) {
        WARN("NET/Socket: connect to %s did not complete within %lld ms (is the peer listening? "
             "UNICCL_NET_CONNECT_TIMEOUT_MS sets the limit)",
             st->addr.toString().c_str(), (long long)netConnectTimeoutMs());
        res = ncclRemoteError;
      }
      break;
    }
  }
  if (res == ncclSuccess && (int)st->socks.size() == st->nSocks + 1) {
    auto comm = makeComm(true, st->addr, &st->socks);
    comm->secret = st->secret;
    comm->proofs.resize(st->responses.size());
    for (size_t i = 0; i < st->responses.size(); i++) comm->proofs[i].response = st->responses[i];
    res = startHelpers(comm.get(), st->nThreads);
    if (res == ncclSuccess) {
      INFO(kSubsysNet, "NET/Socket: connected to %s with %d sockets, %d threads", st->addr.toString().c_str(),
           st->nSocks, st->nThreads);
      *sendComm = comm.release();
    }
  } else if (res == ncclSuccess) {
    return ncclSuccess;  // in progress
  }
  delete st;
  h->stage = nullptr;
  return res;
}

// acceptPending's step: reads what a pending socket sent and acts on it,
// without blocking: checks its proof of the key (nothing else is read
// before), answers with ours, and then lets it join the connection being
// assembled (kDone). Silence before the proof is acceptPending's to drop.
PendingStep progressPending(ListenComm* lc, PendingSocket* p) {
  const SocketAddress& peer = p->sock.address();
  const SocketAddress& here = lc->listener.address();
  if (!p->proven) {
    int err = 0;
    ssize_t n = p->sock.tryRecv(reinterpret_cast<char*>(&p->opening) + p->got, sizeof(Opening) - p->got, &err);
    if (n < 0) {
      lc->refusals.note(Refusal::kClosed, peer, here);
      return PendingStep::kDropped;
    }
    p->got += (size_t)n;
    if (p->got < sizeof(Opening)) return PendingStep::kWait;
    if (!checkResponse(lc->secret.key, kAuthContext, lc->secret.challenge, p->opening.response)) {
      lc->refusals.note(Refusal::kBadProof, peer, here);
      return PendingStep::kDropped;
    }
    p->proven = true;
    p->confirm = makeConfirm(lc->secret.key, kAuthContext, lc->secret.challenge, p->opening.response);
  }
  while (p->confirmSent < sizeof(AuthConfirm)) {
    int err = 0;
    ssize_t n = p->sock.trySend(reinterpret_cast<const char*>(&p->confirm) + p->confirmSent,
                                sizeof(AuthConfirm) - p->confirmSent, &err);
    if (n < 0) {
      INFO(kSubsysNet, "NET/Socket: %s closed during the handshake", peer.toString().c_str());
      return PendingStep::kDropped;
    }
    if (n == 0) {
      if (Clock::now() <= p->deadline) return PendingStep::kWait;
      INFO(kSubsysNet, "NET/Socket: %s did not take the handshake's answer in time: dropped", peer.toString().c_str());
      return PendingStep::kDropped;
    }
    p->confirmSent += (size_t)n;
  }
  const Hello& hl = p->opening.hello;
  if (hl.version != kWireVersion) {
    WARN("NET/Socket: rejected a connection from %s: wire version %u, expected %u (mixed uniccl versions?)",
         peer.toString().c_str(), hl.version, kWireVersion);
    return PendingStep::kDropped;
  }
  if (hl.nSocks < 1 || hl.nSocks > kMaxSocks || hl.nThreads < 1 || hl.nThreads > hl.nSocks || hl.index < 0 ||
      hl.index > hl.nSocks || (lc->nSocks >= 0 && hl.nSocks != lc->nSocks)) {
    WARN("NET/Socket: rejected a connection from %s: bad handshake (socket %d of %d, %d threads)",
         peer.toString().c_str(), hl.index, hl.nSocks, hl.nThreads);
    return PendingStep::kDropped;
  }
  if (lc->nSocks < 0) {
    lc->nSocks = hl.nSocks;
    lc->nThreads = hl.nThreads;
    lc->socks.clear();
    lc->socks.resize(hl.nSocks + 1);
    lc->deadline = deadlineAfterMs(netConnectTimeoutMs());
  }
  if (lc->socks[hl.index].isOpen()) {
    WARN("NET/Socket: rejected a duplicate socket %d from %s", hl.index, peer.toString().c_str());
    return PendingStep::kDropped;
  }
  lc->socks[hl.index] = std::move(p->sock);
  lc->arrived++;
  return PendingStep::kDone;
}

ncclResult_t socketAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t** recvDevComm) {
  *recvComm = nullptr;
  if (recvDevComm) *recvDevComm = nullptr;
  ListenComm* lc = static_cast<ListenComm*>(listenComm);
  UCHECK(acceptPending(lc->listener, lc->pending, lc->refusals, [lc](PendingSocket& p, PendingStep* out) {
    *out = progressPending(lc, &p);
    return ncclSuccess;
  }));
  if (lc->nSocks >= 0 && lc->arrived == lc->nSocks + 1) {
    SocketAddress peer = lc->socks[0].address();
    auto comm = makeComm(false, peer, &lc->socks);
    int nThreads = lc->nThreads, nSocks = lc->nSocks;
    lc->socks.clear();
    lc->nSocks = -1;
    lc->arrived = 0;
    UCHECK(startHelpers(comm.get(), nThreads));
    INFO(kSubsysNet, "NET/Socket: accepted %s with %d sockets, %d threads", peer.toString().c_str(), nSocks,
         nThreads);
    *recvComm = comm.release();
    return ncclSuccess;
  }
  if (lc->nSocks >= 0 && Clock::now() > lc->deadline) {
    WARN("NET/Socket: a peer began connecting to %s but did not finish within %lld ms (%d of %d sockets)",
         lc->listener.address().toString().c_str(), (long long)netConnectTimeoutMs(), lc->arrived, lc->nSocks + 1);
    lc->socks.clear();
    lc->nSocks = -1;
    lc->arrived = 0;
    return ncclRemoteError;
  }
  return ncclSuccess;
}

ncclResult_t socketRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  *mhandle = nullptr;
  if (comm == nullptr) {
    WARN("NET/Socket: regMr needs a send or receive comm");
    return ncclInvalidArgument;
  }
  if (type != NCCL_PTR_HOST) {
    WARN("NET/Socket: regMr of memory type %d: the socket transport moves host memory only (NCCL_PTR_HOST)", type);
    return ncclInternalError;
  }
  *mhandle = new MemHandle{static_cast<char*>(data), size};
  return ncclSuccess;
}

ncclResult_t socketRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void** mhandle) {
  *mhandle = nullptr;
  WARN("NET/Socket: DMA-BUF registration is not supported (ptrSupport is NCCL_PTR_HOST only)");
  return ncclInternalError;
}

ncclResult_t socketDeregMr(void*, void* mhandle) {
  delete static_cast<MemHandle*>(mhandle);
  return ncclSuccess;
}

ncclResult_t checkInRegion(void* mhandle, void* data, int size) {
  if (size < 0) {
    WARN("NET/Socket: negative message size %d", size);
    return ncclInvalidArgument;
  }
  if (mhandle == nullptr) return ncclSuccess;
  MemHandle* mh = static_cast<MemHandle*>(mhandle);
  char* p = static_cast<char*>(data);
  if (p < mh->base || p + size > mh->base + mh->size) {
    WARN("NET/Socket: buffer %p (+%d bytes) lies outside its registered region %p (+%zu bytes)", data, size,
         (void*)mh->base, mh->size);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t socketIsend(void* sendComm, void* data, int size, int tag, void* mhandle, void** request) {
  *request = nullptr;
  UCHECK(checkInRegion(mhandle, data, size));
  return postRequest(static_cast<Comm*>(sendComm), data, size, tag, request);
}

ncclResult_t socketIrecv(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                         void** request) {
  *request = nullptr;
  if (n != 1) {
    WARN("NET/Socket: grouped receives (n=%d) are not supported: maxRecvs is 1", n);
    return ncclInternalError;
  }
  UCHECK(checkInRegion(mhandles ? mhandles[0] : nullptr, data[0], sizes[0]));
  return postRequest(static_cast<Comm*>(recvComm), data[0], sizes[0], tags[0], request);
}

// Received data lies in host memory: visible as soon as test() says done.
ncclResult_t socketIflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;
  return ncclSuccess;
}

ncclResult_t socketTest(void* request, int* done, int* sizes) {
  *done = 0;
  Request* req = static_cast<Request*>(request);
  if (req == nullptr || !req->used) {
    WARN("NET/Socket: test() of a request that is not in flight");
    return ncclInvalidArgument;
  }
  Comm* comm = req->comm;
  UCHECK(progressControl(comm));
  for (Request& r : comm->reqs)  // completions (and the close) are reported in posting order
    if (r.used && r.seq < req->seq && !complete(&r)) return ncclSuccess;
  if (req->seq >= comm->closedAtSeq) return comm->closedError();
  if (!complete(req)) return ncclSuccess;
  *done = 1;
  if (sizes) *sizes = req->actualSize;
  req->used = false;
  return ncclSuccess;
}

ncclResult_t socketClose(void* comm) {
  delete static_cast<Comm*>(comm);  // joins the helpers, then the sockets close
  return ncclSuccess;
}

ncclResult_t socketCloseListen(void* listenComm) {
  delete static_cast<ListenComm*>(listenComm);
  return ncclSuccess;
}

const ncclNet_v8_t kSocketNet = {
    "Socket",
    socketInit,
    socketDevices,
    socketGetProperties,
    socketListen,
    socketConnect,
    socketAccept,
    socketRegMr,
    socketRegMrDmaBuf,
    socketDeregMr,
    socketIsend,
    socketIrecv,
    socketIflush,
    socketTest,
    socketClose,
    socketClose,
    socketCloseListen,
    nullptr,  // getDeviceMr: no device offload
    nullptr,  // irecvConsumed
};

}  // namespace

const NetApi* socketNetApi() { return &kSocketNet; }

void socketAbandonConnect(void* handle) {
  Handle* h = static_cast<Handle*>(handle);
  delete static_cast<ConnectStage*>(h->stage);
  h->stage = nullptr;
}

}  // namespace uniccl
