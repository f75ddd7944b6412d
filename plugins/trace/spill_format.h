// How records lie in the spill (spill_file.h): the ring drainer writes
// blocks, the collector reads them back in the same order. A block is a
// header followed by its data:
//
//   SpillPass  one pass of the drainer over the rings, then its nPairs
//              clock pairs (TickPair): the runs up to the next SpillPass
//              were read in this pass, before its last pair was taken;
//   SpillRun   a run of one ring's records, then its cells as the ring held
//              them (records whole, in the ring's order; pads and starts
//              that are not written left out between runs).
//
// The collector replays the passes: it converts the records' ticks with the
// pairs, reads the runs in order, and lets each pass's reorder window pass
// as the writer would have when it read those records (RankTrace), so that
// the trace is the same as one formatted while the program ran.
#pragma once

#include <cstdint>

#include "trace_record.h"

namespace trace {

enum class SpillBlock : uint32_t {
  kPass = 0x70617373,   // "pass"
  kRun = 0x72756e21,    // "run!"
};

struct SpillPass {
  SpillBlock kind;
  uint32_t nPairs;
  uint64_t pass;       // its number among all passes of the drainer
  int64_t nowNs;       // trace clock when it read where the rings' records end
  // The last pass since the previous SpillPass that found nothing to read
  // (0: none): the reorder window passed then too.
  uint64_t idlePass;
  int64_t idleNowNs;
  uint64_t unused;
};

struct SpillRun {
  SpillBlock kind;
  uint32_t ring;           // the ring's index (ids: trace_record.h)
  uint32_t cells;
  uint32_t unused;
  int64_t tid;             // the thread that wrote the ring then
  uint64_t startsBefore;   // starts the ring had handed out before these cells
};

static_assert(sizeof(SpillPass) == 48 && sizeof(SpillRun) == kCellBytes, "spill headers have fixed sizes");

}  // namespace trace
