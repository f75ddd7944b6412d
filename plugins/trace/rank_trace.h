// One communicator rank's trace file, written by the writer thread as it
// reads the spill (collector.h): while the program runs when the rings are
// quiet, else at the communicator's finalize.
//
// The file lists events by start time (check_trace.py checks it; trace
// viewers do not need it). Records reach the writer out of that order:
// threads' rings are read one after another, an event can only be written
// once it stopped, and a KernelCh is reported when the channel finished,
// stamped with the GPU's earlier start. So events wait, sorted into buckets
// of about a millisecond of start time, until they are older than the
// reorder window and no open event started before them; then a bucket is
// sorted and written. An event that arrives after its bucket was written
// (its start is older than the window) is written at once, out of order,
// and counted as late. At most maxWaitingBytes of events wait: past that
// the oldest bucket goes even before the window has passed.
//
// A complete event ("X") is formatted when it stops, while its record is
// still in the caches, and waits as text; its PendingEvent goes back to the
// pool at once. An async event (ProxyOp, ProxyStep) waits as it is: its
// begin is written in start order whether it stopped or not.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "chunked_text.h"
#include "json_out.h"
#include "pending_event.h"
#include "trace_context.h"

namespace trace {

// The writer's reusable memory, shared by its ranks.
struct WriterPools {
  PendingPool events;
  ChunkPool text;
};

struct RankTraceOptions {
  uint64_t maxEvents = 0;    // events written; later ones are dropped (counted by the ring drainer)
  int64_t reorderNs = 0;     // the reorder window
  size_t maxWaitingBytes = 0;   // events waiting to be written, at most
};

// What never became one of the rank's events, counted before the rank saw
// it; finish() writes it into otherData.
struct DropCounts {
  uint64_t maxEvents = 0;     // starts past maxEvents (ring_drainer.h)
  uint64_t ringFull = 0;      // starts that found their thread's ring full
  uint64_t lostUpdates = 0;   // stops and states that did, for longer than they wait
  uint64_t spill = 0;         // starts lost because the spill could not be written
  bool spillFailed = false;   // the spill could not be written or read back
};

// What finish() reports.
struct RankTraceSummary {
  uint64_t written = 0;
  uint64_t maxEvents = 0;
  uint64_t droppedMaxEvents = 0;
  uint64_t droppedRingFull = 0;
  uint64_t droppedSpill = 0;
  uint64_t lostUpdates = 0;
  uint64_t late = 0;
  bool writeFailed = false;
};

class RankTrace {
 public:
  // Writes the file's head: `file` is the rank's trace file, opened by init.
  // `pools`: the writer's, shared by its ranks.
  RankTrace(const TraceContext& ctx, FILE* file, const RankTraceOptions& options, WriterPools* pools);
  ~RankTrace();
  RankTrace(const RankTrace&) = delete;
  RankTrace& operator=(const RankTrace&) = delete;

  // An event, after its start (and whatever stop or states came before it).
  void started(PendingEvent* e);
  // e's stop was read (e->stopNs set). The rank owns e from here.
  void stopped(PendingEvent* e, uint64_t pass);
  // Writes every waiting event that the reorder window and the open events
  // let go; `nowNs`: when the pass began reading the rings.
  void writeReady(int64_t nowNs, uint64_t pass);
  // The communicator is going: `open` are its events that never stopped
  // (the rank owns them from here). Writes every event, the trailer, and
  // closes the file.
  RankTraceSummary finish(int64_t endNs, const std::vector<PendingEvent*>& open, const DropCounts& drops);
  // Hands what was formatted to the file: all of it, or once there is a
  // large piece.
  void flush();
  void flushIfLarge();

 private:
  // Start times per bucket: 2^20 ns, about a millisecond.
  static constexpr int kBucketShift = 20;
  struct Waiting {   // ordered by start; at equal starts the longer (enclosing) event first
    int64_t start;
    int64_t negStop;
    uint64_t id;
    long track;
    PendingEvent* async;    // an async event; nullptr: a complete event, formatted
    ChunkedText::Place text;        // the complete event's text in its bucket
    uint32_t textLength;
    bool operator<(const Waiting& o) const {
      if (start != o.start) return start < o.start;
      if (negStop != o.negStop) return negStop < o.negStop;
      return id < o.id;
    }
  };
  struct Bucket {
    std::vector<Waiting> events;
    ChunkedText text;
  };
  using Buckets = std::map<int64_t, std::unique_ptr<Bucket>>;

  Bucket* bucketFor(int64_t start);   // nullptr: its bucket was written
  void complete(PendingEvent* e);     // a stopped (or unfinished) complete event: formatted, then waits
  void waitAsync(PendingEvent* e);
  void writeBucket(Buckets::iterator it);
  void place(PendingEvent* e, int64_t stopNs);   // placedStart / placedStop of a stopped event
  void writeAsync(PendingEvent* e);              // its turn in start order
  void countOrder(int64_t start);                // late or not
  void separate() { out_.lit(",\n"); }
  void nameTrack(long track);
  void addOpen(PendingEvent* e);
  void removeOpen(PendingEvent* e);
  int64_t openStart() const;   // earliest start an open complete event may get; INT64_MAX: none

  const int pid_;
  std::string otherData_;   // the trailer's part known from the start
  FILE* file_;
  const RankTraceOptions options_;
  WriterPools* pools_;
  JsonOut out_{256 << 10};   // formatted, for the file
  JsonOut scratch_{4096};    // one event, before it goes to its bucket
  Buckets buckets_;
  int64_t lastKey_ = INT64_MIN;    // where the last event went (most go to the same bucket)
  Bucket* lastBucket_ = nullptr;
  std::vector<std::unique_ptr<Bucket>> spareBuckets_;   // written ones, kept with their memory
  int64_t writtenBelow_ = INT64_MIN;   // buckets below this key are written
  size_t waitingBytes_ = 0;   // text of the waiting complete events, and the waiting async events
  PendingEvent* open_ = nullptr;   // open complete events (an intrusive list)
  std::unordered_set<long> namedTracks_;
  std::unordered_map<uint64_t, long> proxyOpTracks_;   // ProxyOp id -> track, for its steps
  std::vector<std::pair<uint64_t, uint64_t>> stoppedProxyOps_;   // (id, pass it stopped in)
  int64_t lastWrittenStart_ = INT64_MIN;
  uint64_t written_ = 0;
  uint64_t late_ = 0;
  bool writeFailed_ = false;
};

}  // namespace trace
