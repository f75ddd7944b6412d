// Timeout tracking of collectives captured into graphs, for one
// communicator (docs/timeouts.md).
//
// Captured launches persist across replays, so their ids cannot come from
// the host as eager launches' do. Each graph the communicator captures into
// gets a slot: host-mapped progress words (dev::GraphProgress) and replay
// counters in device memory; every captured launch carries the slot and its
// 1-based place in the graph (dev::GraphTrack), and its blocks report ids
// they make on the GPU (dev_types.h says how). A poll reads the words:
//   started[b] != done[b]  -> block b is running the launch started[b] names:
//                             timed from the first poll that saw that id;
//   started[b] == done[b]  -> block b is idle (or not part of the launch).
// Nothing is added to the graph but the kernels themselves: no event record
// nodes, no host node.
//
// Slots are a fixed pool per communicator (memory allocated at
// registration: nothing may be allocated while a stream captures). A graph
// that finds no free slot runs untracked (one INFO per communicator). A slot
// is freed once its graph is destroyed: the graph's user-object destructor
// runs on a runtime thread where the GPU API and our locks are off limits,
// so it only sets an atomic flag in a process-wide record (never freed, so a
// graph may outlive the communicator); the next poll frees the slot.
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
#include "device/dev_types.h"

namespace uniccl {

// Set by a graph's user-object destructor; recycled only once set.
struct GraphReleaseFlag {
  std::atomic<bool> released{false};
};

class GraphTracker {
 public:
  static constexpr int kSlots = 256;   // graphs tracked at once per communicator

  GraphTracker() = default;
  ~GraphTracker() { destroyAll(); }
  GraphTracker(const GraphTracker&) = delete;
  GraphTracker& operator=(const GraphTracker&) = delete;

  // The slot memory: wordsHost/wordsDev are two views of kSlots host-mapped
  // dev::GraphProgress (zeroed), replaysDev kSlots * kMaxChannels counters
  // in device memory. Without it nothing is tracked.
  void attach(dev::GraphProgress* wordsHost, dev::GraphProgress* wordsDev, uint64_t* replaysDev);

  // Launch thread, while a stream captures `cap`: fills `out` for the
  // launch about to be captured (out->words stays nullptr when the launch
  // is not tracked). On a graph's first launch registers the user object
  // that frees its slot.
  [[nodiscard]] ncclResult_t captured(const gpu::CaptureInfo& cap, unsigned grid, const WorkDesc& desc, dev::GraphTrack* out);

  // Watchdog thread: frees the slots of destroyed graphs, then reports a
  // launch one of whose blocks has been running for more than timeoutMs
  // (0: never).
  TrackerCheck checkAll(int64_t nowMs, int64_t timeoutMs);
  // Communicator teardown: every slot goes, graphs released or not.
  void destroyAll();

  size_t graphCount();

  // Process-wide: release flags of graphs still alive (tests).
  static size_t liveReleaseFlags();

 private:
  struct Launch {
    unsigned grid;
    WorkDesc desc;
  };
  struct Running {
    uint64_t id = 0;              // 0: block idle at the last poll
    int64_t sinceMs = 0;
  };
  struct GraphState {
    GraphReleaseFlag* flag = nullptr;
    int slot = -1;                // -1: untracked
    unsigned replayBlocks = 0;    // grid of the first launch
    std::vector<Launch> launches; // by index - 1
    Running running[dev::kMaxChannels];
  };
  void releaseState(GraphState* st);   // mu_ held
  void cleanupReleasedGraphs();        // mu_ held

  dev::GraphProgress* wordsHost_ = nullptr;
  dev::GraphProgress* wordsDev_ = nullptr;
  uint64_t* replaysDev_ = nullptr;
  std::mutex mu_;
  std::map<uint64_t, std::unique_ptr<GraphState>> graphs_;   // by capture id
  std::vector<int> freeSlots_;
  bool toldFull_ = false;
};

}  // namespace uniccl
