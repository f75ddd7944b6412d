// Where the trace plugin keeps its records: a store per thread and context
// (trace_event.h says why), found through a small per-thread cache.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "trace_event.h"

namespace trace {

namespace {

constexpr size_t kFirstChunk = 64;
constexpr size_t kLastChunk = 4096;
// Slots a thread takes from its context's maxEvents at a time: as many as
// it used so far (from 1), at most kReserveStep, so that the shared counter
// is touched once per that many records. What a thread took and did not use
// (fewer than it used, at most kReserveStep) is not kept for the others.
constexpr size_t kReserveStep = 64;

std::atomic<uint64_t> gLastUid{0};
std::atomic<uint64_t> gNextIdBase{0};
// Ids stay below 2^53 (trace viewers read them as doubles) for 2^21 stores.
constexpr uint64_t kIdsPerStore = 1ull << 32;

// Each thread's last stores, by context uid (the API thread of a process
// that drives several ranks alternates between their contexts). A uid is
// never reused, so an entry of a finalized context can never match again.
struct CacheEntry {
  uint64_t uid = 0;
  ThreadEvents* events = nullptr;
};
// Trivially destructible: a plugin's thread_local destructors would keep
// it loaded until every thread that used it exits.
constexpr int kCacheWays = 8;
constexpr int kOwnedMax = 64;
thread_local CacheEntry tCache[kCacheWays];
thread_local CacheEntry tOwned[kOwnedMax];   // the stores this thread made last (the cache may forget)
thread_local unsigned tOwnedNext = 0;

ThreadEvents* threadStore(TraceContext* ctx) {
  CacheEntry& hit = tCache[ctx->uid % kCacheWays];
  if (hit.uid == ctx->uid) return hit.events;
  for (const CacheEntry& e : tOwned)
    if (e.uid == ctx->uid) {
      hit = e;
      return e.events;
    }
  // A thread that forgot its store (more than kOwnedMax contexts since)
  // makes another: more memory, the same records.
  ThreadEvents* t;
  {
    std::lock_guard<std::mutex> lock(ctx->mutex);
    ctx->threads.push_back(std::make_unique<ThreadEvents>(gNextIdBase.fetch_add(kIdsPerStore) + 1));
    t = ctx->threads.back().get();
  }
  hit = tOwned[tOwnedNext++ % kOwnedMax] = CacheEntry{ctx->uid, t};
  return t;
}

// Takes up to `want` slots of ctx's maxEvents; returns how many it got.
size_t reserve(TraceContext* ctx, size_t want) {
  size_t r = ctx->reserved.load(std::memory_order_relaxed);
  for (;;) {
    if (r >= ctx->maxEvents) return 0;
    const size_t got = std::min(want, ctx->maxEvents - r);
    if (ctx->reserved.compare_exchange_weak(r, r + got, std::memory_order_relaxed)) return got;
  }
}

void* mapChunk(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

PrefaultedPool::PrefaultedPool(size_t bytes) {
  if (bytes == 0) return;
  void* p = mapChunk(bytes);
  if (p == nullptr) return;   // no pool: chunks are mapped as needed
  base_ = static_cast<char*>(p);
  size_ = bytes;
}

PrefaultedPool::~PrefaultedPool() {
  if (base_ != nullptr) munmap(base_, size_);
}

void* PrefaultedPool::take(size_t bytes) {
  bytes = (bytes + 63) & ~(size_t)63;
  size_t at = used_.load(std::memory_order_relaxed);
  do {
    if (size_ - at < bytes) return nullptr;
  } while (!used_.compare_exchange_weak(at, at + bytes, std::memory_order_relaxed));
  return base_ + at;
}

template <typename T>
RecordChunks<T>::~RecordChunks() {
  for (const Chunk& c : chunks_)
    if (!c.pooled) munmap(c.p, c.n * sizeof(T));
}

template <typename T>
T* RecordChunks<T>::add(PrefaultedPool* pool) {
  if (chunks_.empty() || used_ == chunks_.back().n) {
    const size_t n = chunks_.empty() ? kFirstChunk : std::min(kLastChunk, 2 * chunks_.back().n);
    T* p = pool != nullptr ? static_cast<T*>(pool->take(n * sizeof(T))) : nullptr;
    const bool pooled = p != nullptr;
    if (p == nullptr) p = static_cast<T*>(mapChunk(n * sizeof(T)));
    if (p == nullptr) return nullptr;
    chunks_.push_back(Chunk{p, n, pooled});
    used_ = 0;
  }
  T* r = &chunks_.back().p[used_++];
  size_++;
  memset(r, 0, sizeof(*r));
  return r;
}

template class RecordChunks<TraceEvent>;
template class RecordChunks<KernelChRecord>;

bool ThreadEvents::take(TraceContext* ctx) {
  if (capacity_ == 0) capacity_ = reserve(ctx, std::min<uint64_t>(kReserveStep, std::max<uint64_t>(1, ids_)));
  if (capacity_ == 0) return false;
  capacity_--;
  return true;
}

TraceEvent* ThreadEvents::addEvent(TraceContext* ctx) {
  return take(ctx) ? stamp(events_.add(ctx->pool.get())) : nullptr;
}

KernelChRecord* ThreadEvents::addKernelCh(TraceContext* ctx) {
  return take(ctx) ? stamp(kernelCh_.add(ctx->pool.get())) : nullptr;
}

TraceEvent* addEvent(TraceContext* ctx) {
  TraceEvent* e = threadStore(ctx)->addEvent(ctx);
  if (e == nullptr) ctx->dropped.fetch_add(1, std::memory_order_relaxed);
  return e;
}

KernelChRecord* addKernelCh(TraceContext* ctx) {
  KernelChRecord* k = threadStore(ctx)->addKernelCh(ctx);
  if (k == nullptr) ctx->dropped.fetch_add(1, std::memory_order_relaxed);
  return k;
}

size_t eventCount(const TraceContext* ctx) {
  size_t n = 0;
  for (const auto& t : ctx->threads) n += t->events().size() + t->kernelCh().size();
  return n;
}

TraceEvent expandKernelCh(const KernelChRecord& k) {
  TraceEvent e;
  memset(&e, 0, sizeof(e));
  e.magic = k.magic;
  e.type = k.type;
  e.id = k.id;
  e.parentId = k.parentId;
  e.startNs = k.startNs;
  e.stopNs = k.stopNs;
  e.tid = k.tid;
  e.channel = k.channel;
  e.gpuStart = k.gpuStart;
  e.gpuStop = k.gpuStop;
  strncpy(e.func, "KernelCh", sizeof(e.func) - 1);
  if (k.stopStateNs != 0) {
    e.nStates = 1;
    e.states[0] = TraceState{(int)ncclProfilerKernelChStop, k.stopStateNs, k.gpuStop};
  }
  return e;
}

uint64_t newContextUid() {
  // From the clock, not from 1: the library closes the plugin when its last
  // communicator goes and may load it again, and a thread's cache
  // (thread_local) must never take a new context for one of the last load.
  uint64_t prev = gLastUid.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t next = std::max<uint64_t>((uint64_t)nowNs(), prev + 1);
    if (gLastUid.compare_exchange_weak(prev, next, std::memory_order_relaxed)) return next;
  }
}

}  // namespace trace
