// The writer thread's reading side: every pass reads all threads' rings,
// joins each event's records (its start, states and stop, which may come
// from different threads) by id, and hands events to their rank's trace.
// Only one thread runs it at a time (the tracer's pass lock).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "id_map.h"
#include "pending_event.h"
#include "rank_trace.h"
#include "thread_rings.h"
#include "trace_clock.h"

namespace trace {

class Collector {
 public:
  // Contexts alive at once (a start record names its context by slot).
  static constexpr uint32_t kMaxRanks = 4096;

  explicit Collector(ThreadRings* rings);
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // Reads every record published so far and writes what the ranks' reorder
  // windows let go. A pass that could not read the clock well reads no
  // record (the next one does), unless `final`.
  void pass(bool final = false);
  // ctx's trace from now on, in slot `slot`, into `file` (which the rank
  // closes); false when it cannot be made.
  bool addRank(uint16_t slot, const TraceContext& ctx, FILE* file, const RankTraceOptions& options);
  // The slot's communicator is going: a pass, then its rank writes everything
  // it has, open events as unfinished, and closes its file.
  RankTraceSummary finishRank(uint16_t slot, uint64_t droppedRingFull, uint64_t lostUpdates);

 private:
  void read(long tid, const Cell* c, unsigned cells, uint64_t startId);
  void onStart(long tid, const Cell* c, unsigned cells, uint64_t id);
  void onUpdate(const UpdateRecord& u);
  void forgetEarlyRecords();

  ThreadRings* rings_;
  std::vector<RankTrace*> ranks_;   // by slot
  std::vector<uint16_t> liveSlots_;   // the slots that have a rank
  WriterPools pools_;
  IdMap open_;   // events started and not stopped, and stops / states that came before their start
  std::vector<std::pair<uint64_t, PendingEvent*>> early_;   // the latter, to forget if no start comes
  uint64_t pass_ = 0;
  std::vector<uint64_t> heads_;   // pass(): where each ring's records ended when it began
  TickConverter clock_;   // the records' ticks to trace-clock ns
};

}  // namespace trace
