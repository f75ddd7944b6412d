// The writer thread's first duty: moving the records out of the threads'
// rings into the spill (spill_file.h) as fast as they come, so that no ring
// fills up while the program reports events faster than they can be
// formatted. A pass reads where each ring's records end, takes a clock
// pair, and appends the records to the spill as they lie in the rings
// (spill_format.h): no record is parsed beyond its head, and each ring's
// records go in one or two pieces of one write.
//
// It also decides which starts a rank takes: the first maxEvents starts it
// reads; later ones are counted, left out of the spill, and the rank's
// context is told (atMaxEvents), so that its threads record further starts
// as one-cell skipped starts without an id, whose stops and states never
// come.
//
// Only one thread at a time (the tracer's pass lock).
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <vector>

#include "spill_file.h"
#include "spill_format.h"
#include "thread_rings.h"
#include "trace_clock.h"
#include "trace_context.h"

namespace trace {

// What the drainer counted for one rank.
struct RankDrainCounts {
  uint64_t droppedMaxEvents = 0;   // starts past maxEvents
  uint64_t droppedSpill = 0;       // starts lost because the spill could not be written
  bool spillFailed = false;
};

class RingDrainer {
 public:
  RingDrainer(ThreadRings* rings, SpillFile* spill);

  struct PassResult {
    // The largest share of a ring's capacity that was waiting when the pass
    // began (0 to 1): how soon the next pass is due.
    double fullest = 0;
  };
  // Moves every record published so far into the spill. A pass that could
  // not read the clock well moves none (the next one does), unless `final`.
  PassResult pass(bool final = false);

  // Whether any ring holds more than `share` of its capacity now.
  bool anyRingFuller(double share) const;
  // The last pass since the last one spilled that found nothing to read
  // (pass 0: none), and when it read the rings: the reorder window has
  // passed until then.
  uint64_t idlePass() const { return idlePass_; }
  int64_t idleNowNs() const { return idleNowNs_; }

  // The context in `slot` from now on, taking `maxEvents` starts.
  void addRank(uint16_t slot, TraceContext* ctx, uint64_t maxEvents);
  // The slot's communicator is going (after a final pass): its counts.
  RankDrainCounts finishRank(uint16_t slot);

 private:
  struct Slot {
    TraceContext* ctx = nullptr;
    uint64_t maxEvents = 0;
    uint64_t admitted = 0;
    RankDrainCounts counts;
  };
  struct Run {
    SpillRun head;
    const Cell* cells;
  };
  struct Release {
    EventRing* ring;
    uint64_t to, starts;
  };

  bool admit(uint16_t slot);
  void skip(uint16_t slot);
  void drainRing(uint32_t index, uint64_t head);
  void addRun(uint32_t index, long tid, const EventRing* ring, uint64_t from, uint64_t to, uint64_t startsBefore);
  void write();   // the runs so far (after the pass's head and pairs, the first time), then frees their cells
  void countLost(const Run& run);

  ThreadRings* rings_;
  SpillFile* spill_;
  std::vector<Slot> slots_;
  TickConverter clock_;   // takes the pairs the spill carries
  uint64_t pairsSpilled_ = 0;
  uint64_t pass_ = 0;
  uint64_t idlePass_ = 0;
  int64_t idleNowNs_ = 0;
  bool spillFailed_ = false;
  // One pass's pieces, and what is freed in the rings once they are written.
  static constexpr uint32_t kMaxPairsPerPass = 4;
  SpillPass passHead_{};
  bool passHeadWritten_ = false;
  TickPair pairs_[kMaxPairsPerPass];
  std::vector<uint64_t> heads_;
  std::vector<Run> runs_;
  std::vector<Release> releases_;
  std::vector<iovec> parts_;
};

}  // namespace trace
