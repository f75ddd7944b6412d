#include "common/bootstrap/link_listener.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/bootstrap/listener_loop.h"
#include "common/util/debug.h"

namespace uniccl {
namespace bootstrap {
namespace {

// A peer answers the challenge within milliseconds (and reconnects when it
// was dropped); it sends its link hello right after the proof.
constexpr int64_t kMaxAuthMs = 2000;
constexpr int64_t kMaxLinkHelloMs = 5000;
constexpr int kWaitSliceMs = 50;  // how often take() looks at the abort flag

int kindKey(LinkHello kind) { return kind == LinkHello::kRing ? 0 : 1; }
const char* kindName(LinkHello kind) { return kind == LinkHello::kRing ? "ring" : "p2p"; }

}  // namespace

ncclResult_t LinkListener::start(Socket listener, const AuthSecret& secret, uint64_t magic, int rank, int nranks) {
  listener_ = std::move(listener);
  address_ = listener_.address();
  secret_ = secret;
  magic_ = magic;
  rank_ = rank;
  nranks_ = nranks;
  timeoutMs_ = bootstrap::timeoutMs();
  wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeFd_ < 0) {
    WARN("Bootstrap: rank %d: eventfd failed: %s", rank, strerror(errno));
    return ncclSystemError;
  }
  owner_ = (int)getpid();
  try {
    thread_ = std::make_unique<std::thread>([this] { run(); });
  } catch (const std::exception& e) {
    WARN("Bootstrap: rank %d: cannot start the listener thread: %s", rank, e.what());
    return ncclSystemError;
  }
  return ncclSuccess;
}

LinkListener::~LinkListener() { stop(); }

void LinkListener::stop() {
  if (thread_) {
    if ((int)getpid() == owner_) {
      stop_.store(true);
      uint64_t one = 1;
      ssize_t n = write(wakeFd_, &one, sizeof(one));
      (void)n;  // the poll also wakes within its slice
      thread_->join();
      thread_.reset();
    } else {
      // A forked child has a copy of this object but not the thread: joining
      // it would be undefined. Forget it; the fds below are the child's copies.
      (void)thread_.release();
    }
  }
  if (wakeFd_ >= 0) close(wakeFd_);
  wakeFd_ = -1;
  listener_.close();
  std::lock_guard<std::mutex> lock(mutex_);
  ready_.clear();
}

void LinkListener::run() {
  std::string failure;
  try {
    serve();
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "unknown exception";
  }
  if (failure.empty()) return;
  WARN("Bootstrap: rank %d: the link listener on %s failed: %s", rank_, address_.toString().c_str(), failure.c_str());
  std::lock_guard<std::mutex> lock(mutex_);
  failure_ = failure;
  arrived_.notify_all();
}

void LinkListener::serve() {
  ListenerLimits limits;
  limits.capacity = pendingCapacity(32, 8, 128);
  limits.authMs = std::min(timeoutMs_, kMaxAuthMs);
  limits.identifyMs = std::min(timeoutMs_, kMaxLinkHelloMs);
  ListenerLoop loop(&listener_, secret_, kLinkAuthContext,
                    "Bootstrap: rank " + std::to_string(rank_) + " listener " + address_.toString(), limits,
                    [this](PendingConnection& p) { return identify(p); });
  std::vector<pollfd> wake(1);
  while (!stop_.load()) {
    wake[0] = {wakeFd_, POLLIN, 0};
    loop.round(&wake, 200);
  }
}

bool LinkListener::identify(PendingConnection& p) {
  int err = 0;
  while (p.headerHave < sizeof(WireHeader)) {
    ssize_t n = p.sock.tryRecv(reinterpret_cast<char*>(&p.header) + p.headerHave, sizeof(WireHeader) - p.headerHave,
                               &err);
    if (n < 0) {
      WARN("Bootstrap: rank %d: %s closed its link %s before its hello", rank_, p.sock.address().toString().c_str(),
           err ? strerror(err) : "");
      return false;
    }
    if (n == 0) return true;
    p.headerHave += (size_t)n;
  }
  const WireHeader& h = p.header;
  int peer = -1;
  LinkHello kind = classifyLinkHello(h, magic_, nranks_, &peer);
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  if (kind == LinkHello::kInvalid || (kind == LinkHello::kRing && peer != prev)) {
    WARN("Bootstrap: rank %d: dropping a link from %s: not a ring hello from rank %d nor a p2p hello (magic %s, "
         "type %s, tag %u)",
         rank_, p.sock.address().toString().c_str(), prev, h.magic == magic_ ? "ok" : "wrong", msgTypeName(h.type),
         h.tag);
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto key = std::make_pair(kindKey(kind), peer);
  if (ready_.count(key)) {
    WARN("Bootstrap: rank %d: dropping a second %s link from rank %d (%s) while the first is not yet used", rank_,
         kindName(kind), peer, p.sock.address().toString().c_str());
    return false;
  }
  ready_[key] = std::move(p.sock);
  arrived_.notify_all();
  return false;
}

ncclResult_t LinkListener::take(LinkHello kind, int peer, Socket* out, Deadline deadline,
                                const std::atomic<uint32_t>* abortFlag) {
  auto key = std::make_pair(kindKey(kind), peer);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    auto it = ready_.find(key);
    if (it != ready_.end()) {
      *out = std::move(it->second);
      ready_.erase(it);
      return ncclSuccess;
    }
    if (!failure_.empty()) {
      WARN("Bootstrap: rank %d: cannot accept the %s link of rank %d: the listener failed: %s", rank_, kindName(kind),
           peer, failure_.c_str());
      return ncclSystemError;
    }
    if (abortFlag && abortFlag->load(std::memory_order_acquire)) {
      INFO(kSubsysBootstrap, "Bootstrap: rank %d: waiting for the %s link of rank %d: abort requested", rank_,
           kindName(kind), peer);
      return ncclInternalError;
    }
    Deadline now = Clock::now();
    if (now >= deadline) {
      WARN("Bootstrap: rank %d: the %s link of rank %d did not arrive on %s in time", rank_, kindName(kind), peer,
           address_.toString().c_str());
      return ncclRemoteError;
    }
    arrived_.wait_for(lock, std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(kWaitSliceMs)));
  }
}

}  // namespace bootstrap
}  // namespace uniccl
