// KernelCh events from GPU timestamps: the kernel stamps, per channel, when
// it starts and stops each profiled work item into a ring in host-mapped
// memory; the KernelCh poller thread (kernel_ch_poller.h) reads the rings
// and reports KernelCh start / KernelChStop / stop with those stamps.
//
// Ring contract (what the device side writes; see docs/profiler.md):
//   - one KernelChRing per channel, kKernelChSlots slots for starts and stops;
//   - the host marks which channels stamp each work item (Work::profMask,
//     from expect()); every channel counts its stamped items, c = 1, 2, ...
//     (the device's Channel::profCount), in the order expect() handed them out;
//   - when channel ch begins work c, one thread of its block writes
//       rings[ch].start[c % kKernelChSlots] = {counter c, GPU global timer (ticks)}
//     as one 16-byte store (HIP: the timer, then the counter with a
//     system-scope release), and the same into rings[ch].stop[...] when the
//     block has finished c.
//   The host never has more than kKernelChSlots items of a channel pending,
//   so a slot is not reused before it was read.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
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

// Per channel, the items handed out and not reported yet are a
// single-producer single-consumer ring between the launching thread
// (expect) and the poller (poll): the launch path takes no lock and writes
// only its own counters (a few cache lines for all channels), so a
// profiled launch costs the launching thread a few stores per channel.
class KernelChTracker {
 public:
  // `rings`: nChannels rings in host-mapped memory, zeroed (the caller owns them).
  // `timerRateKHz`: ticks per ms of the stamps' timer (gpu::DeviceProps);
  // the profiler is given nanoseconds.
  KernelChTracker(ProfilerContext* prof, KernelChRing* rings, int nChannels, int64_t timerRateKHz = 1000000);
  ~KernelChTracker();  // stops events still open (as flush())
  KernelChTracker(const KernelChTracker&) = delete;
  KernelChTracker& operator=(const KernelChTracker&) = delete;

  // Launching thread (one at a time per communicator): a work item about to
  // be handed to channels [lo, hi] for the task whose Coll/P2p event is
  // `parentTask`. Returns the channels that stamp it (bit c: channel c, the
  // item's Work::profMask; the kernels count the stamped items per channel
  // as this does), 0 when KernelCh is not asked for; a channel with
  // kKernelChSlots items still pending is left out (that item goes unprofiled there).
  uint64_t expectChannels(int lo, int hi, void* parentTask);
  // The same for one channel: the item's counter on it, or 0 (not stamped).
  uint64_t expect(int channel, void* parentTask);

  // Polling thread(s), serialized: reports every item whose start and stop
  // stamps have both arrived. Returns how many items are still pending (0:
  // nothing left to poll for).
  int poll();

  // Teardown / abort (no launch in progress): stops open KernelCh events
  // with the stamps that did arrive (a missing stop stamp is reported as 0)
  // and forgets the rest.
  void flush();

 private:
  struct Ready {   // an item whose start and stop stamps both arrived
    void* parent;
    int channel;
    uint64_t start, stop;
  };
  uint64_t toNs(uint64_t ticks) const {
    return ticksPerMs_ == 1000000 ? ticks : (uint64_t)((unsigned __int128)ticks * 1000000u / ticksPerMs_);
  }
  // Hands out channel c's next counter, or 0 when its ring is full.
  uint64_t issue(int c, void* parentTask);
  // Reports channel c's items from its first unreported one while `ready`
  // says its stamps are in, into `out`; returns the channel's items left.
  template <typename ReadyFn>
  uint64_t collect(int c, ReadyFn&& ready, std::vector<Ready>* out);

  ProfilerContext* prof_;
  KernelChRing* rings_;
  uint64_t ticksPerMs_;
  int nChannels_;
  // [channel]. issued_: counters handed out (1, 2, ...: the launching
  // thread writes, release); reported_: counters reported (the poller
  // writes, release); seenReported_: the launching thread's last look at
  // reported_ (it reads reported_ again only when the ring looks full).
  std::unique_ptr<std::atomic<uint64_t>[]> issued_;
  std::unique_ptr<uint64_t[]> seenReported_;
  std::unique_ptr<std::atomic<uint64_t>[]> reported_;
  std::unique_ptr<void*[]> parents_;   // [channel * kKernelChSlots + counter % kKernelChSlots]
  std::mutex pollMutex_;               // serializes poll() and flush(); expect() never takes it
  std::vector<Ready> readyScratch_;    // poll() only, under pollMutex_
};

}  // namespace uniccl
