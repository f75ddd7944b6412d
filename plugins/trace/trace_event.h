// The trace plugin's records: one TraceEvent per startEvent, kept (never
// freed) until finalize so that handles stay valid as parents of later
// events; one TraceContext per communicator rank.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "uniccl_profiler.h"

namespace trace {

constexpr int kMaxStates = 6;

struct TraceState {
  int state;       // ncclProfilerEventState_t
  int64_t ns;      // trace clock
  uint64_t value;  // transSize / appendedProxyOps / pTimer, by state
};

struct TraceContext;

struct TraceEvent {
  uint64_t magic;  // kEventMagic while the record belongs to a live context
  uint64_t type;   // one ncclProfile* bit
  uint64_t id;     // unique within the process
  uint64_t parentId;  // 0: none
  uint64_t groupId;   // Coll / P2p: the Group event
  TraceContext* ctx;
  int64_t startNs, stopNs;  // trace clock; stopNs < 0 while running
  long tid;                 // OS thread that started the event
  char func[24];
  char datatype[24];
  char algo[16];
  char proto[16];
  uint64_t seq;
  size_t count;
  int root;  // root, or peer for p2p / proxy
  int channel;
  int nSteps, chunkSize, isSend, step;
  int nChannels, groupDepth;
  bool graphCaptured;
  void* stream;
  uint64_t gpuStart, gpuStop;  // KernelCh GPU timers (ns)
  int64_t netId;
  int nStates;
  TraceState states[kMaxStates];
};

constexpr uint64_t kEventMagic = 0x7472616365457674ULL;  // "traceEvt"

// KernelCh events, the most frequent by far (one per channel and work
// item), in a record of their own a sixth of TraceEvent's size: a new
// record's memory is what costs (its first touch is a page fault of a few
// microseconds per 4 KiB page in a virtual machine). Its first four fields
// are TraceEvent's, so a handle's magic, type and id read alike.
struct KernelChRecord {
  uint64_t magic;
  uint64_t type;   // ncclProfileKernelCh
  uint64_t id;
  uint64_t parentId;
  int64_t startNs, stopNs;      // trace clock; stopNs < 0 while running
  uint64_t gpuStart, gpuStop;   // GPU timers (ns)
  int64_t stopStateNs;          // when KernelChStop was recorded (0: not)
  int32_t tid;
  int32_t channel;
};
static_assert(offsetof(KernelChRecord, magic) == offsetof(TraceEvent, magic) &&
                  offsetof(KernelChRecord, type) == offsetof(TraceEvent, type) &&
                  offsetof(KernelChRecord, id) == offsetof(TraceEvent, id),
              "a handle reads as either record");
// The full record the writer places for a KernelCh record.
TraceEvent expandKernelCh(const KernelChRecord& k);

// Memory made ready when the context is made (UNICCL_PROFILER_TRACE_PREFAULT_MB):
// the first touch of a new page costs 1 to 7 us in the virtual machines we
// test on, whose host maps guest memory lazily. With KernelCh traced, a
// 2-rank 1 MiB AllReduce loop on one H200 took 22 us per iteration without
// this pool and 16.5 us with it (11 us unprofiled; docs/profiler.md).
// Threads carve chunks from it without a lock; past its end, chunks are
// mapped as needed.
class PrefaultedPool {
 public:
  explicit PrefaultedPool(size_t bytes);
  ~PrefaultedPool();
  PrefaultedPool(const PrefaultedPool&) = delete;
  PrefaultedPool& operator=(const PrefaultedPool&) = delete;
  void* take(size_t bytes);   // 64-byte aligned; nullptr: used up
  bool owns(const void* p) const { return p >= base_ && p < base_ + size_; }

 private:
  char* base_ = nullptr;
  size_t size_ = 0;
  std::atomic<size_t> used_{0};
};

// Records of one kind in chunks that grow from 64 to 4096 (handles stay
// valid; chunks come from the context's prefaulted pool, then mapped with
// their pages populated).
template <typename T>
class RecordChunks {
 public:
  RecordChunks() = default;
  ~RecordChunks();
  RecordChunks(const RecordChunks&) = delete;
  RecordChunks& operator=(const RecordChunks&) = delete;
  T* add(PrefaultedPool* pool);   // zeroed; nullptr: no memory
  template <typename F>
  void forEach(F f) const {
    for (size_t c = 0; c < chunks_.size(); c++)
      for (size_t i = 0; i < (c + 1 == chunks_.size() ? used_ : chunks_[c].n); i++) f(chunks_[c].p[i]);
  }
  size_t size() const { return size_; }

 private:
  struct Chunk {
    T* p;
    size_t n;
    bool pooled;   // the pool's memory (freed with the pool)
  };
  std::vector<Chunk> chunks_;
  size_t used_ = 0;   // records in the last chunk
  size_t size_ = 0;
};

// One thread's records for one context. Only its thread adds; the writer
// reads them after the last event (finalize).
class ThreadEvents {
 public:
  explicit ThreadEvents(uint64_t idBase) : idBase_(idBase) {}
  // A zeroed record with its id set, or nullptr: the context's maxEvents
  // is reached (or no memory).
  TraceEvent* addEvent(TraceContext* ctx);
  KernelChRecord* addKernelCh(TraceContext* ctx);
  const RecordChunks<TraceEvent>& events() const { return events_; }
  const RecordChunks<KernelChRecord>& kernelCh() const { return kernelCh_; }

 private:
  bool take(TraceContext* ctx);   // one slot of the context's maxEvents
  template <typename T>
  T* stamp(T* r) {
    if (r != nullptr) r->id = idBase_ + ++ids_;
    return r;
  }
  RecordChunks<TraceEvent> events_;
  RecordChunks<KernelChRecord> kernelCh_;
  size_t capacity_ = 0;   // slots reserved from the context's maxEvents, less those used
  uint64_t idBase_;       // ids idBase_ + 1, + 2, ...: unique in the process, no shared counter
  uint64_t ids_ = 0;
};

struct TraceContext {
  uint64_t commId = 0;
  int rank = 0, nRanks = 0, nNodes = 0;
  std::string commName;
  std::string path;
  FILE* file = nullptr;  // opened at init so a bad path fails there
  int64_t initNs = 0;
  size_t maxEvents = 0;
  // Records live in per-thread stores: startEvent runs on the API, proxy,
  // callback and KernelCh threads at once, and a shared lock or counter
  // on that path made each event wait for the others.
  uint64_t uid = 0;       // process-unique, never reused (threads cache their store by it)
  std::unique_ptr<PrefaultedPool> pool;   // before `threads`: outlives their chunks
  std::mutex mutex;       // threads (a thread's first event here) and the writer
  std::vector<std::unique_ptr<ThreadEvents>> threads;
  std::atomic<size_t> reserved{0};   // record slots handed to threads, at most maxEvents
  std::atomic<uint64_t> dropped{0};
  ncclDebugLogger_t log = nullptr;
};

// A zeroed record from the calling thread's store, or nullptr (counted
// as dropped): maxEvents reached.
TraceEvent* addEvent(TraceContext* ctx);
KernelChRecord* addKernelCh(TraceContext* ctx);
size_t eventCount(const TraceContext* ctx);
uint64_t newContextUid();

// Trace clock: CLOCK_MONOTONIC shifted to the Unix epoch at plugin load, so
// that it never steps and ranks on synchronized hosts line up.
int64_t nowNs();
// The GPU global timer (ns) on the trace clock, or -1 when it is not in the
// same domain (a GPU timer that does not count from the Unix epoch).
int64_t gpuToTraceNs(uint64_t gpuNs);

// Writes ctx's events as Chrome-trace JSON into ctx->file and closes it.
// Returns the number of events written.
size_t writeTrace(TraceContext* ctx);

}  // namespace trace
