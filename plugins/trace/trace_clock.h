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

// Ticks to trace-clock ns: piecewise linear between (ticks, ns) pairs the
// writer takes at every pass, so that a rate the kernel slews (NTP) is
// followed. Pairs are only added, and a record is converted after a pair
// later than it was taken, so every record is converted by one function:
// ticks in order stay in order, whichever pass converted them. One thread
// at a time.
class TickConverter {
 public:
  TickConverter();
  // Takes a pair now. Returns false, taking none, when no try read the
  // clock tightly enough between two counter reads (a preemption between
  // them), unless `anyway`.
  bool calibrate(bool anyway);
  int64_t toNs(uint64_t ticks) const;

 private:
  struct Point {
    uint64_t ticks;
    int64_t ns;
  };
  static int64_t along(const Point& a, const Point& b, uint64_t ticks);   // on the line through a and b
  std::vector<Point> points_;   // increasing; the last ones (a bounded history)
  double lastRate_ = 0;         // ns per tick between the last two points (most records use them)
};

// A GPU global timer value (ns) on the trace clock, or -1 when it is not in
// the trace clock's domain (a timer that does not count from the Unix
// epoch). `nearNs` is a trace-clock time close to when the stamp was taken.
int64_t gpuToTraceNs(uint64_t gpuNs, int64_t nearNs);

}  // namespace trace
