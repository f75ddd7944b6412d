#include "trace_clock.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace trace {

namespace {

constexpr int64_t kHourNs = 3600LL * 1000000000LL;
// Calibration pairs kept: at one pass a millisecond, the last few seconds.
constexpr size_t kMaxPoints = 4096;
// Counter ticks between the two reads around the clock: below the first, a
// pair is good enough; above the second (about 10 us at a few GHz), it is
// not taken once there is a rate.
constexpr int kPairAttempts = 8;
constexpr uint64_t kTightPairTicks = 500;
constexpr uint64_t kLoosePairTicks = 40000;

// The counter, read after every earlier instruction has completed: the pair
// brackets the clock read, and follows the ring heads the writer read.
uint64_t orderedTicks() {
#if defined(__x86_64__)
  _mm_lfence();
#endif
  return nowTicks();
}

int64_t clockNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// A namespace-scope constant rather than a function-local static: nowNs()
// runs often, and a local static costs a guard check per call.
const int64_t kMonotonicToEpochNs = clockNs(CLOCK_REALTIME) - clockNs(CLOCK_MONOTONIC);

bool tscIsAClock() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000007) return false;
  __get_cpuid(0x80000007, &a, &b, &c, &d);
  if ((d & (1u << 8)) == 0) return false;   // no invariant TSC
  // The kernel drops "tsc" from its clock sources when it finds the
  // counters of the CPUs unsynchronized or unstable.
  FILE* f = fopen("/sys/devices/system/clocksource/clocksource0/available_clocksource", "r");
  if (f == nullptr) return false;
  char list[512];
  const size_t n = fread(list, 1, sizeof(list) - 1, f);
  fclose(f);
  list[n] = '\0';
  for (char* save = nullptr, *tok = strtok_r(list, " \n", &save); tok != nullptr; tok = strtok_r(nullptr, " \n", &save))
    if (strcmp(tok, "tsc") == 0) return true;
#endif
  return false;
}

}  // namespace

const bool kTicksAreTsc = tscIsAClock();

int64_t nowNs() { return clockNs(CLOCK_MONOTONIC) + kMonotonicToEpochNs; }

void TickConverter::start() {
  calibrate(true);
  if (!kTicksAreTsc) return;
  // A second pair 200 us later, so that there is a rate before the first pass.
  const int64_t until = nowNs() + 200000;
  while (nowNs() < until) {
  }
  calibrate(true);
}

bool TickConverter::calibrate(bool anyway) {
  if (!kTicksAreTsc) return true;   // ticks are ns already
  // The clock read between two counter reads; the closest of a few tries,
  // as a thread preempted between the reads pairs them badly.
  TickPair p{0, 0};
  uint64_t spread = UINT64_MAX;
  for (int attempt = 0; attempt < kPairAttempts && spread > kTightPairTicks; attempt++) {
    const uint64_t t0 = orderedTicks();
    const int64_t ns = nowNs();
    const uint64_t t1 = orderedTicks();
    if (t1 - t0 < spread) {
      spread = t1 - t0;
      p = TickPair{t0 + spread / 2, ns};
    }
  }
  if (spread > kLoosePairTicks && points_.size() >= 2 && !anyway) return false;
  if (!points_.empty() && (p.ticks <= points_.back().ticks || p.ns <= points_.back().ns)) return anyway;
  add(p);
  return true;
}

void TickConverter::add(const TickPair& p) {
  if (points_.size() == kMaxPoints) points_.erase(points_.begin(), points_.begin() + kMaxPoints / 2);
  points_.push_back(p);
  added_++;
  const size_t n = points_.size();
  if (n >= 2)
    lastRate_ = (double)(points_[n - 1].ns - points_[n - 2].ns) / (double)(points_[n - 1].ticks - points_[n - 2].ticks);
}

int64_t TickConverter::along(const TickPair& a, const TickPair& b, uint64_t ticks) {
  const double rate = (double)(b.ns - a.ns) / (double)(b.ticks - a.ticks);
  return a.ns + (int64_t)((double)(int64_t)(ticks - a.ticks) * rate);
}

int64_t TickConverter::toNs(uint64_t ticks) const {
  if (!kTicksAreTsc) return (int64_t)ticks;
  const size_t n = points_.size();
  if (n < 2) return nowNs();
  // Most records lie between the last two pairs: the writer takes a pair
  // after reading where the rings' records end (Collector::pass).
  if (ticks >= points_[n - 2].ticks)
    return points_[n - 2].ns + (int64_t)((double)(int64_t)(ticks - points_[n - 2].ticks) * lastRate_);
  auto it = std::upper_bound(points_.begin(), points_.end(), ticks,
                             [](uint64_t t, const TickPair& p) { return t < p.ticks; });
  if (it == points_.begin()) return along(points_[0], points_[1], ticks);
  return along(*(it - 1), *it, ticks);
}

int64_t gpuToTraceNs(uint64_t gpuNs, int64_t nearNs) {
  // NVIDIA's global timer counts ns from the Unix epoch (synchronized with the
  // host clock by the driver); anything far from "now" is another domain.
  const int64_t g = (int64_t)gpuNs;
  return (gpuNs != 0 && g > nearNs - 24 * kHourNs && g < nearNs + kHourNs) ? g : -1;
}

}  // namespace trace
