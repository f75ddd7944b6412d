// The process-wide liveness monitor (peer_liveness.h): one thread polls the
// links of every monitored communicator, sends heartbeats on them, and turns
// closed or silent links and the peers' notices into reports.
//
// Locking: the registry lock is held while the thread reads, writes or
// closes links and while it calls sinks; stop() takes it to remove a link
// set, so a set (and its owner) is never touched after stop() returned. The
// thread waits in poll() without the lock; a change of the registry (its
// generation) makes it discard that poll's results. Reports are logged
// after the lock is released (the logger's own lock is held across fork).
//
// Fork: a child has none of the parent's threads. Its copies of the link
// fds would keep the parent's connections open after the parent died (the
// peers would never see them close), so the child points them at /dev/null
// (the fd numbers stay owned by the parent's objects) and forgets the sets.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/liveness/liveness_wire.h"
#include "common/liveness/peer_liveness.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

using liveness::Msg;

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Report {
  std::string text;
  bool warn;   // the set's first loss: WARN; later ones (peers aborting in turn): INFO
};

struct Monitor {
  std::mutex mu;
  std::vector<PeerLiveness*> sets;
  uint64_t generation = 0;
  std::thread* thread = nullptr;   // leaked, never joined, in a forked child
  uint64_t epoch = 0;              // a thread runs while this is the value it started with
  int wakeFd = -1;                 // the running thread's eventfd (it closes it when it ends)
  bool hooksInstalled = false;
};

Monitor& mon() {
  // Never destroyed: link sets may be stopped during exit, after static destructors.
  static Monitor* m = new Monitor();
  return *m;
}

void wake(Monitor& m) {
  if (m.wakeFd < 0) return;
  uint64_t one = 1;
  ssize_t n = write(m.wakeFd, &one, sizeof(one));
  (void)n;   // a counter that is already nonzero wakes the thread too
}

void lockForFork() { mon().mu.lock(); }
void unlockInParent() { mon().mu.unlock(); }
void forgetInChild();   // needs the loop's access to the links: below

}  // namespace

// Everything that reads or changes a PeerLiveness's links (its friend).
class LivenessLoop {
 public:
  using Link = PeerLiveness::Link;

  LivenessLoop(Monitor& m, int wakeFd) : m_(m), wakeFd_(wakeFd) {}

  // The poll set: the wake fd, then every open link.
  void pollSet(std::vector<pollfd>* fds, std::vector<std::pair<PeerLiveness*, int>>* who) const {
    fds->clear();
    who->clear();
    fds->push_back(pollfd{wakeFd_, POLLIN, 0});
    who->emplace_back(nullptr, -1);
    for (PeerLiveness* p : m_.sets) {
      for (int i = 0; i < 2; i++) {
        const Link& l = p->links_[i];
        if (!l.sock.isOpen()) continue;
        fds->push_back(pollfd{l.sock.fd(), (short)(POLLIN | (l.out.empty() ? 0 : POLLOUT)), 0});
        who->emplace_back(p, i);
      }
    }
  }

  // One round, lock held: what the last poll saw (valid: the registry did not
  // change since), then heartbeats and silence checks.
  void process(const std::vector<pollfd>& fds, const std::vector<std::pair<PeerLiveness*, int>>& who, bool valid) {
    const int64_t now = nowMs();
    if (valid) {
      for (size_t i = 1; i < fds.size(); i++) {
        if (fds[i].revents == 0) continue;
        PeerLiveness* p = who[i].first;
        Link& l = p->links_[who[i].second];
        if (!l.sock.isOpen()) continue;
        if (fds[i].revents & (POLLIN | POLLERR | POLLHUP)) readLink(p, who[i].second, now);
        if (l.sock.isOpen() && (fds[i].revents & POLLOUT)) flush(l);
      }
    }
    for (PeerLiveness* p : m_.sets) {
      const int64_t timeout = p->timeoutMs_;
      for (int i = 0; i < 2; i++) {
        Link& l = p->links_[i];
        if (!l.sock.isOpen() || timeout <= 0) continue;
        if (now - l.lastRecvMs > timeout) {
          lose(p, i, liveness::kSilent);
          continue;
        }
        if (now - l.lastSendMs >= timeout / 4 && l.out.empty()) send(l, liveness::makeMsg(liveness::kHeartbeat, 0));
      }
    }
  }

  // Milliseconds until the next heartbeat or silence check is due (-1: none).
  int nextDueMs() const {
    const int64_t now = nowMs();
    int64_t due = -1;
    for (PeerLiveness* p : m_.sets) {
      const int64_t timeout = p->timeoutMs_;
      if (timeout <= 0) continue;
      for (int i = 0; i < 2; i++) {
        const Link& l = p->links_[i];
        if (!l.sock.isOpen()) continue;
        int64_t t = std::min(l.lastSendMs + timeout / 4, l.lastRecvMs + timeout + 1) - now;
        t = std::max<int64_t>(t, 0);
        if (due < 0 || t < due) due = t;
      }
    }
    return (int)std::min<int64_t>(due, 60000);
  }

  std::vector<Report> takeReports() { return std::move(reports_); }

  // start(): the links begin their clocks now.
  static void arm(PeerLiveness* p) {
    const int64_t now = nowMs();
    for (Link& l : p->links_) l.lastRecvMs = l.lastSendMs = now;
  }

  // stop(): the last words (leaving / aborted), sent while the link is still
  // the caller's alone; bounded (the socket buffer takes 16 bytes unless the
  // peer stopped reading long ago).
  static void sayGoodbye(PeerLiveness* p, bool orderly, int unreachable) {
    const Msg msg = liveness::makeMsg(orderly ? liveness::kLeaving : liveness::kAborted, p->rank_);
    const bool cause = !orderly && unreachable >= 0 && unreachable < p->nranks_ && unreachable != p->rank_ &&
                       (p->gone_.empty() || !p->gone_[unreachable]);
    const Msg notice = liveness::makeMsg(liveness::kLost, unreachable, liveness::kUnreachable);
    for (Link& l : p->links_) {
      if (!l.sock.isOpen()) continue;
      if (cause && l.peer != unreachable) lastWords(l, notice);
      lastWords(l, msg);
      l.sock.close();
      l.out.clear();
    }
  }

  // One message on a link about to close, without a WARN when the peer is
  // already gone (its loss is reported anyway, and a WARN here would become
  // the aborting caller's last error).
  static void lastWords(Link& l, const Msg& msg) {
    const char* p = reinterpret_cast<const char*>(&msg);
    size_t done = 0;
    const Deadline deadline = deadlineAfterMs(100);
    while (done < sizeof(msg) && Clock::now() < deadline) {
      int err = 0;
      const ssize_t n = l.sock.trySend(p + done, sizeof(msg) - done, &err);
      if (n < 0) return;
      done += (size_t)n;
      if (done < sizeof(msg)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  static void pointAtDevNull(PeerLiveness* p, int devNull) {
    for (Link& l : p->links_)
      if (l.sock.isOpen() && devNull >= 0) dup3(devNull, l.sock.fd(), O_CLOEXEC);
  }

 private:
  void readLink(PeerLiveness* p, int side, int64_t now) {
    Link& l = p->links_[side];
    for (int rounds = 0; rounds < 64 && l.sock.isOpen(); rounds++) {
      int err = 0;
      ssize_t n = l.sock.tryRecv(l.in + l.inBytes, sizeof(l.in) - l.inBytes, &err);
      if (n < 0) {
        lose(p, side, liveness::kClosed);
        return;
      }
      if (n == 0) return;
      l.lastRecvMs = now;
      l.inBytes += (size_t)n;
      if (l.inBytes < sizeof(Msg)) continue;
      Msg msg;
      memcpy(&msg, l.in, sizeof(msg));
      l.inBytes = 0;
      handle(p, side, msg);
    }
  }

  void handle(PeerLiveness* p, int side, const Msg& msg) {
    Link& l = p->links_[side];
    if (msg.check != liveness::kCheck) {
      lose(p, side, liveness::kClosed);   // not our protocol any more: the link is worth nothing
      return;
    }
    switch (msg.type) {
      case liveness::kHeartbeat: return;
      case liveness::kLeaving:
        INFO(kSubsysInit, "Liveness: rank %d: rank %d destroys its communicator (not a loss)", p->rank_, l.peer);
        l.sock.close();
        l.out.clear();
        return;
      case liveness::kAborted: lose(p, side, liveness::kAbortedIt); return;
      case liveness::kLost:
        if (msg.rank >= 0 && msg.rank < p->nranks_) lost(p, msg.rank, msg.reason, l.peer, 1 - side);
        return;
      default: lose(p, side, liveness::kClosed); return;
    }
  }

  // The link on `side` ended for `reason`: its peer is lost.
  void lose(PeerLiveness* p, int side, uint32_t reason) {
    Link& l = p->links_[side];
    l.sock.close();
    l.out.clear();
    l.inBytes = 0;
    lost(p, l.peer, reason, -1, -1);
  }

  // Rank `rank` is lost (learned from rank `via`; -1: seen here). The first
  // notice of it goes on along link `forward` (-1: both).
  void lost(PeerLiveness* p, int rank, uint32_t reason, int via, int forward) {
    if (p->gone_[rank]) return;
    p->gone_[rank] = 1;
    const bool first = !p->reported_;
    p->reported_ = true;
    std::string text = describe(p, rank, reason, via);
    if (p->sink_ != nullptr) p->sink_->peerLost(rank, text, first, reason == liveness::kAbortedIt);
    reports_.push_back(Report{"Liveness: rank " + std::to_string(p->rank_) + " of " + std::to_string(p->nranks_) +
                                  ": " + text,
                              first});
    const Msg notice = liveness::makeMsg(liveness::kLost, rank, reason);
    for (int i = 0; i < 2; i++)
      if ((forward < 0 || forward == i) && p->links_[i].peer != rank) send(p->links_[i], notice);
  }

  static std::string describe(const PeerLiveness* p, int rank, uint32_t reason, int via) {
    std::string who = rank < (int)p->names_.size() ? p->names_[rank] : "rank " + std::to_string(rank);
    std::string why;
    switch (reason) {
      case liveness::kClosed: why = " is gone: its connection closed (the process ended or was killed)"; break;
      case liveness::kSilent:
        why = " is gone: nothing came from it for " + std::to_string(p->timeoutMs_ / 1000.0).substr(0, 5) +
              " s (UNICCL_PEER_TIMEOUT: a hung process or host, or a broken network)";
        break;
      case liveness::kAbortedIt: why = " aborted its communicator (ncclCommAbort, or its init failed)"; break;
      case liveness::kUnreachable: why = " is unreachable: a network transfer to it failed"; break;
      default: why = " is gone"; break;
    }
    std::string text = who + why;
    if (via >= 0) text += " (reported by rank " + std::to_string(via) + ")";
    return text;
  }

  void send(Link& l, const Msg& msg) {
    if (!l.sock.isOpen()) return;
    // A peer that reads nothing is caught by the silence check: bound what waits for it.
    if (l.out.size() < 64 * 1024) l.out.append(reinterpret_cast<const char*>(&msg), sizeof(msg));
    flush(l);
  }

  void flush(Link& l) {
    while (!l.out.empty() && l.sock.isOpen()) {
      int err = 0;
      ssize_t n = l.sock.trySend(l.out.data(), l.out.size(), &err);
      if (n <= 0) {
        if (n < 0) l.out.clear();   // the read side sees the closed link
        return;
      }
      l.out.erase(0, (size_t)n);
      l.lastSendMs = nowMs();
    }
  }

  Monitor& m_;
  const int wakeFd_;
  std::vector<Report> reports_;
};

namespace {

void forgetInChild() {
  Monitor& m = mon();
  int devNull = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (PeerLiveness* p : m.sets) LivenessLoop::pointAtDevNull(p, devNull);
  if (devNull >= 0) close(devNull);
  m.sets.clear();
  m.generation++;
  m.thread = nullptr;   // the parent's thread: not the child's to join
  m.epoch++;
  if (m.wakeFd >= 0) close(m.wakeFd);
  m.wakeFd = -1;
  m.mu.unlock();
}

// Longest poll: a wake that an exiting predecessor thread read is made up for.
constexpr int kMaxWaitMs = 1000;

void threadMain(uint64_t epoch, int wakeFd) {
  Monitor& m = mon();
  LivenessLoop loop(m, wakeFd);
  std::vector<pollfd> fds;
  std::vector<std::pair<PeerLiveness*, int>> who;
  bool valid = false;
  uint64_t polledGen = 0;
  for (;;) {
    int waitMs;
    std::vector<Report> reports;
    {
      std::lock_guard<std::mutex> lock(m.mu);
      if (m.epoch != epoch) return;
      try {
        loop.process(fds, who, valid && polledGen == m.generation);
        loop.pollSet(&fds, &who);
      } catch (const std::exception& e) {
        // Only allocation can throw here; the next round tries again.
        fds.assign(1, pollfd{wakeFd, POLLIN, 0});
        who.assign(1, {nullptr, -1});
      }
      polledGen = m.generation;
      waitMs = loop.nextDueMs();
      if (waitMs < 0 || waitMs > kMaxWaitMs) waitMs = kMaxWaitMs;
      reports = loop.takeReports();
    }
    for (const Report& r : reports) {
      if (r.warn) WARN("%s", r.text.c_str());
      else INFO(kSubsysInit, "%s", r.text.c_str());
    }
    for (pollfd& f : fds) f.revents = 0;
    int rc = poll(fds.data(), fds.size(), waitMs);
    valid = rc > 0;
    if (rc > 0 && (fds[0].revents & POLLIN)) {
      uint64_t count;
      ssize_t n = read(wakeFd, &count, sizeof(count));
      (void)n;
    }
  }
}

void threadEntry(uint64_t epoch, int wakeFd) {
  try {
    threadMain(epoch, wakeFd);
  } catch (...) {
    // Nothing in the loop is expected to throw past its own handler; a
    // library thread must never end the process.
    WARN("Liveness: the monitor thread stopped on an unexpected exception; dead peers are found by the watchdog now");
  }
  close(wakeFd);
}

// Takes the thread out of the registry (lock held) for joining outside it.
std::thread* detachLocked(Monitor& m) {
  std::thread* t = m.thread;
  m.thread = nullptr;
  if (t != nullptr) {
    m.epoch++;
    wake(m);
    m.wakeFd = -1;   // the thread's, closed by it
  }
  return t;
}

void joinAndDelete(std::thread* t) {
  if (t == nullptr) return;
  if (t->joinable()) t->join();
  delete t;
}

void stopMonitorAtExit() {
  std::thread* t;
  {
    std::lock_guard<std::mutex> lock(mon().mu);
    t = detachLocked(mon());
  }
  joinAndDelete(t);
}

}  // namespace

ncclResult_t PeerLiveness::start(PeerLossSink* sink, int64_t timeoutMs, std::vector<std::string> names) {
  if (monitored_ || nranks_ < 2) {
    WARN("Liveness: start() without links or twice (rank %d of %d)", rank_, nranks_);
    return ncclInternalError;
  }
  sink_ = sink;
  timeoutMs_ = std::max<int64_t>(timeoutMs, 0);
  names_ = std::move(names);
  gone_.assign(nranks_, 0);
  LivenessLoop::arm(this);
  Monitor& m = mon();
  std::lock_guard<std::mutex> lock(m.mu);
  if (!m.hooksInstalled) {
    m.hooksInstalled = true;
    pthread_atfork(lockForFork, unlockInParent, forgetInChild);
    std::atexit(stopMonitorAtExit);
  }
  try {
    m.sets.push_back(this);
  } catch (const std::bad_alloc&) {
    WARN("Liveness: out of host memory");
    return ncclSystemError;
  }
  m.generation++;
  monitored_ = true;
  if (m.thread == nullptr) {
    const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    try {
      if (fd < 0) throw std::runtime_error(std::string("eventfd: ") + strerror(errno));
      m.thread = new std::thread(threadEntry, m.epoch, fd);
      m.wakeFd = fd;
    } catch (const std::exception& e) {
      if (fd >= 0) close(fd);
      m.sets.pop_back();
      m.generation++;
      monitored_ = false;
      WARN("Liveness: cannot start the monitor thread (%s)", e.what());
      return ncclSystemError;
    }
    INFO(kSubsysInit, "Liveness: monitor thread started");
  }
  wake(m);
  return ncclSuccess;
}

void PeerLiveness::stop(bool orderly, int unreachable) {
  std::thread* last = nullptr;
  if (monitored_) {
    Monitor& m = mon();
    std::lock_guard<std::mutex> lock(m.mu);
    auto it = std::find(m.sets.begin(), m.sets.end(), this);
    if (it != m.sets.end()) {
      m.sets.erase(it);
      m.generation++;
      wake(m);
      // Said here, with the lock: the thread is not between reading and
      // closing one of these links, and a forked child's fds are not ours.
      LivenessLoop::sayGoodbye(this, orderly, unreachable);
      if (m.sets.empty()) last = detachLocked(m);
    }
    monitored_ = false;
  } else if (!orderly) {
    // Never monitored (init failed after link()): the neighbours still
    // learn at once that this rank is out.
    LivenessLoop::sayGoodbye(this, false, unreachable);
  }
  for (Link& l : links_) l.sock.close();
  listener_.close();
  joinAndDelete(last);
}

PeerLiveness::~PeerLiveness() { stop(false); }

LivenessStats livenessStatsForTesting() {
  Monitor& m = mon();
  std::lock_guard<std::mutex> lock(m.mu);
  LivenessStats s;
  s.sets = m.sets.size();
  s.threadRunning = m.thread != nullptr;
  return s;
}

}  // namespace uniccl
