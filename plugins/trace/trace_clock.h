// The trace plugin's clocks.
//
// The trace clock: CLOCK_MONOTONIC shifted to the Unix epoch once, when the
// plugin is loaded; it never steps, and it reads like the GPU's global timer.
//
// Records carry ticks instead: the threads that report events read the
// CPU's time-stamp counter where it runs at a constant rate and the kernel
// trusts it (x86-64 with an invariant TSC the kernel offers as a clock
// source), else the monotonic clock. Reading the counter costs less than half
// of reading the clock in the virtual machine we measured (about 20 ns
// against 45), and every record reads it once. The writer turns ticks into
// trace-clock ns (TickConverter).
#pragma once

#include <cstdint>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace trace {

// Trace files give times as microseconds since this instant (Unix time
// 1700000000 s), so that the files of all ranks, processes and synchronized
// hosts line up.
constexpr int64_t kTraceOriginNs = 1700000000LL * 1000000000LL;

// The trace clock now.
int64_t nowNs();

// Whether ticks are the time-stamp counter (decided once, at load).
extern const bool kTicksAreTsc;

inline uint64_t nowTicks() {
#if defined(__x86_64__)
  if (__builtin_expect(kTicksAreTsc, 1)) return __rdtsc();
#endif
  return (uint64_t)nowNs();
}

// A (counter, trace clock) pair, read at one instant.
struct TickPair {
  uint64_t ticks;
  int64_t ns;
};

// Ticks to trace-clock ns: piecewise linear between pairs taken as records
// are read out of the rings, so that a rate the kernel slews (NTP) is
// followed. Pairs are only added, and a record is converted after a pair
// later than it was taken, so every record is converted by one function:
// ticks in order stay in order, whichever pass converted them. One thread
// at a time.
//
// The ring drainer takes the pairs (calibrate) and writes each into the
// spill next to the records it follows; the spill's reader converts with a
// converter fed those pairs (add), in the same order, so it converts as the
// drainer's would have at the time.
class TickConverter {
 public:
  // Without pairs: toNs() needs two (start(), calibrate() or add()).
  TickConverter() = default;
  // The first pairs: one now and, on the counter, one 200 us later, so that
  // there is a rate before the first pass.
  void start();
  // Takes a pair now. Returns false, taking none, when no try read the
  // clock tightly enough between two counter reads (a preemption between
  // them), unless `anyway`.
  bool calibrate(bool anyway);
  // A pair another converter took (in the order it took them).
  void add(const TickPair& p);
  int64_t toNs(uint64_t ticks) const;

  // Pairs taken or added so far, and the one `back` pairs before the last
  // (0: the last); `back` below the pairs kept, which are at least the last 2048.
  uint64_t pairsAdded() const { return added_; }
  TickPair recent(size_t back) const { return points_[points_.size() - 1 - back]; }

 private:
  static int64_t along(const TickPair& a, const TickPair& b, uint64_t ticks);   // on the line through a and b
  std::vector<TickPair> points_;   // increasing; the last ones (a bounded history)
  double lastRate_ = 0;            // ns per tick between the last two points (most records use them)
  uint64_t added_ = 0;
};

// A GPU global timer value (ns) on the trace clock, or -1 when it is not in
// the trace clock's domain (a timer that does not count from the Unix
// epoch). `nearNs` is a trace-clock time close to when the stamp was taken.
int64_t gpuToTraceNs(uint64_t gpuNs, int64_t nearNs);

}  // namespace trace
