// KernelCh events from GPU timestamps: the kernel stamps, per channel, when
// it starts and stops each profiled work item into a ring in host-mapped
// memory; the KernelCh poller thread (kernel_ch_poller.h) reads the rings
// and reports KernelCh start / KernelChStop / stop with those stamps.
//
// Ring contract (what the device side writes; see docs/profiler.md):
//   - one KernelChRing per channel, kKernelChSlots slots for starts and stops;
//   - the host gives every profiled work item of a channel a counter c > 0
//     (consecutive per channel, from expect()); c == 0 means "not profiled";
//   - when channel ch begins work c, one thread of its block writes
//       rings[ch].start[c % kKernelChSlots] = {counter c, GPU global timer (ticks)}
//     as one 16-byte store (HIP: the timer, then the counter with a
//     system-scope release), and the same into rings[ch].stop[...] when the
//     block has finished c.
//   The host never has more than kKernelChSlots items of a channel pending,
//   so a slot is not reused before it was read.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "common/profiler/profiler.h"
#include "device/dev_types.h"

namespace uniccl {

constexpr int kKernelChSlots = 64;

struct KernelChStamp {
  uint64_t counter;  // work counter, written after timer
  uint64_t timer;    // GPU global timer, ticks (ns on CUDA; the tracker converts)
};

struct KernelChRing {
  KernelChStamp start[kKernelChSlots];
  KernelChStamp stop[kKernelChSlots];
};
static_assert(sizeof(KernelChRing) == 2048, "KernelChRing is shared with device code: keep its layout");
static_assert(sizeof(KernelChRing) == sizeof(dev::ProfRing) && kKernelChSlots == dev::kProfSlots &&
                  sizeof(KernelChStamp) == sizeof(dev::ProfStamp),
              "the kernels' view of the rings (dev::ProfRing) must match");

class KernelChTracker {
 public:
  // `rings`: nChannels rings in host-mapped memory, zeroed (the caller owns them).
  // `timerRateKHz`: ticks per ms of the stamps' timer (gpu::DeviceProps);
  // the profiler is given nanoseconds.
  KernelChTracker(ProfilerContext* prof, KernelChRing* rings, int nChannels, int64_t timerRateKHz = 1000000);
  ~KernelChTracker();  // stops events still open (as flush())

  // Launch thread: work about to be handed to `channel` for the task whose
  // Coll/P2p event is `parentTask`. Returns the counter to put in the work
  // item for the kernel, or 0 (do not stamp) when KernelCh is not asked for
  // or kKernelChSlots items of this channel are still pending.
  uint64_t expect(int channel, void* parentTask);

  // Polling thread(s), serialized: reports every item whose start and stop
  // stamps have both arrived, outside the lock expect() takes. Returns how
  // many items are still pending (0: nothing left to poll for).
  int poll();

  // Teardown / abort: stops open KernelCh events with the stamps that did
  // arrive (a missing stop stamp is reported as 0) and forgets the rest.
  void flush();

 private:
  struct Pending {
    uint64_t counter;
    void* parent;
  };
  struct Ready {   // an item whose start and stop stamps both arrived
    void* parent;
    int channel;
    uint64_t start, stop;
  };
  struct Channel {
    uint64_t nextCounter = 1;
    std::vector<Pending> pending;  // in counter order
    size_t head = 0;               // first pending entry not yet finished
  };
  uint64_t toNs(uint64_t ticks) const {
    return ticksPerMs_ == 1000000 ? ticks : (uint64_t)((unsigned __int128)ticks * 1000000u / ticksPerMs_);
  }
  ProfilerContext* prof_;
  KernelChRing* rings_;
  uint64_t ticksPerMs_;
  std::mutex mutex_;  // expect() and poll() run on different threads
  std::vector<Channel> channels_;
  std::mutex pollMutex_;               // serializes poll(); expect() never takes it
  std::vector<Ready> readyScratch_;   // poll() only, under pollMutex_
};

}  // namespace uniccl
