#include "common/bootstrap/root.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/bootstrap/listener_loop.h"
#include "common/bootstrap/unique_id.h"
#include "common/bootstrap/wire.h"
#include "common/check.h"
#include "common/util/debug.h"
#include "common/util/param.h"

namespace uniccl {
namespace {

using bootstrap::HelloBody;
using bootstrap::NextFirstBody;
using bootstrap::PendingConnection;
using bootstrap::WireHeader;

// A connection must prove the secret this soon after its accept: a real
// rank answers the challenge within milliseconds (and reconnects if it was
// dropped), while a scanner or a half-open connection holds a slot no longer.
constexpr int64_t kMaxAuthMs = 2000;
// After the proof, a hello is a few hundred bytes: a connection that needs
// longer is stalled.
constexpr int64_t kMaxHelloMs = 10000;

class RootServer {
 public:
  RootServer(Socket listener, const AuthSecret& secret, int64_t timeoutMs)
      : listener_(std::move(listener)), secret_(secret), magic_(wireMagic(secret)), timeoutMs_(timeoutMs) {}

  // The thread body: catches everything, so that a failure ends this
  // rendezvous with an error for the waiting ranks, never the process.
  void run();
  const SocketAddress& address() const { return address_; }
  void requestStop() { stop_.store(true); }
  bool finished() const { return finished_.load(); }
  // False once all ranks have arrived: the rendezvous is over for newcomers.
  bool accepting() const { return accepting_.load(); }
  // In a forked child: the thread does not exist there; only drop the fd copy.
  void closeInheritedListener() { listener_.close(); }
  void setAddress(const SocketAddress& a) { address_ = a; }

 private:
  void serve();
  // The first message of a connection that proved the secret (ListenerLoop
  // handler): false when done with the connection.
  bool readFirstMessage(PendingConnection& p);
  void handleHello(PendingConnection& p);
  void handleNextFirst(PendingConnection& p);
  // Every rank of this root's block arrived, and with several roots the
  // next block's first rank said where it listens.
  bool complete();
  void reject(PendingConnection& p, ncclResult_t code, const char* why);
  void watchRegistered(const std::vector<pollfd>& fds, const std::vector<int>& slots);
  void sendReplies();
  void giveUp();
  // Sends `why` with `code` to every rank waiting for its reply.
  void tellWaitingRanks(ncclResult_t code, const char* why);
  Socket& slot(int rank) { return ranks_[rank - blockFirst_]; }

  Socket listener_;
  SocketAddress address_ = emptySocketAddress();
  AuthSecret secret_;
  uint64_t magic_;
  int64_t timeoutMs_;
  std::atomic<bool> stop_{false}, finished_{false}, accepting_{true};

  int nranks_ = -1;
  uint32_t blobBytes_ = 0;
  // ncclCommInitRankScalable with several ids: this root serves the ranks
  // [blockFirst_, blockEnd_) (all of them with one root).
  int rootIndex_ = 0, nRoots_ = 1;
  int blockFirst_ = 0, blockEnd_ = 0;
  std::vector<char> nextFirstRaw_;   // NextFirst body, checked once the hellos said which root this is
  NextFirstBody nextFirst_{};
  bool haveNextFirst_ = false;
  int arrived_ = 0;
  // Indexed by rank - blockFirst_: only this root's block is held.
  std::vector<Socket> ranks_;
  std::vector<SocketAddress> listenAddrs_;
  bool anyArrived_ = false;
  Deadline giveUpAt_;
};

void RootServer::run() {
  try {
    serve();
  } catch (const std::exception& e) {
    std::string why = "bootstrap root " + address_.toString() + " failed: " + e.what();
    WARN("%s", why.c_str());
    tellWaitingRanks(ncclSystemError, why.c_str());
  } catch (...) {
    std::string why = "bootstrap root " + address_.toString() + " failed with an unknown exception";
    WARN("%s", why.c_str());
    tellWaitingRanks(ncclSystemError, why.c_str());
  }
  accepting_.store(false);
  ranks_.clear();
  listener_.close();
  finished_.store(true);
}

void RootServer::serve() {
  bootstrap::ListenerLimits limits;
  limits.capacity = bootstrap::pendingCapacity(8, 16, 1024);
  limits.authMs = std::min(timeoutMs_, kMaxAuthMs);
  limits.identifyMs = std::min(timeoutMs_, kMaxHelloMs);
  bootstrap::ListenerLoop loop(&listener_, secret_, bootstrap::kRootAuthContext,
                               "Bootstrap root " + address_.toString(), limits,
                               [this](PendingConnection& p) { return readFirstMessage(p); });
  std::vector<pollfd> fds;
  std::vector<int> slots;
  while (!stop_.load()) {
    if (anyArrived_ && Clock::now() >= giveUpAt_) {
      giveUp();
      return;
    }
    fds.clear();
    slots.clear();
    for (size_t i = 0; i < ranks_.size(); i++) {
      if (!ranks_[i].isOpen()) continue;
      fds.push_back({ranks_[i].fd(), POLLIN, 0});
      slots.push_back((int)i);
    }
    loop.round(&fds, 50);
    watchRegistered(fds, slots);
    if (complete()) {
      accepting_.store(false);
      sendReplies();
      return;
    }
  }
}

bool RootServer::readFirstMessage(PendingConnection& p) {
  int err = 0;
  std::string peer = p.sock.address().toString();
  while (p.headerHave < sizeof(WireHeader)) {
    ssize_t n = p.sock.tryRecv(reinterpret_cast<char*>(&p.header) + p.headerHave,
                               sizeof(WireHeader) - p.headerHave, &err);
    if (n < 0) goto closed;
    if (n == 0) return true;
    p.headerHave += (size_t)n;
    if (p.headerHave == sizeof(WireHeader)) {
      bootstrap::HelloHeaderStatus status = bootstrap::checkHelloHeader(p.header, magic_);
      if (status == bootstrap::HelloHeaderStatus::kWrongMagic) {
        WARN("Bootstrap root %s: dropping %s: wrong magic 0x%lx (a rank of another communicator, or not uniccl)",
             address_.toString().c_str(), peer.c_str(), (unsigned long)p.header.magic);
        return false;
      }
      if (status == bootstrap::HelloHeaderStatus::kMalformed) {
        WARN("Bootstrap root %s: dropping %s: malformed hello (type %u, length %lu; at most %lu)",
             address_.toString().c_str(), peer.c_str(), p.header.type, (unsigned long)p.header.length,
             (unsigned long)bootstrap::kMaxInitMessageBytes);
        return false;
      }
      // Bounded by checkHelloHeader, and only for a peer that proved the secret.
      p.body.resize(p.header.length);
    }
  }
  while (p.bodyHave < p.body.size()) {
    ssize_t n = p.sock.tryRecv(p.body.data() + p.bodyHave, p.body.size() - p.bodyHave, &err);
    if (n < 0) goto closed;
    if (n == 0) return true;
    p.bodyHave += (size_t)n;
  }
  if (p.header.type == bootstrap::kMsgNextFirst) handleNextFirst(p);
  else handleHello(p);
  return false;

closed:
  WARN("Bootstrap root %s: dropping %s: connection %s %s", address_.toString().c_str(), peer.c_str(),
       err ? strerror(err) : "closed", p.headerHave == 0 ? "after authenticating" : "in the middle of its hello");
  return false;
}

void RootServer::reject(PendingConnection& p, ncclResult_t code, const char* why) {
  WARN("Bootstrap root %s: rejecting %s: %s", address_.toString().c_str(), p.sock.address().toString().c_str(), why);
  char body[sizeof(int32_t) + 512];
  int32_t c = code;
  memcpy(body, &c, sizeof(c));
  size_t len = strnlen(why, 511);
  memcpy(body + sizeof(c), why, len);
  body[sizeof(c) + len] = '\0';
  // Best effort: a peer the message does not reach sees its connection close.
  (void)bootstrap::sendMessage(p.sock, magic_, bootstrap::kMsgRootError, 0, body, sizeof(c) + len + 1,
                               deadlineAfterMs(100), nullptr);
}

void RootServer::handleHello(PendingConnection& p) {
  HelloBody h;
  char why[256];
  ncclResult_t bad = bootstrap::parseHello(p.body.data(), p.body.size(), &h, why, sizeof(why));
  if (bad != ncclSuccess) return reject(p, bad, why);
  if (nranks_ < 0) {
    bootstrap::RootBlock block = bootstrap::rootBlock(h.rootIndex, h.nranks, h.nRoots);
    // parseHello bounds nranks (kMaxRanks); still, a block this process
    // cannot hold is an error for this hello, not for the process.
    try {
      ranks_.resize(block.end - block.first);
      listenAddrs_.assign(block.end - block.first, emptySocketAddress());
    } catch (const std::bad_alloc&) {
      ranks_.clear();
      listenAddrs_.clear();
      snprintf(why, sizeof(why), "cannot hold the %d ranks of this root's block", block.end - block.first);
      return reject(p, ncclSystemError, why);
    }
    nranks_ = h.nranks;
    blobBytes_ = h.blobBytes;
    rootIndex_ = h.rootIndex;
    nRoots_ = h.nRoots;
    blockFirst_ = block.first;
    blockEnd_ = block.end;
  }
  if (h.nranks != nranks_) {
    snprintf(why, sizeof(why), "rank %d says nranks=%d but earlier ranks said %d: every rank must pass the same nranks",
             h.rank, h.nranks, nranks_);
    return reject(p, ncclInvalidUsage, why);
  }
  if (h.nRoots != nRoots_ || h.rootIndex != rootIndex_) {
    snprintf(why, sizeof(why), "rank %d takes this root for root %d of %d, earlier ranks for root %d of %d: every "
             "rank must pass the same ids in the same order", h.rank, h.rootIndex, h.nRoots, rootIndex_, nRoots_);
    return reject(p, ncclInvalidUsage, why);
  }
  if (h.blobBytes != blobBytes_) {
    snprintf(why, sizeof(why), "rank %d sends %u bytes of peer info, earlier ranks %u (mixed library versions?)",
             h.rank, h.blobBytes, blobBytes_);
    return reject(p, ncclInvalidUsage, why);
  }
  if (slot(h.rank).isOpen()) {
    snprintf(why, sizeof(why), "rank %d arrived twice: every rank must pass a distinct rank", h.rank);
    return reject(p, ncclInvalidUsage, why);
  }
  slot(h.rank) = std::move(p.sock);
  listenAddrs_[h.rank - blockFirst_] = h.listen;
  arrived_++;
  if (!anyArrived_) {
    anyArrived_ = true;
    giveUpAt_ = Clock::now() + std::chrono::milliseconds(timeoutMs_);
  }
  INFO(kSubsysBootstrap, "Bootstrap root %s: rank %d/%d arrived (listens on %s)", address_.toString().c_str(), h.rank,
       nranks_, h.listen.toString().c_str());
}

// The next block's first rank sends its listen address and closes: nothing
// to answer. It may come before any hello, so it is checked in complete().
void RootServer::handleNextFirst(PendingConnection& p) {
  if (haveNextFirst_ || !nextFirstRaw_.empty()) {
    WARN("Bootstrap root %s: dropping a second next-first message from %s", address_.toString().c_str(),
         p.sock.address().toString().c_str());
    return;
  }
  nextFirstRaw_ = std::move(p.body);
}

bool RootServer::complete() {
  if (nranks_ < 0 || arrived_ != blockEnd_ - blockFirst_) return false;
  if (nRoots_ == 1 || haveNextFirst_) return true;
  if (nextFirstRaw_.empty()) return false;
  char why[256];
  ncclResult_t bad =
      bootstrap::parseNextFirst(nextFirstRaw_.data(), nextFirstRaw_.size(), rootIndex_, nRoots_, &nextFirst_, why,
                                sizeof(why));
  if (bad == ncclSuccess && nextFirst_.nranks != nranks_) {
    snprintf(why, sizeof(why), "the next block's first rank says nranks=%d, this block's ranks %d", nextFirst_.nranks,
             nranks_);
    bad = ncclInvalidUsage;
  }
  nextFirstRaw_.clear();
  if (bad != ncclSuccess) {
    WARN("Bootstrap root %s: ignoring a next-first message: %s", address_.toString().c_str(), why);
    return false;
  }
  haveNextFirst_ = true;
  return true;
}

// A registered rank sends nothing until it gets its reply: readable means it
// died (or misbehaves). Forget it so a restarted rank could take its place.
void RootServer::watchRegistered(const std::vector<pollfd>& fds, const std::vector<int>& slots) {
  for (size_t i = 0; i < fds.size(); i++) {
    if (!fds[i].revents) continue;
    Socket& s = ranks_[slots[i]];
    char byte;
    int err = 0;
    ssize_t n = s.tryRecv(&byte, 1, &err);
    if (n == 0) continue;
    WARN("Bootstrap root %s: rank %d %s before all ranks arrived; waiting for it again", address_.toString().c_str(),
         blockFirst_ + slots[i], n < 0 ? "disconnected" : "sent unexpected data");
    s.close();
    arrived_--;
  }
}

void RootServer::sendReplies() {
  for (int r = blockFirst_; r < blockEnd_; r++) {
    // The block's last rank links to the next block's first (with one root:
    // to rank 0, closing the ring).
    const SocketAddress& next = r + 1 < blockEnd_ ? listenAddrs_[r + 1 - blockFirst_]
                                : nRoots_ == 1    ? listenAddrs_[0]
                                                  : nextFirst_.listen;
    if (bootstrap::sendMessage(slot(r), magic_, bootstrap::kMsgRootReply, 0, &next, sizeof(next),
                               deadlineAfterMs(std::min<int64_t>(timeoutMs_, 5000)), nullptr) != ncclSuccess)
      WARN("Bootstrap root %s: could not send rank %d its ring successor; that rank will fail",
           address_.toString().c_str(), r);
  }
  INFO(kSubsysBootstrap, "Bootstrap root %s: all %d ranks of its block (root %d of %d) arrived, root done",
       address_.toString().c_str(), blockEnd_ - blockFirst_, rootIndex_, nRoots_);
}

void RootServer::giveUp() {
  std::string missing;
  int shown = 0;
  for (int r = blockFirst_; r < blockEnd_; r++) {
    if (slot(r).isOpen()) continue;
    if (shown++ < 16) missing += (missing.empty() ? "" : ",") + std::to_string(r);
  }
  if (shown > 16) missing += ",...";
  if (nRoots_ > 1 && !haveNextFirst_)
    missing += std::string(missing.empty() ? "" : "; ") + "and rank " +
               std::to_string(bootstrap::rootBlock((rootIndex_ + 1) % nRoots_, nranks_, nRoots_).first) +
               " (first of the next root's block) did not report";
  char why[512];
  snprintf(why, sizeof(why),
           "bootstrap root %s timed out after %ld s: only %d of %d ranks arrived (missing ranks %s); check that every "
           "rank calls init with the same id, or raise UNICCL_BOOTSTRAP_TIMEOUT",
           address_.toString().c_str(), (long)(timeoutMs_ / 1000), arrived_, blockEnd_ - blockFirst_, missing.c_str());
  WARN("%s", why);
  tellWaitingRanks(ncclRemoteError, why);
}

void RootServer::tellWaitingRanks(ncclResult_t code, const char* why) {
  char body[sizeof(int32_t) + 512];
  int32_t c = code;
  memcpy(body, &c, sizeof(c));
  size_t len = strnlen(why, 511);
  memcpy(body + sizeof(c), why, len);
  body[sizeof(c) + len] = '\0';
  // Best effort: a rank the message does not reach sees its connection close.
  for (auto& s : ranks_)
    if (s.isOpen())
      (void)bootstrap::sendMessage(s, magic_, bootstrap::kMsgRootError, 0, body, sizeof(c) + len + 1,
                                   deadlineAfterMs(500), nullptr);
}

// ------------------------------------------------------------------ registry

struct RootThread {
  std::unique_ptr<RootServer> server;
  std::thread thread;
};

class Registry {
 public:
  ~Registry() {
    std::lock_guard<std::mutex> lock(mutex_);
    forgetInheritedLocked();
    for (auto& r : roots_) r->server->requestStop();
    for (auto& r : roots_)
      if (r->thread.joinable()) r->thread.join();
    roots_.clear();
  }

  void add(std::unique_ptr<RootThread> r) {
    std::lock_guard<std::mutex> lock(mutex_);
    forgetInheritedLocked();
    roots_.push_back(std::move(r));
  }

  void reap() {
    std::vector<std::unique_ptr<RootThread>> done;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      forgetInheritedLocked();
      for (size_t i = 0; i < roots_.size();) {
        if (roots_[i]->server->finished()) {
          done.push_back(std::move(roots_[i]));
          roots_.erase(roots_.begin() + i);
        } else {
          i++;
        }
      }
    }
    for (auto& r : done) r->thread.join();
  }

  size_t count() {
    std::lock_guard<std::mutex> lock(mutex_);
    forgetInheritedLocked();
    return roots_.size();
  }

  // 1: a root of this process accepts on `addr`; 0: none; -1: one is finishing.
  int stateFor(const SocketAddress& addr) {
    std::lock_guard<std::mutex> lock(mutex_);
    forgetInheritedLocked();
    int state = 0;
    for (auto& r : roots_) {
      if (!(r->server->address() == addr) || r->server->finished()) continue;
      if (r->server->accepting()) return 1;
      state = -1;
    }
    return state;
  }

  std::mutex& startMutex() { return startMutex_; }

 private:
  // After fork the child has copies of the root objects but not their threads:
  // joining them would be undefined. Close the fd copies and forget (leak) them.
  void forgetInheritedLocked() {
    pid_t pid = getpid();
    if (pid == owner_) return;
    for (auto& r : roots_) {
      r->server->closeInheritedListener();
      (void)r.release();
    }
    roots_.clear();
    owner_ = pid;
  }

  std::mutex mutex_;
  std::mutex startMutex_;  // serializes startRootIfAbsent's check-then-bind
  pid_t owner_ = getpid();
  std::vector<std::unique_ptr<RootThread>> roots_;
};

Registry& registry() {
  static Registry r;
  return r;
}

[[nodiscard]] ncclResult_t launch(Socket listener, const AuthSecret& secret, SocketAddress* bound) {
  auto rt = std::make_unique<RootThread>();
  SocketAddress addr = listener.address();
  rt->server = std::make_unique<RootServer>(std::move(listener), secret, bootstrap::timeoutMs());
  rt->server->setAddress(addr);
  RootServer* server = rt->server.get();
  try {
    rt->thread = std::thread([server] { server->run(); });
  } catch (const std::exception& e) {
    WARN("Bootstrap: cannot start the root thread: %s", e.what());
    return ncclSystemError;
  }
  if (bound) *bound = addr;
  registry().add(std::move(rt));
  return ncclSuccess;
}

}  // namespace

ncclResult_t startRoot(const SocketAddress& bindAddr, const AuthSecret& secret, SocketAddress* bound) {
  Socket listener;
  UCHECK(listener.listen(bindAddr));
  return launch(std::move(listener), secret, bound);
}

ncclResult_t startRootIfAbsent(const SocketAddress& addr, const AuthSecret& secret) {
  std::lock_guard<std::mutex> lock(registry().startMutex());
  int state = registry().stateFor(addr);
  if (state == 1) return ncclSuccess;
  // A previous rendezvous on this address is sending its last replies: let it
  // finish so its listener frees the port.
  if (state == -1) {
    for (int i = 0; i < 2000 && registry().stateFor(addr) == -1; i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    reapFinishedRoots();
  }
  Socket listener;
  int bindErrno = 0;
  if (listener.listen(addr, 1024, &bindErrno) != ncclSuccess) {
    if (bindErrno == EADDRINUSE || bindErrno == EADDRNOTAVAIL) {
      INFO(kSubsysBootstrap | kSubsysInit, "Bootstrap: %s is %s; assuming the root runs there",
           addr.toString().c_str(), bindErrno == EADDRINUSE ? "in use by another process" : "not a local address");
      return ncclSuccess;
    }
    WARN("Bootstrap: cannot listen on NCCL_COMM_ID address %s: %s", addr.toString().c_str(), strerror(bindErrno));
    return ncclSystemError;
  }
  INFO(kSubsysBootstrap | kSubsysInit, "Bootstrap: root started on NCCL_COMM_ID address %s", addr.toString().c_str());
  return launch(std::move(listener), secret, nullptr);
}

void reapFinishedRoots() { registry().reap(); }

size_t rootThreadCount() { return registry().count(); }

bool waitForRoots(int64_t timeoutMs) {
  Deadline deadline = deadlineAfterMs(timeoutMs);
  for (;;) {
    reapFinishedRoots();
    if (rootThreadCount() == 0) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace uniccl
