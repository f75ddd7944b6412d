// The trace plugin's process-wide part while at least one communicator is
// traced: the threads' rings, the writer thread, its spill, and the
// contexts' slots. The first init makes it, the last finalize ends it (the
// library may then unload the plugin).
//
// The writer thread drains the rings into the spill as often as they need
// (ring_drainer.h), and formats the spill into the ranks' files when the
// rings are quiet (collector.h); a communicator's finalize drains, then
// formats what is left.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collector.h"
#include "rank_trace.h"
#include "ring_drainer.h"
#include "spill_file.h"
#include "thread_rings.h"
#include "trace_context.h"

namespace trace {

class Tracer {
 public:
  // The tracer, made if there is none (`ringCells`: cells per thread ring,
  // `spillDir`: where its spill goes, for a tracer made now), or nullptr
  // when it cannot be made (`whyNot` says why).
  static Tracer* join(uint32_t ringCells, const std::string& spillDir, std::string* whyNot);
  // Drops a join; the last one ends the tracer.
  static void leave();
  // The live tracer; the entry points use it only for contexts they were
  // given, so it lives while they run.
  static Tracer* current() { return live_.load(std::memory_order_acquire); }

  ThreadRings& rings() { return rings_; }

  // ctx's trace into `file` from now on (the tracer closes it); false when
  // every slot is taken or memory is short (the caller closes it then).
  bool addRank(TraceContext* ctx, FILE* file, const RankTraceOptions& options);
  // ctx's file, written to its end and closed.
  RankTraceSummary finishRank(TraceContext* ctx);

  // A stop or state the calling thread could not write: its ring stayed
  // full longer than the wait allows.
  void countLostUpdate() { lostUpdates_.fetch_add(1, std::memory_order_relaxed); }
  // Asks the writer for a pass now (a thread waits for room in its ring).
  void wake();

 private:
  Tracer(uint32_t ringCells, uint64_t generation, std::unique_ptr<SpillFile> spill);
  ~Tracer();
  void writerLoop();

  static std::atomic<Tracer*> live_;

  ThreadRings rings_;
  std::unique_ptr<SpillFile> spill_;
  std::mutex passMutex_;   // one reader of the rings and the spill at a time: the writer, finalize
  RingDrainer drainer_;    // under passMutex_
  Collector collector_;    // under passMutex_
  std::vector<uint16_t> freeSlots_;   // under passMutex_
  std::vector<uint64_t> lostAtStart_;   // by slot: lostUpdates_ when the rank was added
  std::atomic<uint64_t> lostUpdates_{0};
  std::mutex wakeMutex_;
  std::condition_variable wakeCv_;
  bool stop_ = false;       // under wakeMutex_
  bool wakeNow_ = false;    // under wakeMutex_
  std::thread writer_;
};

}  // namespace trace
