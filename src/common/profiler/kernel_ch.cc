#include "common/profiler/kernel_ch.h"

namespace uniccl {

namespace {

// The GPU writes these words; the host reads each with an acquire load so
// that a counter it sees implies the timer written before it.
uint64_t loadAcquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

}  // namespace

KernelChTracker::KernelChTracker(ProfilerContext* prof, KernelChRing* rings, int nChannels, int64_t timerRateKHz)
    : prof_(prof), rings_(rings), ticksPerMs_(timerRateKHz > 0 ? (uint64_t)timerRateKHz : 1000000),
      channels_(nChannels > 0 ? nChannels : 0) {}

KernelChTracker::~KernelChTracker() { flush(); }

uint64_t KernelChTracker::expect(int channel, void* parentTask) {
  if (prof_ == nullptr || !prof_->wants(ncclProfileKernelCh)) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  if (channel < 0 || channel >= (int)channels_.size()) return 0;
  Channel& ch = channels_[channel];
  if (ch.pending.size() - ch.head >= (size_t)kKernelChSlots) return 0;  // ring full: this item goes unprofiled
  if (ch.head > 0 && ch.head == ch.pending.size()) {
    ch.pending.clear();
    ch.head = 0;
  }
  uint64_t c = ch.nextCounter++;
  ch.pending.push_back(Pending{c, parentTask});
  return c;
}

int KernelChTracker::poll() {
  // Collect the finished items under the lock, report them after it: the
  // launching thread's expect() must never wait for the plugin.
  std::lock_guard<std::mutex> pollLock(pollMutex_);   // one poller at a time (readyScratch_, report order)
  std::vector<Ready>& ready = readyScratch_;
  ready.clear();
  int left = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t chId = 0; chId < channels_.size(); chId++) {
      Channel& ch = channels_[chId];
      KernelChRing& ring = rings_[chId];
      while (ch.head < ch.pending.size()) {
        Pending& p = ch.pending[ch.head];
        const int slot = (int)(p.counter % kKernelChSlots);
        // The stop stamp is written after the start stamp, by the same thread.
        if (loadAcquire(&ring.stop[slot].counter) != p.counter) break;
        if (loadAcquire(&ring.start[slot].counter) != p.counter) break;
        ready.push_back(Ready{p.parent, (int)chId, toNs(__atomic_load_n(&ring.start[slot].timer, __ATOMIC_RELAXED)),
                              toNs(__atomic_load_n(&ring.stop[slot].timer, __ATOMIC_RELAXED))});
        ch.head++;
      }
      if (ch.head >= (size_t)kKernelChSlots) {  // keep the vector short under a steady stream of work
        ch.pending.erase(ch.pending.begin(), ch.pending.begin() + ch.head);
        ch.head = 0;
      }
      left += (int)(ch.pending.size() - ch.head);
    }
  }
  for (const Ready& r : ready) {
    void* h = profilerStartKernelCh(prof_, r.parent, r.channel, r.start);
    profilerStopKernelCh(prof_, h, r.stop);
  }
  return left;
}

void KernelChTracker::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t chId = 0; chId < channels_.size(); chId++) {
    Channel& ch = channels_[chId];
    KernelChRing& ring = rings_[chId];
    for (size_t i = ch.head; i < ch.pending.size(); i++) {
      // Items that started but never stopped (abort): reported with stop 0.
      const Pending& p = ch.pending[i];
      const int slot = (int)(p.counter % kKernelChSlots);
      if (loadAcquire(&ring.start[slot].counter) != p.counter) break;
      void* h = profilerStartKernelCh(prof_, p.parent, (int)chId,
                                      toNs(__atomic_load_n(&ring.start[slot].timer, __ATOMIC_RELAXED)));
      profilerStopKernelCh(prof_, h, 0);
    }
    ch.pending.clear();
    ch.head = 0;
  }
}

}  // namespace uniccl
