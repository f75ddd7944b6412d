// The writer thread's view of one event between its first record and the
// trace file, and the pool it comes from (the writer reuses them, so a long
// run does not allocate per event).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "trace_record.h"

namespace trace {

class RankTrace;

constexpr int kMaxStates = 6;

struct PendingEvent {
  uint64_t id;
  RankTrace* rank;     // nullptr: a stop or state that came before its start (another thread's ring)
  StartRecord first;   // the start record as it was written (trace_record.h) ...
  Cell rest[kMaxRecordCells - 1];   // ... and its other cells
  int64_t startNs;     // trace clock
  int64_t stopNs;      // trace clock; -1 while open
  long tid;            // the OS thread that started it
  long track;          // where it is drawn: tid, a GPU channel or a proxy channel track
  int64_t placedStart, placedStop;   // what the file shows (KernelCh: the GPU's stamps); while open,
                                     // placedStart is the earliest start it may get
  PendingEvent* openPrev;   // a rank's open complete events (RankTrace)
  PendingEvent* openNext;
  bool inOpenList;
  uint64_t gpuStop;    // KernelChStop's timer
  uint64_t seenInPass; // a stop or state without its start: the pass that read it
  uint8_t nStates;
  uint8_t nStatesWritten;   // async events written before they stopped: states already in the file
  bool beginWritten;        // async events: the "b" half is in the file
  bool gpuClock;            // KernelCh placed by GPU stamps
  bool unfinished;          // never stopped: the communicator went first
  uint8_t stateCodes[kMaxStates];
  int64_t stateNs[kMaxStates];
  uint64_t stateValues[kMaxStates];

  uint32_t type() const { return first.head.code; }
  // Cell i (1 or 2) of the start record, as the part it is.
  template <typename T>
  T part(int i) const {
    T t;
    memcpy(&t, &rest[i - 1], sizeof(t));
    return t;
  }
};

class PendingPool {
 public:
  PendingEvent* take() {
    if (free_.empty()) grow();
    PendingEvent* e = free_.back();
    free_.pop_back();
    *e = PendingEvent{};
    return e;
  }
  void put(PendingEvent* e) {
    e->id = 0;   // entries that still point at it (the open-event heap) see it is not theirs
    free_.push_back(e);
  }
  size_t allocated() const { return blocks_.size() * kBlock; }

 private:
  static constexpr size_t kBlock = 1024;
  void grow() {
    blocks_.emplace_back(new PendingEvent[kBlock]);
    for (size_t i = 0; i < kBlock; i++) free_.push_back(&blocks_.back()[i]);
  }
  std::vector<std::unique_ptr<PendingEvent[]>> blocks_;
  std::vector<PendingEvent*> free_;
};

}  // namespace trace
