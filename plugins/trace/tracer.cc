#include "tracer.h"

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>

#include "trace_clock.h"

namespace trace {

namespace {

// The longest the writer sleeps between passes.
constexpr int64_t kWriterPeriodNs = 1000000;
// It plans the next pass for when the fullest ring will hold this share of
// its capacity, at the rate it filled since the last pass: starts are
// dropped at seven eighths, so a burst over three times faster still fits.
constexpr double kDrainAtShare = 1.0 / 4;
// And sleeps at least this long: a writer that passes again at once, or
// yields in a loop, takes a core's time from the threads that report (in
// one run on an H200, a host-bound loop ran 1.13x slower with it than
// without a plugin and 1.00-1.03x with passes at least 200 us apart and
// 4 MiB rings; docs/profiler.md has the runs, also one where the loop's
// cost came from elsewhere).
constexpr int64_t kMinSleepNs = 200000;
// It formats the spill once every pass for a while found every ring below
// this share: records come slower than it formats them (a 4 MiB ring at
// two million records a second), and not only for a moment (a
// reporting thread that waited for a core).
constexpr double kQuietShare = 1.0 / 32;
constexpr int64_t kQuietForNs = 2000000;
// It stops formatting, to drain, once a ring holds this share, and after
// this long at a time.
constexpr double kFormatYieldShare = 1.0 / 8;
constexpr int64_t kMaxFormatNs = 20000000;
// How often it looks for rings of threads that have exited.
constexpr int64_t kReclaimPeriodNs = 1000000000LL;

std::mutex gLifeMutex;   // join / leave
int gJoins = 0;
uint64_t gGenerations = 0;

}  // namespace

std::atomic<Tracer*> Tracer::live_{nullptr};

Tracer* Tracer::join(uint32_t ringCells, const std::string& spillDir, std::string* whyNot) {
  std::lock_guard<std::mutex> lock(gLifeMutex);
  Tracer* t = live_.load(std::memory_order_relaxed);
  if (t == nullptr) {
    std::unique_ptr<SpillFile> spill = SpillFile::create(spillDir);
    if (spill == nullptr) {
      *whyNot = "cannot make its spill file in " + spillDir + " (" + strerror(errno) + ")";
      return nullptr;
    }
    t = new (std::nothrow) Tracer(ringCells, ++gGenerations, std::move(spill));
    if (t != nullptr) {
      try {
        t->writer_ = std::thread([t] { t->writerLoop(); });
      } catch (...) {
        delete t;
        t = nullptr;
      }
    }
    if (t == nullptr) {
      *whyNot = "cannot start its writer thread";
      return nullptr;
    }
    live_.store(t, std::memory_order_release);
  }
  gJoins++;
  return t;
}

void Tracer::leave() {
  std::lock_guard<std::mutex> lock(gLifeMutex);
  if (--gJoins > 0) return;
  Tracer* t = live_.load(std::memory_order_relaxed);
  live_.store(nullptr, std::memory_order_release);
  {
    std::lock_guard<std::mutex> w(t->wakeMutex_);
    t->stop_ = true;
  }
  t->wakeCv_.notify_all();
  if (t->writer_.joinable()) t->writer_.join();
  delete t;
}

Tracer::Tracer(uint32_t ringCells, uint64_t generation, std::unique_ptr<SpillFile> spill)
    : rings_(ringCells, generation),
      spill_(std::move(spill)),
      drainer_(&rings_, spill_.get()),
      collector_(spill_.get()),
      lostAtStart_(kMaxTracedContexts, 0) {
  for (uint32_t s = kMaxTracedContexts; s > 0; s--) freeSlots_.push_back((uint16_t)(s - 1));
}

Tracer::~Tracer() = default;

bool Tracer::addRank(TraceContext* ctx, FILE* file, const RankTraceOptions& options) {
  std::lock_guard<std::mutex> lock(passMutex_);
  if (freeSlots_.empty()) return false;
  const uint16_t slot = freeSlots_.back();
  if (!collector_.addRank(slot, *ctx, file, options)) return false;
  drainer_.addRank(slot, ctx, options.maxEvents);
  freeSlots_.pop_back();
  ctx->slot = slot;
  lostAtStart_[slot] = lostUpdates_.load(std::memory_order_relaxed);
  return true;
}

RankTraceSummary Tracer::finishRank(TraceContext* ctx) {
  std::lock_guard<std::mutex> lock(passMutex_);
  drainer_.pass(true);
  collector_.readSpill();
  const RankDrainCounts counts = drainer_.finishRank(ctx->slot);
  DropCounts drops;
  drops.maxEvents = counts.droppedMaxEvents;
  drops.ringFull = ctx->droppedRingFull.load(std::memory_order_relaxed);
  drops.lostUpdates = lostUpdates_.load(std::memory_order_relaxed) - lostAtStart_[ctx->slot];
  drops.spill = counts.droppedSpill;
  drops.spillFailed = counts.spillFailed || !collector_.spillReadable();
  RankTraceSummary s = collector_.finishRank(ctx->slot, drops);
  freeSlots_.push_back(ctx->slot);
  return s;
}

void Tracer::wake() {
  {
    std::lock_guard<std::mutex> lock(wakeMutex_);
    wakeNow_ = true;
  }
  wakeCv_.notify_one();
}

void Tracer::writerLoop() {
  pthread_setname_np(pthread_self(), "uniccl-trace");   // how it shows in top, perf and gdb
  int64_t lastReclaim = nowNs();
  int64_t lastPass = nowNs();
  int64_t lastBusy = nowNs();   // the last pass that found a ring above kQuietShare
  std::unique_lock<std::mutex> wakeLock(wakeMutex_);
  while (!stop_) {
    wakeNow_ = false;
    wakeLock.unlock();
    int64_t sleepNs;
    bool formatMore = false;   // formatting stopped at its time limit with records left
    {
      std::lock_guard<std::mutex> lock(passMutex_);
      const int64_t start = nowNs();
      const RingDrainer::PassResult r = drainer_.pass();
      sleepNs = kWriterPeriodNs;
      if (r.fullest > 0) sleepNs = std::min(sleepNs, (int64_t)((double)(start - lastPass) * (kDrainAtShare / r.fullest)));
      sleepNs = std::max(sleepNs, kMinSleepNs);
      lastPass = start;
      if (r.fullest >= kQuietShare) lastBusy = start;
      if (start - lastBusy >= kQuietForNs) {
        const int64_t until = nowNs() + kMaxFormatNs;
        const bool all = !collector_.behind() || collector_.readSpill([&] {
          return nowNs() > until || drainer_.anyRingFuller(kFormatYieldShare);
        });
        if (all) collector_.idleUntil(drainer_.idlePass(), drainer_.idleNowNs());
        else formatMore = true;
      }
      if (nowNs() - lastReclaim > kReclaimPeriodNs) {
        rings_.reclaimExited();
        lastReclaim = nowNs();
      }
    }
    wakeLock.lock();
    // Quiet rings and records left to format: the next pass goes on at once.
    if (!formatMore) wakeCv_.wait_for(wakeLock, std::chrono::nanoseconds(sleepNs), [this] { return stop_ || wakeNow_; });
  }
}

}  // namespace trace
