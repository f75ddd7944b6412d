#include "common/watchdog/eager_tracker.h"

#include "common/check.h"

namespace uniccl {

ncclResult_t EagerTracker::recordStart(gpu::Stream s) {
  if (nextStart_ == nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    gpu::Event a = nullptr, b = nullptr;
    UCHECK(pool_.get(&a));
    ncclResult_t res = pool_.get(&b);
    if (res != ncclSuccess) {
      pool_.put(a);
      return res;
    }
    nextStart_ = a;
    nextEnd_ = b;
  }
  return gpu::eventRecord(nextStart_, s);
}

ncclResult_t EagerTracker::recordEnd(gpu::Stream s, const WorkDesc& desc) {
  if (nextStart_ == nullptr) return ncclSuccess;   // recordStart failed: nothing to track
  UCHECK(gpu::eventRecord(nextEnd_, s));
  std::lock_guard<std::mutex> lock(mu_);
  push(Entry{nextStart_, nextEnd_, desc});
  nextStart_ = nextEnd_ = nullptr;
  return ncclSuccess;
}

void EagerTracker::push(const Entry& e) {
  if (count_ == ring_.size()) {
    // Grow (doubling, so rare) and unwrap: the queue then starts at 0.
    std::vector<Entry> bigger(ring_.empty() ? 64 : ring_.size() * 2);
    for (size_t i = 0; i < count_; i++) bigger[i] = ring_[(head_ + i) & (ring_.size() - 1)];
    ring_.swap(bigger);
    head_ = 0;
  }
  ring_[(head_ + count_) & (ring_.size() - 1)] = e;
  count_++;
}

TrackerCheck EagerTracker::check(int64_t nowMs, int64_t timeoutMs) {
  TrackerCheck out;
  std::lock_guard<std::mutex> lock(mu_);
  while (count_ > 0) {
    Entry& e = ring_[head_];
    ncclResult_t endState = gpu::eventQuery(e.end);
    if (endState != ncclInProgress) {
      // Completed, or failed: a failure reaches the user through the done
      // events of the launch path; here the launch is simply over.
      pool_.put(e.start);
      pool_.put(e.end);
      head_ = (head_ + 1) & (ring_.size() - 1);
      count_--;
      headRunningSinceMs_ = -1;
      continue;
    }
    if (gpu::eventQuery(e.start) == ncclInProgress) {
      headRunningSinceMs_ = -1;   // still queued behind other work
      break;
    }
    if (headRunningSinceMs_ < 0) headRunningSinceMs_ = nowMs;
    out.elapsedMs = nowMs - headRunningSinceMs_;
    if (timeoutMs > 0 && out.elapsedMs > timeoutMs) {
      out.timedOut = true;
      out.desc = e.desc;
    }
    break;
  }
  return out;
}

size_t EagerTracker::eventsCreated() {
  std::lock_guard<std::mutex> lock(mu_);
  return pool_.created();
}

size_t EagerTracker::inFlight() {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

}  // namespace uniccl
