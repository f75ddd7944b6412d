#include "common/watchdog/graph_tracker.h"

#include <cstring>

#include "common/check.h"
#include "common/util/debug.h"
#include "common/watchdog/gpu_word.h"

namespace uniccl {

namespace {

// Release flags are never freed: a graph's user object may be destroyed at
// any time, even during process exit, and must find its flag. They are
// reused once their graph released them, so their number is bounded by the
// most graphs tracked at once.
struct FlagPool {
  std::mutex mu;
  std::vector<GraphReleaseFlag*> free;
  std::vector<GraphReleaseFlag*> orphans;   // their tracker went first; reusable once released
  size_t live = 0;                          // handed out, not yet back in `free`
};
FlagPool& flagPool() {
  static FlagPool* pool = new FlagPool();
  return *pool;
}

GraphReleaseFlag* acquireFlag() {
  FlagPool& p = flagPool();
  std::lock_guard<std::mutex> lock(p.mu);
  for (size_t i = 0; i < p.orphans.size();) {
    if (p.orphans[i]->released.load(std::memory_order_acquire)) {
      p.free.push_back(p.orphans[i]);
      p.orphans[i] = p.orphans.back();
      p.orphans.pop_back();
      p.live--;
    } else {
      i++;
    }
  }
  GraphReleaseFlag* f;
  if (p.free.empty()) {
    f = new GraphReleaseFlag();
  } else {
    f = p.free.back();
    p.free.pop_back();
  }
  f->released.store(false, std::memory_order_release);
  p.live++;
  return f;
}

void returnFlag(GraphReleaseFlag* f) {
  FlagPool& p = flagPool();
  std::lock_guard<std::mutex> lock(p.mu);
  if (f->released.load(std::memory_order_acquire)) {
    p.free.push_back(f);
    p.live--;
  } else {
    p.orphans.push_back(f);
  }
}

// Graph user-object destructor: no GPU calls, no locks.
void onGraphReleased(void* arg) {
  static_cast<GraphReleaseFlag*>(arg)->released.store(true, std::memory_order_release);
}

}  // namespace

size_t GraphTracker::liveReleaseFlags() {
  FlagPool& p = flagPool();
  std::lock_guard<std::mutex> lock(p.mu);
  return p.live;
}

void GraphTracker::attach(dev::GraphProgress* wordsHost, dev::GraphProgress* wordsDev, uint64_t* replaysDev) {
  std::lock_guard<std::mutex> lock(mu_);
  wordsHost_ = wordsHost;
  wordsDev_ = wordsDev;
  replaysDev_ = replaysDev;
  freeSlots_.clear();
  if (wordsHost_ == nullptr) return;
  for (int s = kSlots - 1; s >= 0; s--) freeSlots_.push_back(s);
}

ncclResult_t GraphTracker::captured(const gpu::CaptureInfo& cap, unsigned grid, const WorkDesc& desc,
                                    dev::GraphTrack* out) {
  *out = dev::GraphTrack{};
  std::lock_guard<std::mutex> lock(mu_);
  if (wordsHost_ == nullptr) return ncclSuccess;
  std::unique_ptr<GraphState>& st = graphs_[cap.graphId];
  if (!st) {
    st.reset(new GraphState());
    st->flag = acquireFlag();
    // The flag passes to the graph even on failure (the destructor then runs at once).
    ncclResult_t res = gpu::graphRetainNewUserObject(cap.graph, onGraphReleased, st->flag);
    if (res != ncclSuccess) {
      INFO(kSubsysGraph, "Timeout tracking is off for captured graph %llu: its release hook could not be added (%s)",
           (unsigned long long)cap.graphId, ncclGetErrorString(res));
    } else {
      cleanupReleasedGraphs();   // a destroyed graph may have left a slot
      if (freeSlots_.empty()) {
        if (!toldFull_) {
          toldFull_ = true;
          INFO(kSubsysGraph, "More than %d graphs of this communicator are alive: the later ones run without "
               "timeout tracking", kSlots);
        }
      } else {
        st->slot = freeSlots_.back();
        freeSlots_.pop_back();
        // Nothing runs in this slot (its last graph is gone): start from
        // idle words. The counters keep their values; ids only need to differ
        // between consecutive launches on a block.
        memset(&wordsHost_[st->slot], 0, sizeof(dev::GraphProgress));
      }
    }
  }
  if (st->slot < 0) return ncclSuccess;
  const size_t index = st->launches.size() + 1;
  if (index >= (size_t(1) << dev::kGraphIndexBits)) return ncclSuccess;   // ids would repeat: untracked
  if (index == 1) st->replayBlocks = grid;
  st->launches.push_back(Launch{grid, desc});
  out->words = &wordsDev_[st->slot];
  out->replays = replaysDev_ + (size_t)st->slot * dev::kMaxChannels;
  out->index = (uint32_t)index;
  out->replayBlocks = st->replayBlocks;
  return ncclSuccess;
}

void GraphTracker::releaseState(GraphState* st) {
  if (st->slot >= 0) freeSlots_.push_back(st->slot);
  st->slot = -1;
  if (st->flag != nullptr) returnFlag(st->flag);
  st->flag = nullptr;
}

void GraphTracker::cleanupReleasedGraphs() {
  for (auto it = graphs_.begin(); it != graphs_.end();) {
    if (it->second->flag->released.load(std::memory_order_acquire)) {
      releaseState(it->second.get());
      it = graphs_.erase(it);
    } else {
      ++it;
    }
  }
}

TrackerCheck GraphTracker::checkAll(int64_t nowMs, int64_t timeoutMs) {
  TrackerCheck out;
  out.inGraph = true;
  std::lock_guard<std::mutex> lock(mu_);
  cleanupReleasedGraphs();
  for (auto& kv : graphs_) {
    GraphState& st = *kv.second;
    if (st.slot < 0) continue;
    const dev::GraphProgress& w = wordsHost_[st.slot];
    for (int b = 0; b < dev::kMaxChannels; b++) {
      Running& r = st.running[b];
      const uint64_t started = readGpuWord(&w.started[b]);
      if (started == readGpuWord(&w.done[b])) {
        r.id = 0;
        continue;
      }
      if (r.id != started) {          // a launch (or replay) this poll sees running for the first time
        r.id = started;
        r.sinceMs = nowMs;
      }
      const int64_t elapsed = nowMs - r.sinceMs;
      const size_t index = started & ((uint64_t(1) << dev::kGraphIndexBits) - 1);
      if (timeoutMs > 0 && elapsed > timeoutMs && !out.timedOut && index >= 1 && index <= st.launches.size()) {
        out.timedOut = true;
        out.desc = st.launches[index - 1].desc;
        out.elapsedMs = elapsed;
      }
    }
  }
  return out;
}

void GraphTracker::destroyAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& kv : graphs_) releaseState(kv.second.get());
  graphs_.clear();
}

size_t GraphTracker::graphCount() {
  std::lock_guard<std::mutex> lock(mu_);
  return graphs_.size();
}

}  // namespace uniccl
