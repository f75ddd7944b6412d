#include "common/profiler/kernel_ch.h"

namespace uniccl {

namespace {

// The GPU writes these words; the host reads each with an acquire load so
// that a counter it sees implies the timer written before it.
uint64_t loadAcquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

}  // namespace

KernelChTracker::KernelChTracker(ProfilerContext* prof, KernelChRing* rings, int nChannels)
    : prof_(prof), rings_(rings), channels_(nChannels > 0 ? nChannels : 0) {}

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
  ch.pending.push_back(Pending{c, parentTask, nullptr, false});
  return c;
}

int KernelChTracker::poll() {
  std::lock_guard<std::mutex> lock(mutex_);
  int left = 0;
  for (size_t chId = 0; chId < channels_.size(); chId++) {
    Channel& ch = channels_[chId];
    KernelChRing& ring = rings_[chId];
    while (ch.head < ch.pending.size()) {
      Pending& p = ch.pending[ch.head];
      const int slot = (int)(p.counter % kKernelChSlots);
      if (!p.started) {
        if (loadAcquire(&ring.start[slot].counter) != p.counter) break;
        uint64_t t = __atomic_load_n(&ring.start[slot].timer, __ATOMIC_RELAXED);
        p.handle = profilerStartKernelCh(prof_, p.parent, (int)chId, t);
        p.started = true;
      }
      if (loadAcquire(&ring.stop[slot].counter) != p.counter) break;
      uint64_t t = __atomic_load_n(&ring.stop[slot].timer, __ATOMIC_RELAXED);
      profilerStopKernelCh(prof_, p.handle, t);
      ch.head++;
    }
    if (ch.head >= (size_t)kKernelChSlots) {  // keep the vector short under a steady stream of work
      ch.pending.erase(ch.pending.begin(), ch.pending.begin() + ch.head);
      ch.head = 0;
    }
    left += (int)(ch.pending.size() - ch.head);
  }
  return left;
}

void KernelChTracker::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Channel& ch : channels_) {
    for (size_t i = ch.head; i < ch.pending.size(); i++)
      if (ch.pending[i].started) profilerStopKernelCh(prof_, ch.pending[i].handle, 0);
    ch.pending.clear();
    ch.head = 0;
  }
}

}  // namespace uniccl
