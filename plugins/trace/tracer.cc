#include "tracer.h"

#include <pthread.h>

#include <chrono>
#include <new>

#include "trace_clock.h"

namespace trace {

namespace {

// How often the writer reads the rings. A thread reporting an event every
// few hundred ns fills a 512 KiB ring in about 5 ms; the writer reads it
// several times in that span.
constexpr auto kWriterPeriod = std::chrono::milliseconds(1);
// How often it looks for rings of threads that have exited.
constexpr int64_t kReclaimPeriodNs = 1000000000LL;

std::mutex gLifeMutex;   // join / leave
int gJoins = 0;
uint64_t gGenerations = 0;

}  // namespace

std::atomic<Tracer*> Tracer::live_{nullptr};

Tracer* Tracer::join(uint32_t ringCells) {
  std::lock_guard<std::mutex> lock(gLifeMutex);
  Tracer* t = live_.load(std::memory_order_relaxed);
  if (t == nullptr) {
    t = new (std::nothrow) Tracer(ringCells, ++gGenerations);
    if (t == nullptr) return nullptr;
    try {
      t->writer_ = std::thread([t] { t->writerLoop(); });
    } catch (...) {
      delete t;
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

Tracer::Tracer(uint32_t ringCells, uint64_t generation)
    : rings_(ringCells, generation), collector_(&rings_), lostAtStart_(Collector::kMaxRanks, 0) {
  for (uint32_t s = Collector::kMaxRanks; s > 0; s--) freeSlots_.push_back((uint16_t)(s - 1));
}

Tracer::~Tracer() = default;

bool Tracer::addRank(TraceContext* ctx, FILE* file, const RankTraceOptions& options) {
  std::lock_guard<std::mutex> lock(passMutex_);
  if (freeSlots_.empty()) return false;
  const uint16_t slot = freeSlots_.back();
  if (!collector_.addRank(slot, *ctx, file, options)) return false;
  freeSlots_.pop_back();
  ctx->slot = slot;
  lostAtStart_[slot] = lostUpdates_.load(std::memory_order_relaxed);
  return true;
}

RankTraceSummary Tracer::finishRank(TraceContext* ctx) {
  std::lock_guard<std::mutex> lock(passMutex_);
  RankTraceSummary s =
      collector_.finishRank(ctx->slot, ctx->droppedRingFull.load(std::memory_order_relaxed),
                            lostUpdates_.load(std::memory_order_relaxed) - lostAtStart_[ctx->slot]);
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
  std::unique_lock<std::mutex> wakeLock(wakeMutex_);
  while (!stop_) {
    wakeNow_ = false;
    wakeLock.unlock();
    {
      std::lock_guard<std::mutex> lock(passMutex_);
      collector_.pass();
      if (nowNs() - lastReclaim > kReclaimPeriodNs) {
        rings_.reclaimExited();
        lastReclaim = nowNs();
      }
    }
    wakeLock.lock();
    wakeCv_.wait_for(wakeLock, kWriterPeriod, [this] { return stop_ || wakeNow_; });
  }
}

}  // namespace trace
