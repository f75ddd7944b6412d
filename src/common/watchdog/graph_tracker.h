// Timeout tracking of collectives captured into graphs, for one
// communicator (docs/timeouts.md; the design follows the GraphEventTracker of
// TorchComm's NCCLX backend).
//
// Captured launches persist across replays, so they cannot use the eager
// tracker's one-shot events. Each captured launch gets its own start/end
// pair recorded as external records (host-queryable during replay), kept
// until the graph goes. A host node at the head of each graph bumps a replay
// counter. Every poll derives each launch's state from two queries:
//   end complete                     -> completed   (timer off)
//   start and end not complete       -> not reached (timer off)
//   start complete, end not complete -> in progress (timer runs; over the timeout: report)
// and a moved replay counter restarts every timer of the graph, so time
// never adds up across replays.
//
// Cleanup is deferred: the graph's user-object destructor runs on a runtime
// thread where the GPU API and our locks are off limits, so it only sets an
// atomic `released` flag; the next poll destroys that graph's events. The
// counter and flag live in a process-wide slot (never freed while a graph may
// still call into it), so a graph may outlive the communicator.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common/gpu.h"
#include "common/watchdog/tracker_check.h"
#include "common/watchdog/work_desc.h"

namespace uniccl {

// Shared between one tracked graph (its host node and user object) and the
// tracker; recycled only once the graph released it.
struct GraphSlot {
  std::atomic<uint64_t> replays{0};
  std::atomic<bool> released{false};
};

class GraphEventTracker {
 public:
  // One captured launch between recordStart and recordEnd.
  struct Captured {
    uint64_t graphId = 0;
    gpu::Event start = nullptr;   // nullptr: not tracked
    gpu::Event end = nullptr;
  };

  GraphEventTracker() = default;
  ~GraphEventTracker() { destroyAll(); }
  GraphEventTracker(const GraphEventTracker&) = delete;
  GraphEventTracker& operator=(const GraphEventTracker&) = delete;

  // Launch thread, while `s` captures `cap`: on the graph's first launch
  // adds the replay-counting host node and the release user object; creates
  // the launch's events and records the start. Where the runtime lacks
  // external records, tracking turns off (one log line) and capture goes on.
  ncclResult_t recordStart(gpu::Stream s, const gpu::CaptureInfo& cap, Captured* c);
  // Records the end after the launch and adds the launch to its graph.
  ncclResult_t recordEnd(gpu::Stream s, Captured* c, const WorkDesc& desc);
  // The launch between recordStart and recordEnd failed: keeps the events
  // (the graph may already reference the start) without timing them.
  void abandon(Captured* c);

  // Watchdog thread: frees released graphs, then reports a launch that has
  // been in progress for more than timeoutMs (0: never).
  TrackerCheck checkAll(int64_t nowMs, int64_t timeoutMs);
  // Communicator teardown: every event goes, released or not.
  void destroyAll();

  size_t graphCount();
  size_t eventCount();

  // Process-wide: graph events alive across all trackers (tests).
  static size_t liveEventsAllTrackers();
  // Process-wide: once the runtime refused an external record, no graph is tracked.
  static bool externalRecordsUnsupported();

 private:
  void keep(Captured* c, const WorkDesc& desc, bool timed);
  struct GraphWork {
    gpu::Event start;
    gpu::Event end;
    WorkDesc desc;
    bool timed;                   // false: abandoned launch, never timed
    int64_t runningSinceMs;       // -1: not seen in progress
  };
  struct GraphState {
    GraphSlot* slot = nullptr;
    bool tracking = true;
    uint64_t lastReplays = 0;
    std::vector<GraphWork> works;
  };
  void releaseState(GraphState* st);   // mu_ held: destroys events, gives the slot back
  void cleanupReleasedGraphs();        // mu_ held

  std::mutex mu_;
  std::map<uint64_t, std::unique_ptr<GraphState>> graphs_;   // by capture id
};

}  // namespace uniccl
