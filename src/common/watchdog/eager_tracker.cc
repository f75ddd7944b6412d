#include "common/watchdog/eager_tracker.h"

#include "common/watchdog/gpu_word.h"

namespace uniccl {

void EagerTracker::launched(uint64_t id, unsigned grid, const WorkDesc& desc) {
  if (id == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  push(Entry{id, grid, desc});
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

bool EagerTracker::started(const Entry& e) const { return readGpuWord(&words_->started) >= e.id; }

bool EagerTracker::done(const Entry& e) const {
  for (unsigned b = 0; b < e.grid && b < (unsigned)dev::kMaxChannels; b++)
    if (readGpuWord(&words_->done[b]) < e.id) return false;
  return true;
}

TrackerCheck EagerTracker::check(int64_t nowMs, int64_t timeoutMs) {
  TrackerCheck out;
  std::lock_guard<std::mutex> lock(mu_);
  while (count_ > 0) {
    Entry& e = ring_[head_];
    if (done(e)) {
      head_ = (head_ + 1) & (ring_.size() - 1);
      count_--;
      headRunningSinceMs_ = -1;
      continue;
    }
    if (!started(e)) {
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

size_t EagerTracker::inFlight() {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

}  // namespace uniccl
