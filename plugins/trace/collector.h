// The writer thread's second duty, done when the rings are quiet and at a
// communicator's finalize: reading the spill back (spill_format.h), joining
// each event's records (its start, states and stop, which may come from
// different threads) by id, and handing events to their rank's trace. It
// replays the drainer's passes in order, so the trace is the one the writer
// would have written had it formatted every record as it read it.
// Only one thread at a time (the tracer's pass lock).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "id_map.h"
#include "pending_event.h"
#include "rank_trace.h"
#include "spill_file.h"
#include "spill_format.h"
#include "trace_clock.h"

namespace trace {

class Collector {
 public:
  explicit Collector(SpillFile* spill);
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // Reads the spill from where it stopped last to its end, and empties it
  // then. `stop` (nullptr: never) is asked every few hundred records
  // whether to stop before the end; the next call goes on from there.
  // Returns whether it read to the end.
  bool readSpill(const std::function<bool()>& stop = nullptr);
  // Whether the spill holds records not read yet.
  bool behind() const { return bufAt_ < bufEnd_ || loaded_ < spill_->size(); }
  // The drainer's pass `pass` found nothing to read at `nowNs` (after all
  // that is in the spill): lets the reorder window pass until then, so that
  // events wait no longer than it when no more records come.
  void idleUntil(uint64_t pass, int64_t nowNs);
  // Whether what was read made sense (false: the spill was cut short, or
  // holds something else than the drainer writes; the rest was skipped).
  bool spillReadable() const { return readable_; }

  // ctx's trace from now on, in slot `slot`, into `file` (which the rank
  // closes); false when it cannot be made.
  bool addRank(uint16_t slot, const TraceContext& ctx, FILE* file, const RankTraceOptions& options);
  // The slot's communicator is going (the spill was read to its end): its
  // rank writes everything it has, open events as unfinished, and closes
  // its file.
  RankTraceSummary finishRank(uint16_t slot, const DropCounts& drops);

 private:
  // The spill, a buffer at a time: the next n bytes (nullptr: the spill
  // ends before), then consume() them.
  const unsigned char* peek(size_t n);
  void consume(size_t n) { bufAt_ += n; }
  bool readBlockHead();   // false: the spill ends here, or is unreadable from here
  void beginPass(const SpillPass& p);
  void endPass();
  void readRecord(const Cell* c, unsigned cells);
  void onStart(const Cell* c, unsigned cells, uint64_t id);
  void onUpdate(const UpdateRecord& u);
  void forgetEarlyRecords();
  void letWindowPass(int64_t nowNs);
  void flushRanks();

  SpillFile* spill_;
  std::vector<RankTrace*> ranks_;   // by slot
  std::vector<uint16_t> liveSlots_;   // the slots that have a rank
  WriterPools pools_;
  IdMap open_;   // events started and not stopped, and stops / states that came before their start
  std::vector<std::pair<uint64_t, PendingEvent*>> early_;   // the latter, to forget if no start comes
  TickConverter clock_;   // the records' ticks to trace-clock ns, with the drainer's pairs
  std::vector<uint64_t> startsSeen_;   // by ring: the starts its runs handed out so far
  // Where reading stands: buf_[bufAt_, bufEnd_) is what was loaded and not
  // read yet, and ends at `loaded_` in the spill.
  std::unique_ptr<unsigned char[]> buf_;
  size_t bufAt_ = 0, bufEnd_ = 0;
  uint64_t loaded_ = 0;
  uint64_t pass_ = 0;      // the drainer's pass being read
  int64_t passNowNs_ = 0;
  bool inPass_ = false;
  SpillRun run_{};         // the run being read: its cells left, and the starts before its next record
  bool readable_ = true;
};

}  // namespace trace
