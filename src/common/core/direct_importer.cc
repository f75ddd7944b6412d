#include "common/core/direct_importer.h"

#include <cinttypes>
#include <system_error>

#include "common/util/debug.h"
#include "common/util/guarded.h"

namespace uniccl {

bool DirectImporter::request(const Request& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return false;
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([this] { run(); });
    } catch (const std::system_error& e) {
      INFO(kSubsysReg, "rank %d: no thread for direct-receive imports (%s): those messages go through slots",
           self_.rank, e.what());
      stopping_ = true;
      return false;
    }
  }
  queue_.push_back(r);
  work_.notify_one();
  return true;
}

void DirectImporter::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) break;
    const Request r = queue_.front();
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    // A failure (an exception in the request) only leaves the view pending.
    (void)runGuarded("direct-receive importer", [&] {
      answer(r);
      return ncclSuccess;
    });
    lock.lock();
    busy_ = false;
    answered_++;
    if (queue_.empty()) idle_.notify_all();
  }
  busy_ = false;
  idle_.notify_all();
}

void DirectImporter::answer(const Request& r) {
  uintptr_t peerBase = 0;
  if (importAtPeer(self_, r.peer, r.allocBase, r.allocBytes, r.vmm, &peerBase) != ncclSuccess) peerBase = 0;
  // A peer that cannot map the allocation is not asked again: its view
  // records 0 (the slots).
  const bool recorded = registry_->withRegistration(r.registration, [&](RegisteredBuffer& reg) {
    for (PeerView& v : reg.views)
      if (v.peer == r.peer && v.allocBase == r.allocBase) {
        v.peerBase = peerBase;
        v.pending = false;
      }
  });
  // Deregistered while the peer mapped it: the peer unmaps it again.
  if (!recorded && peerBase != 0) releaseViews({PeerView{r.peer, r.allocBase, peerBase, false}});
  TRACE(kSubsysReg, "rank %d: rank %d %s allocation %#" PRIxPTR "%s", self_.rank, r.peer,
        peerBase != 0 ? "mapped" : "could not map", r.allocBase, recorded ? "" : " (deregistered meanwhile)");
}

void DirectImporter::releaseViews(const std::vector<PeerView>& views) {
  for (const PeerView& v : views) {
    if (v.peerBase == 0) continue;   // never mapped, or pending (answer() releases it)
    const ncclResult_t res = releaseAtPeer(self_, v.peer, v.allocBase);
    if (res != ncclSuccess)
      INFO(kSubsysReg, "rank %d: rank %d did not confirm unmapping allocation %#" PRIxPTR " (%s)", self_.rank, v.peer,
           v.allocBase, ncclGetErrorString(res));
  }
}

void DirectImporter::waitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return (queue_.empty() && !busy_) || !thread_.joinable(); });
}

void DirectImporter::stop() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
    t = std::move(thread_);
  }
  work_.notify_all();
  if (t.joinable()) t.join();
  idle_.notify_all();
}

uint64_t DirectImporter::answered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return answered_;
}

}  // namespace uniccl
