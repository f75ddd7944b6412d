// The trace plugin's records: one TraceEvent per startEvent, kept (never
// freed) until finalize so that handles stay valid as parents of later
// events; one TraceContext per communicator rank.
#pragma once

#include <atomic>
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

// Event records in fixed chunks: handles stay valid, and a new record costs
// no allocation except once per kChunk events (a std::deque of these large
// records allocated one block per event: most of the plugin's ~280 ns per
// KernelCh event, measured on the CI machine's CPU).
class EventArena {
 public:
  static constexpr size_t kChunk = 4096;
  TraceEvent* add() {
    if (size_ == chunks_.size() * kChunk) chunks_.emplace_back(new TraceEvent[kChunk]);
    TraceEvent* e = &chunks_[size_ / kChunk][size_ % kChunk];
    size_++;
    return e;
  }
  size_t size() const { return size_; }
  template <typename F>
  void forEach(F f) const {
    for (size_t i = 0; i < size_; i++) f(chunks_[i / kChunk][i % kChunk]);
  }

 private:
  std::vector<std::unique_ptr<TraceEvent[]>> chunks_;
  size_t size_ = 0;
};

struct TraceContext {
  uint64_t commId = 0;
  int rank = 0, nRanks = 0, nNodes = 0;
  std::string commName;
  std::string path;
  FILE* file = nullptr;  // opened at init so a bad path fails there
  int64_t initNs = 0;
  size_t maxEvents = 0;
  std::mutex mutex;  // events: startEvent runs on API, proxy and callback threads
  EventArena events;
  std::atomic<uint64_t> dropped{0};
  ncclDebugLogger_t log = nullptr;
};

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
