// The proxy progress thread: takes posted ops, progresses each over the net
// plugin, backs off when nothing moves (spin, then yield, then timed sleeps
// on a condition variable that new work signals).
#include "common/proxy/proxy.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <map>
#include <condition_variable>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <utility>

#include "common/profiler/profiler.h"
#include "common/proxy/ll_lines.h"
#include "common/util/cpu_relax.h"
#include "common/util/debug.h"
#include "common/util/guarded.h"
#include "common/util/knobs.h"

namespace uniccl {

namespace {
using Clock = std::chrono::steady_clock;

inline bool aborted(const ProxyConnection* c) {
  return c->abortFlag != nullptr && __atomic_load_n(c->abortFlag, __ATOMIC_ACQUIRE) != 0;
}
}  // namespace

class Proxy {
 public:
  Proxy()
      : spin_(std::chrono::microseconds(knobInt(Knob::UNICCL_PROXY_SPIN_US))),
        yield_(std::chrono::microseconds(knobInt(Knob::UNICCL_PROXY_YIELD_US))),
        sleep_(std::chrono::microseconds(knobInt(Knob::UNICCL_PROXY_SLEEP_US))) {
    if (sleep_.count() < 1) sleep_ = std::chrono::microseconds(1);
  }

  ncclResult_t start() {
    try {
      thread_ = std::thread([this] { run(); });
    } catch (const std::system_error& e) {
      WARN("proxy: cannot start the progress thread: %s", e.what());
      return ncclSystemError;
    }
    pthread_setname_np(thread_.native_handle(), "uniccl-proxy");
    return ncclSuccess;
  }

  void stopAndJoin() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void post(ProxyOp* op) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      op->next = nullptr;
      if (postedTail_ != nullptr) postedTail_->next = op; else postedHead_ = op;
      postedTail_ = op;
      hasPosted_.store(true, std::memory_order_release);
    }
    cv_.notify_one();
  }

  void addPoller(ProxyPoller* p) {
    {
      std::lock_guard<std::mutex> lk(pollMu_);
      p->next = pollers_;
      pollers_ = p;
      hasPollers_.store(true, std::memory_order_release);
    }
    wake();
  }

  void removePoller(ProxyPoller* p) {
    std::lock_guard<std::mutex> lk(pollMu_);   // the thread calls pollers under it
    for (ProxyPoller** q = &pollers_; *q != nullptr; q = &(*q)->next) {
      if (*q != p) continue;
      *q = p->next;
      break;
    }
    p->next = nullptr;
    hasPollers_.store(pollers_ != nullptr, std::memory_order_release);
  }

  void wake() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      kicked_ = true;
    }
    cv_.notify_one();
  }

 private:
  void run();
  void serve();   // until stop_
  void takePosted();
  void pollPollers(bool* moved);
  void finishAll(ncclResult_t result, int status);
  bool progress(ProxyOp* op, bool* moved);  // true: op finished
  bool progressSend(ProxyOp* op, bool* moved);
  bool progressRecv(ProxyOp* op, bool* moved);
  void countFreedRecvSteps(ProxyOp* op, bool* moved);
  bool fail(ProxyOp* op, ncclResult_t r);
  void finish(ProxyOp* op, int status);
  bool idleWait(Clock::time_point idleSince);  // true: woken by a post or wake()

  std::chrono::microseconds spin_, yield_, sleep_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  ProxyOp* postedHead_ = nullptr;  // under mu_
  ProxyOp* postedTail_ = nullptr;
  bool kicked_ = false;            // under mu_
  std::atomic<bool> hasPosted_{false};
  std::atomic<bool> stop_{false};
  ProxyOp* activeHead_ = nullptr;  // proxy thread only
  ProxyOp* activeTail_ = nullptr;
  std::mutex pollMu_;              // pollers_; held while the thread calls them
  ProxyPoller* pollers_ = nullptr;
  std::atomic<bool> hasPollers_{false};
};

void Proxy::takePosted() {
  ProxyOp* head;
  ProxyOp* tail;
  {
    std::lock_guard<std::mutex> lk(mu_);
    head = postedHead_;
    tail = postedTail_;
    postedHead_ = postedTail_ = nullptr;
    hasPosted_.store(false, std::memory_order_relaxed);
  }
  if (head == nullptr) return;
  if (activeTail_ != nullptr) activeTail_->next = head; else activeHead_ = head;
  activeTail_ = tail;
}

void Proxy::finish(ProxyOp* op, int status) {
  ProxyConnection* c = op->conn;
  if (c->current == op) c->current = nullptr;
  for (void*& e : op->profSteps) {
    profilerStop(op->prof, e);
    e = nullptr;
  }
  profilerStop(op->prof, op->profOp);
  op->profOp = nullptr;
  // Abandoned requests are never tested again; the net frees them when the
  // owner closes the comm (after it saw this op finish).
  for (void*& r : op->requests) r = nullptr;
  void (*fn)(void*, ncclResult_t) = op->onComplete;
  void* arg = op->onCompleteArg;
  ncclResult_t result = op->result;
  op->status.store(status, std::memory_order_release);  // the op is the owner's from here on
  if (fn != nullptr) fn(arg, result);
}

bool Proxy::fail(ProxyOp* op, ncclResult_t r) {
  op->result = r;
  op->conn->error = r;
  return true;
}

bool Proxy::progress(ProxyOp* op, bool* moved) {
  ProxyConnection* c = op->conn;
  if (c->current != op) {
    if (c->current != nullptr) return false;  // an earlier op on this connection still runs
    if (c->error != ncclSuccess) {
      op->result = c->error;
      return true;
    }
    c->current = op;
    op->base = c->step;
    c->step += op->nsteps;
    op->profOp = profilerStartProxyOp(op->prof, op->profParent, op->profChannel, op->profPeer,
                                      (int)std::min<uint64_t>(op->nsteps, INT_MAX),
                                      (int)c->stepBytes,
                                      op->kind == ProxyOpKind::kSend);
    *moved = true;
  }
  if (op->kind == ProxyOpKind::kSend) return progressSend(op, moved);
  return progressRecv(op, moved);
}

bool Proxy::progressSend(ProxyOp* op, bool* moved) {
  ProxyConnection* c = op->conn;
  ConnFifo* f = c->fifo;
  const ProxyNet* net = c->net;
  // Transmit every slot the producer has filled (at most kConnSteps in flight).
  while (op->transmitted < op->nsteps && op->transmitted < op->done + kConnSteps) {
    uint64_t step = op->base + op->transmitted;
    int slot = static_cast<int>(step % kConnSteps);
    const ConnFifoSlot& s = f->slots[slot];
    // An LL step says so in its size alone (it advances no tail) and is
    // there once its lines are; any other step once the tail passed it. A
    // size read before the tail may be older than the step: read it again
    // after (the tail of a later step may have passed an LL step).
    auto isLL = [&](int64_t v) { return c->llStaging != nullptr && v >= 0 && (v & kConnSizeLL) != 0; };
    int64_t raw = connLoadSize(s);
    bool ll = isLL(raw);
    if (!ll) {
      if (!connFifoReady(f, step)) break;
      raw = connLoadSize(s);
      ll = isLL(raw);
    }
    const int64_t size = ll ? raw & ~kConnSizeLL : raw;
    const int64_t slotBytes = ll ? c->llStepBytes : c->stepBytes;
    // The kernels fill staging slots only (NCCL's offset and pointer modes
    // are never produced), an LL step with whole lines.
    if (s.mode != kConnModeNormal || size < 0 || size > slotBytes || size > INT_MAX ||
        (ll && size % kLLLineBytes != 0)) {
      WARN("proxy: send step %lu (slot %d) was published with an invalid slot (mode %d, offset %d, "
           "size %ld, %ld-byte%s slots); the producer must write the slot before advancing tail",
           (unsigned long)step, slot, s.mode, s.offset, (long)size, (long)slotBytes, ll ? " LL" : "");
      return fail(op, ncclInternalError);
    }
    char* ptr = (ll ? c->llStaging : c->staging) + slot * slotBytes;
    if (ll && !llLinesReady(ptr, size, llFlag(step))) break;
    if (op->posted <= op->transmitted) op->posted = op->transmitted + 1;
    void* mh = ll ? c->llMhandle : c->mhandle;
    void* req = nullptr;
    ncclResult_t r = net->isend(c->netComm, ptr, static_cast<int>(size), op->tag, mh, &req);
    if (r != ncclSuccess) {
      WARN("proxy: isend of step %lu (%ld bytes, tag %d) failed: %d", (unsigned long)step, (long)size,
           op->tag, r);
      return fail(op, r);
    }
    if (req == nullptr) break;  // the net is busy: retry on the next pass
    op->requests[slot] = req;
    if (op->profOp != nullptr) {
      op->profSteps[slot] = profilerStartProxyStep(op->prof, op->profOp, (int)(op->transmitted % INT_MAX));
      profilerRecordProxyStep(op->prof, op->profSteps[slot], ncclProfilerProxyStepSendWait, (size_t)size);
    }
    op->transmitted++;
    *moved = true;
  }
  // Complete in order: free the slot, then let the producer reuse it.
  while (op->done < op->transmitted) {
    uint64_t step = op->base + op->done;
    int slot = static_cast<int>(step % kConnSteps);
    int isDone = 0;
    int size = 0;
    ncclResult_t r = net->test(op->requests[slot], &isDone, &size);
    if (r != ncclSuccess) {
      WARN("proxy: test of send step %lu failed: %d", (unsigned long)step, r);
      return fail(op, r);
    }
    if (!isDone) break;
    op->requests[slot] = nullptr;
    profilerStop(op->prof, op->profSteps[slot]);
    op->profSteps[slot] = nullptr;
    connFifoFree(f, step);
    op->done++;
    *moved = true;
  }
  return op->done == op->nsteps;
}

bool Proxy::progressRecv(ProxyOp* op, bool* moved) {
  ProxyConnection* c = op->conn;
  ConnFifo* f = c->fifo;
  const ProxyNet* net = c->net;
  const int postBytes = static_cast<int>(c->stepBytes);
  // A failure still publishes the steps that arrived before it (below).
  ncclResult_t failed = ncclSuccess;
  countFreedRecvSteps(op, moved);
  // Post receives into slots the consumer has freed.
  // A slot is reposted only after its previous step was counted done (not
  // merely freed: head may move between the count and this loop).
  while (op->posted < op->nsteps && op->posted < op->done + kConnSteps) {
    uint64_t step = op->base + op->posted;
    if (!connFifoCanFill(f, step)) break;
    int slot = static_cast<int>(step % kConnSteps);
    void* ptr = c->staging + slot * c->stepBytes;
    int size = postBytes;
    int tag = op->tag;
    void* mh = c->mhandle;
    void* req = nullptr;
    ncclResult_t r = net->irecv(c->netComm, 1, &ptr, &size, &tag, &mh, &req);
    if (r != ncclSuccess) {
      if (r == ncclRemoteError) INFO(kSubsysProxy, "proxy: irecv of step %lu ended: the peer closed", (unsigned long)step);
      else WARN("proxy: irecv of step %lu (%d bytes, tag %d) failed: %d", (unsigned long)step, size, tag, r);
      failed = r;
      break;
    }
    if (req == nullptr) break;
    op->requests[slot] = req;
    if (op->profOp != nullptr) {
      op->profSteps[slot] = profilerStartProxyStep(op->prof, op->profOp, (int)(op->posted % INT_MAX));
      profilerRecordProxyStep(op->prof, op->profSteps[slot], ncclProfilerProxyStepRecvWait, (size_t)size);
    }
    op->posted++;
    *moved = true;
  }
  // Receives complete in order; flush the ones that landed in GPU memory.
  while (op->received < op->posted) {
    uint64_t step = op->base + op->received;
    int slot = static_cast<int>(step % kConnSteps);
    int isDone = 0;
    int size = 0;
    ncclResult_t r = net->test(op->requests[slot], &isDone, &size);
    if (r != ncclSuccess) {
      // ncclRemoteError: the peer went away (its destroy looks the same);
      // the op's owner decides whether that is an error worth a WARN.
      if (r == ncclRemoteError) INFO(kSubsysProxy, "proxy: receive step %lu ended: the peer closed", (unsigned long)step);
      else WARN("proxy: test of receive step %lu failed: %d", (unsigned long)step, r);
      if (failed == ncclSuccess) failed = r;
      break;
    }
    if (!isDone) break;
    op->requests[slot] = nullptr;
    if (size < 0 || size > postBytes) {
      WARN("proxy: receive step %lu got %d bytes into a %d-byte slot", (unsigned long)step, size, postBytes);
      return fail(op, ncclInternalError);
    }
    op->sizes[slot] = size;
    // An LL consumer polls the LL slot, not the tail: this step's LL lines go there too.
    if (c->llStaging != nullptr && !c->needFlush && size > 0 && size % kLLLineBytes == 0 && size <= c->llStepBytes) {
      const char* got = c->staging + slot * c->stepBytes;
      if (llLinesReady(got, size, llFlag(step))) copyLLLines(c->llStaging + slot * c->llStepBytes, got, size);
    }
    profilerRecordProxyStep(op->prof, op->profSteps[slot],
                            c->needFlush && size > 0 ? ncclProfilerProxyStepRecvFlushWait
                                                     : ncclProfilerProxyStepRecvGPUWait,
                            (size_t)size);
    if (c->needFlush && size > 0) {
      void* ptr = c->staging + slot * c->stepBytes;
      void* mh = c->mhandle;
      void* freq = nullptr;
      r = net->iflush(c->netComm, 1, &ptr, &size, &mh, &freq);
      if (r != ncclSuccess) {
        WARN("proxy: iflush of receive step %lu failed: %d", (unsigned long)step, r);
        return fail(op, r);
      }
      op->requests[slot] = freq;  // nullptr: the net needed no flush
    }
    op->received++;
    *moved = true;
  }
  // Publish to the consumer once the flush (if any) completed.
  while (op->transmitted < op->received) {
    uint64_t step = op->base + op->transmitted;
    int slot = static_cast<int>(step % kConnSteps);
    if (op->requests[slot] != nullptr) {
      int isDone = 0;
      ncclResult_t r = net->test(op->requests[slot], &isDone, nullptr);
      if (r != ncclSuccess) {
        WARN("proxy: test of the flush of receive step %lu failed: %d", (unsigned long)step, r);
        return fail(op, r);
      }
      if (!isDone) break;
      op->requests[slot] = nullptr;
    }
    // Normal mode: the consumer knows its own address of the staging slot.
    if (c->needFlush && op->sizes[slot] > 0)
      profilerRecordProxyStep(op->prof, op->profSteps[slot], ncclProfilerProxyStepRecvGPUWait, (size_t)op->sizes[slot]);
    connFifoPublish(f, step, op->sizes[slot], static_cast<int32_t>(slot * c->stepBytes));
    op->transmitted++;
    *moved = true;
  }
  if (failed != ncclSuccess) return fail(op, failed);
  countFreedRecvSteps(op, moved);
  return op->done == op->nsteps;
}

// The consumer frees slots by advancing head: count them done (and end their
// ProxyStep events) before their slots are reposted.
void Proxy::countFreedRecvSteps(ProxyOp* op, bool* moved) {
  const uint64_t head = connLoadAcquire(&op->conn->fifo->head);
  while (op->done < op->transmitted && head > op->base + op->done) {
    const int slot = static_cast<int>((op->base + op->done) % kConnSteps);
    profilerStop(op->prof, op->profSteps[slot]);
    op->profSteps[slot] = nullptr;
    op->done++;
    *moved = true;
  }
}

bool Proxy::idleWait(Clock::time_point idleSince) {
  Clock::duration idle = Clock::now() - idleSince;
  if (idle < spin_) {
    // One pause, then the next pass: a pause took 19-30 ns on the machines
    // measured, so a spin of 64 made an idle pass 1.1-1.9 us longer than its
    // work (0.3-0.6 us), and a small step that arrived meanwhile waited
    // about half of that.
    cpuRelax();
    return false;
  }
  if (idle < spin_ + yield_) {
    sched_yield();
    return false;
  }
  std::unique_lock<std::mutex> lk(mu_);
  auto woken = [this] { return kicked_ || stop_.load(std::memory_order_relaxed) || postedHead_ != nullptr; };
  if (activeHead_ == nullptr && !hasPollers_.load(std::memory_order_acquire)) {
    cv_.wait(lk, woken);  // nothing to progress: sleep until posted or stopped
  } else {
    cv_.wait_for(lk, sleep_, woken);  // ops wait on their producers/consumers: poll every sleep_
  }
  const bool kicked = kicked_ || postedHead_ != nullptr;
  kicked_ = false;
  return kicked;
}

void Proxy::run() {
  // What escapes a pass outside an op's or a poller's own progress (an
  // owner's completion callback threw) ends the ops in flight with that
  // error, and the thread serves on.
  for (;;) {
    const ncclResult_t r = runGuarded("proxy thread", [this] { serve(); });
    if (r == ncclSuccess) break;   // stopped
    finishAll(r, kProxyOpFailed);
  }
  // Shutdown with ops left: their owners are gone or aborting; finish them so nobody waits forever.
  takePosted();
  finishAll(ncclRemoteError, kProxyOpAborted);
}

void Proxy::finishAll(ncclResult_t result, int status) {
  while (activeHead_ != nullptr) {
    ProxyOp* op = activeHead_;
    activeHead_ = op->next;
    op->next = nullptr;
    op->result = result;
    finish(op, status);
  }
  activeTail_ = nullptr;
}

void Proxy::pollPollers(bool* moved) {
  std::lock_guard<std::mutex> lk(pollMu_);
  for (ProxyPoller** q = &pollers_; *q != nullptr;) {
    ProxyPoller* p = *q;
    bool pollMoved = false;
    const ncclResult_t r = runGuarded("proxy thread (poller)", [&] { pollMoved = p->poll(p->arg); });
    if (r == ncclSuccess) {
      if (pollMoved) *moved = true;
      q = &p->next;
      continue;
    }
    // Never called again; its owner learns why (and still removes it).
    *q = p->next;
    p->next = nullptr;
    hasPollers_.store(pollers_ != nullptr, std::memory_order_release);
    // A failure callback that throws was logged by runGuarded; the poller is gone either way.
    if (p->fail != nullptr) (void)runGuarded("proxy thread (poller failure)", [&] { p->fail(p->arg, r); });
  }
}

void Proxy::serve() {
  Clock::time_point idleSince{};
  bool idle = false;
  for (;;) {
    if (hasPosted_.load(std::memory_order_acquire)) takePosted();
    bool moved = false;
    ProxyOp* prev = nullptr;
    for (ProxyOp* op = activeHead_; op != nullptr;) {
      ProxyOp* next = op->next;
      int status = kProxyOpPending;
      if (aborted(op->conn)) {
        op->result = ncclRemoteError;
        status = kProxyOpAborted;
      } else {
        // An exception from the net (out of memory, a plugin's bug) fails
        // this op like a transport error: its owner sees the result.
        bool ended = false;
        const ncclResult_t r = runGuarded("proxy thread", [&] { ended = progress(op, &moved); });
        if (r != ncclSuccess) ended = fail(op, r);
        if (ended) status = op->result == ncclSuccess ? kProxyOpDone : kProxyOpFailed;
      }
      if (status != kProxyOpPending) {
        if (prev != nullptr) prev->next = next; else activeHead_ = next;
        if (activeTail_ == op) activeTail_ = prev;
        op->next = nullptr;
        finish(op, status);
        moved = true;
      } else {
        prev = op;
      }
      op = next;
    }
    if (hasPollers_.load(std::memory_order_acquire)) pollPollers(&moved);
    if (stop_.load(std::memory_order_acquire)) return;
    if (moved) {
      idle = false;
      continue;
    }
    if (!idle) {
      idle = true;
      idleSince = Clock::now();
    }
    // A wake (a kernel was launched) starts the back-off over: its steps
    // follow within microseconds, and a sleeping proxy would add up to
    // UNICCL_PROXY_SLEEP_US to each.
    if (idleWait(idleSince)) idle = false;
  }
}

// ---- the instances: the process-wide one, and those of a group ----

namespace {
struct Instance {
  Proxy* proxy = nullptr;
  int refs = 0;
};
std::mutex gMu;
// Key nullptr: the process-wide threads; any other key: the threads of the
// refs acquired with it. One instance per key and lane.
using InstanceKey = std::pair<const void*, ProxyLane>;
std::map<InstanceKey, Instance>& instances() {
  static std::map<InstanceKey, Instance>& m = *new std::map<InstanceKey, Instance>();   // used until exit
  return m;
}
}  // namespace

ncclResult_t ProxyRef::acquire(ProxyRef* out, const void* group, ProxyLane lane) {
  if (out == nullptr) {
    WARN("proxy: acquire needs a ProxyRef to fill");
    return ncclInvalidArgument;
  }
  out->release();
  if (lane == ProxyLane::kReceive && knobInt(Knob::UNICCL_PROXY_RECV_THREAD) == 0) lane = ProxyLane::kMain;
  const InstanceKey key{group, lane};
  std::lock_guard<std::mutex> lk(gMu);
  Instance& in = instances()[key];
  if (in.proxy == nullptr) {
    Proxy* p = new (std::nothrow) Proxy();
    if (p == nullptr) {
      WARN("proxy: out of memory creating the progress thread state");
      instances().erase(key);
      return ncclSystemError;
    }
    if (ncclResult_t r = p->start(); r != ncclSuccess) {
      delete p;
      instances().erase(key);
      return r;
    }
    in.proxy = p;
    INFO(kSubsysProxy, "proxy progress thread started%s%s", lane == ProxyLane::kReceive ? " (receives)" : "",
         group == nullptr ? "" : " (a group's own)");
  }
  in.refs++;
  out->p_ = in.proxy;
  out->group_ = group;
  out->lane_ = lane;
  return ncclSuccess;
}

void ProxyRef::release() {
  if (p_ == nullptr) return;
  p_ = nullptr;
  std::lock_guard<std::mutex> lk(gMu);
  auto it = instances().find(InstanceKey{group_, lane_});
  if (--it->second.refs > 0) return;
  Proxy* p = it->second.proxy;
  instances().erase(it);
  p->stopAndJoin();
  delete p;
  INFO(kSubsysProxy, "proxy progress thread stopped%s%s", lane_ == ProxyLane::kReceive ? " (receives)" : "",
       group_ == nullptr ? "" : " (a group's own)");
}

ProxyRef& ProxyRef::operator=(ProxyRef&& o) noexcept {
  if (this != &o) {
    release();
    p_ = o.p_;
    group_ = o.group_;
    lane_ = o.lane_;
    o.p_ = nullptr;
  }
  return *this;
}

ncclResult_t ProxyRef::post(ProxyOp* op) {
  if (p_ == nullptr) {
    WARN("proxy: post on a ProxyRef that holds no proxy (acquire it first)");
    return ncclInvalidUsage;
  }
  if (op == nullptr || op->conn == nullptr) {
    WARN("proxy: post needs an op with a connection");
    return ncclInvalidArgument;
  }
  const ProxyConnection* c = op->conn;
  const ProxyNet* n = c->net;
  if (n == nullptr || n->isend == nullptr || n->irecv == nullptr || n->test == nullptr ||
      (c->needFlush && n->iflush == nullptr)) {
    WARN("proxy: the op's connection has no net plugin table (or misses isend/irecv/test/iflush)");
    return ncclInvalidArgument;
  }
  if (c->netComm == nullptr || c->fifo == nullptr || c->staging == nullptr || c->stepBytes <= 0 ||
      c->stepBytes > INT_MAX / kConnSteps) {
    WARN("proxy: the op's connection is not set up (netComm %p, fifo %p, staging %p, stepBytes %ld)",
         c->netComm, static_cast<void*>(c->fifo), static_cast<void*>(c->staging), (long)c->stepBytes);
    return ncclInvalidArgument;
  }
  // LL messages are received into staging slots first: they must fit there.
  if (c->llStaging != nullptr &&
      (c->llStepBytes <= 0 || c->llStepBytes > c->stepBytes || c->llStepBytes % kLLLineBytes != 0)) {
    WARN("proxy: the op's connection has LL slots of %ld bytes: they must be whole %ld-byte lines and no larger "
         "than its %ld-byte staging slots", (long)c->llStepBytes, (long)kLLLineBytes, (long)c->stepBytes);
    return ncclInvalidArgument;
  }
  if (op->kind != ProxyOpKind::kSend && op->kind != ProxyOpKind::kRecv) {
    WARN("proxy: op kind %d is neither send nor recv", static_cast<int>(op->kind));
    return ncclInvalidArgument;
  }
  if (op->nsteps == 0) {
    WARN("proxy: op with no steps");
    return ncclInvalidArgument;
  }
  int expected = op->status.load(std::memory_order_acquire);
  if (expected == kProxyOpPending ||
      !op->status.compare_exchange_strong(expected, kProxyOpPending, std::memory_order_acq_rel)) {
    WARN("proxy: op %p is already posted and not finished", static_cast<void*>(op));
    return ncclInvalidUsage;
  }
  op->base = op->posted = op->received = op->transmitted = op->done = 0;
  op->result = ncclSuccess;
  for (int i = 0; i < kConnSteps; i++) {
    op->requests[i] = nullptr;
    op->sizes[i] = 0;
  }
  p_->post(op);
  return ncclSuccess;
}

void ProxyRef::wake() {
  if (p_ != nullptr) p_->wake();
}

ncclResult_t ProxyRef::addPoller(ProxyPoller* poller) {
  if (p_ == nullptr || poller == nullptr || poller->poll == nullptr) {
    WARN("proxy: addPoller needs an acquired ProxyRef and a poll function");
    return ncclInvalidUsage;
  }
  p_->addPoller(poller);
  return ncclSuccess;
}

void ProxyRef::removePoller(ProxyPoller* poller) {
  if (p_ != nullptr && poller != nullptr) p_->removePoller(poller);
}

int proxyRefCount() {
  std::lock_guard<std::mutex> lk(gMu);
  int refs = 0;
  for (ProxyLane lane : {ProxyLane::kMain, ProxyLane::kReceive}) {
    auto it = instances().find(InstanceKey{nullptr, lane});
    if (it != instances().end()) refs += it->second.refs;
  }
  return refs;
}

bool proxyThreadRunning() {
  std::lock_guard<std::mutex> lk(gMu);
  return instances().count(InstanceKey{nullptr, ProxyLane::kMain}) != 0 ||
         instances().count(InstanceKey{nullptr, ProxyLane::kReceive}) != 0;
}

}  // namespace uniccl
