#include "common/profiler/kernel_ch.h"

#include <algorithm>

namespace uniccl {

namespace {

// The GPU writes these words; the host reads each with an acquire load so
// that a counter it sees implies the timer written before it.
uint64_t loadAcquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

}  // namespace

KernelChTracker::KernelChTracker(ProfilerContext* prof, KernelChRing* rings, int nChannels, int64_t timerRateKHz)
    : prof_(prof), rings_(rings), ticksPerMs_(timerRateKHz > 0 ? (uint64_t)timerRateKHz : 1000000),
      nChannels_(nChannels > 0 ? nChannels : 0),
      issued_(new std::atomic<uint64_t>[(size_t)nChannels_]()),
      seenReported_(new uint64_t[(size_t)nChannels_]()),
      reported_(new std::atomic<uint64_t>[(size_t)nChannels_]()),
      parents_(new void*[(size_t)nChannels_ * kKernelChSlots]()) {}

KernelChTracker::~KernelChTracker() { flush(); }

uint64_t KernelChTracker::issue(int c, void* parentTask) {
  const uint64_t n = issued_[c].load(std::memory_order_relaxed) + 1;   // this thread is the only writer
  if (n - 1 - seenReported_[c] >= (uint64_t)kKernelChSlots) {
    seenReported_[c] = reported_[c].load(std::memory_order_acquire);
    if (n - 1 - seenReported_[c] >= (uint64_t)kKernelChSlots) return 0;   // ring full
  }
  // Free: the poller reported counter n - kKernelChSlots, the slot's last
  // user, before it published reported_ (acquire above or at an earlier call).
  parents_[(size_t)c * kKernelChSlots + n % kKernelChSlots] = parentTask;
  issued_[c].store(n, std::memory_order_release);
  return n;
}

uint64_t KernelChTracker::expectChannels(int lo, int hi, void* parentTask) {
  if (prof_ == nullptr || !prof_->wants(ncclProfileKernelCh)) return 0;
  lo = std::max(lo, 0);
  hi = std::min(hi, std::min(nChannels_, (int)dev::kMaxProfiledChannels) - 1);
  uint64_t mask = 0;
  for (int c = lo; c <= hi; c++)
    if (issue(c, parentTask) != 0) mask |= 1ull << c;
  return mask;
}

uint64_t KernelChTracker::expect(int channel, void* parentTask) {
  if (prof_ == nullptr || !prof_->wants(ncclProfileKernelCh)) return 0;
  if (channel < 0 || channel >= nChannels_) return 0;
  return issue(channel, parentTask);
}

template <typename ReadyFn>
uint64_t KernelChTracker::collect(int c, ReadyFn&& ready, std::vector<Ready>* out) {
  const uint64_t issued = issued_[c].load(std::memory_order_acquire);
  uint64_t r = reported_[c].load(std::memory_order_relaxed);   // only the (serialized) readers write it
  KernelChRing& ring = rings_[c];
  while (r < issued) {
    const uint64_t counter = r + 1;
    const int slot = (int)(counter % kKernelChSlots);
    uint64_t stop = 0;
    if (!ready(ring, slot, counter, &stop)) break;
    out->push_back(Ready{parents_[(size_t)c * kKernelChSlots + slot], c,
                         toNs(__atomic_load_n(&ring.start[slot].timer, __ATOMIC_RELAXED)), stop});
    r = counter;
  }
  // After reading the parents: the launching thread may reuse their slots.
  reported_[c].store(r, std::memory_order_release);
  return issued - r;
}

int KernelChTracker::poll() {
  // Report outside any lock the launch path could wait for (it takes none):
  // the plugin may be slow.
  std::lock_guard<std::mutex> pollLock(pollMutex_);   // one reader at a time (readyScratch_, report order)
  std::vector<Ready>& ready = readyScratch_;
  ready.clear();
  uint64_t left = 0;
  for (int c = 0; c < nChannels_; c++) {
    left += collect(c, [&](const KernelChRing& ring, int slot, uint64_t counter, uint64_t* stop) {
      // The stop stamp is written after the start stamp, by the same thread.
      if (loadAcquire(&ring.stop[slot].counter) != counter) return false;
      if (loadAcquire(&ring.start[slot].counter) != counter) return false;
      *stop = toNs(__atomic_load_n(&ring.stop[slot].timer, __ATOMIC_RELAXED));
      return true;
    }, &ready);
  }
  for (const Ready& r : ready) {
    void* h = profilerStartKernelCh(prof_, r.parent, r.channel, r.start);
    profilerStopKernelCh(prof_, h, r.stop);
  }
  return (int)std::min<uint64_t>(left, (uint64_t)INT32_MAX);
}

void KernelChTracker::flush() {
  std::lock_guard<std::mutex> pollLock(pollMutex_);
  std::vector<Ready>& ready = readyScratch_;
  for (int c = 0; c < nChannels_; c++) {
    ready.clear();
    // Items that started but never stopped (abort): reported with stop 0.
    collect(c, [&](const KernelChRing& ring, int slot, uint64_t counter, uint64_t* stop) {
      if (loadAcquire(&ring.start[slot].counter) != counter) return false;
      *stop = loadAcquire(&ring.stop[slot].counter) == counter
                  ? toNs(__atomic_load_n(&ring.stop[slot].timer, __ATOMIC_RELAXED)) : 0;
      return true;
    }, &ready);
    for (const Ready& r : ready) {
      void* h = profilerStartKernelCh(prof_, r.parent, r.channel, r.start);
      profilerStopKernelCh(prof_, h, r.stop);
    }
    // The rest never started: forgotten.
    reported_[c].store(issued_[c].load(std::memory_order_acquire), std::memory_order_release);
  }
}

}  // namespace uniccl
