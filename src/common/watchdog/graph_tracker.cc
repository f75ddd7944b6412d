#include "common/watchdog/graph_tracker.h"

#include "common/check.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

std::atomic<size_t> gLiveGraphEvents{0};
std::atomic<bool> gExternalUnsupported{false};   // graph tracking is off process-wide

// Slots are never freed: a graph's user object may be destroyed at any time,
// even during process exit, and must find its slot. They are reused once
// their graph released them, so their number is bounded by the most graphs
// tracked at once.
struct SlotPool {
  std::mutex mu;
  std::vector<GraphSlot*> free;
  std::vector<GraphSlot*> orphans;   // their tracker went first; reusable once released
};
SlotPool& slotPool() {
  static SlotPool* pool = new SlotPool();
  return *pool;
}

GraphSlot* acquireSlot() {
  SlotPool& p = slotPool();
  std::lock_guard<std::mutex> lock(p.mu);
  for (size_t i = 0; i < p.orphans.size();) {
    if (p.orphans[i]->released.load(std::memory_order_acquire)) {
      p.free.push_back(p.orphans[i]);
      p.orphans[i] = p.orphans.back();
      p.orphans.pop_back();
    } else {
      i++;
    }
  }
  GraphSlot* s;
  if (p.free.empty()) {
    s = new GraphSlot();
  } else {
    s = p.free.back();
    p.free.pop_back();
  }
  s->replays.store(0, std::memory_order_relaxed);
  s->released.store(false, std::memory_order_release);
  return s;
}

void returnSlot(GraphSlot* s) {
  SlotPool& p = slotPool();
  std::lock_guard<std::mutex> lock(p.mu);
  if (s->released.load(std::memory_order_acquire)) p.free.push_back(s);
  else p.orphans.push_back(s);
}

// Host node at the head of every replay (runs on a runtime thread).
void onReplayStart(void* arg) { static_cast<GraphSlot*>(arg)->replays.fetch_add(1, std::memory_order_acq_rel); }

// Graph user-object destructor: no GPU calls, no locks.
void onGraphReleased(void* arg) { static_cast<GraphSlot*>(arg)->released.store(true, std::memory_order_release); }

ncclResult_t createEvent(gpu::Event* e) {
  UCHECK(gpu::eventCreate(e, gpu::kEventDisableTiming));
  gLiveGraphEvents.fetch_add(1, std::memory_order_relaxed);
  return ncclSuccess;
}

void destroyEvent(gpu::Event e) {
  if (e == nullptr) return;
  gpu::eventDestroy(e);
  gLiveGraphEvents.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace

size_t GraphEventTracker::liveEventsAllTrackers() { return gLiveGraphEvents.load(std::memory_order_relaxed); }
bool GraphEventTracker::externalRecordsUnsupported() { return gExternalUnsupported.load(std::memory_order_relaxed); }

ncclResult_t GraphEventTracker::recordStart(gpu::Stream s, const gpu::CaptureInfo& cap, Captured* c) {
  *c = Captured{};
  if (gExternalUnsupported.load(std::memory_order_relaxed)) return ncclSuccess;
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<GraphState>& st = graphs_[cap.graphId];
  if (!st) {
    st.reset(new GraphState());
    st->slot = acquireSlot();
    // Ownership of the slot reference passes to the graph even on failure
    // (the destructor then runs at once and marks it released).
    ncclResult_t res = gpu::graphRetainNewUserObject(cap.graph, onGraphReleased, st->slot);
    if (res == ncclSuccess) res = gpu::captureAddHostNode(s, onReplayStart, st->slot);
    if (res != ncclSuccess) {
      st->tracking = false;
      if (res == ncclInvalidUsage) {
        // The runtime lacks graph user objects or host nodes: stop trying for every graph.
        if (!gExternalUnsupported.exchange(true)) {
          WARN("This GPU runtime lacks graph user objects or host nodes: collectives in captured graphs run "
               "without timeout tracking (eager collectives are still tracked)");
        }
      } else {
        INFO(kSubsysGraph, "Timeout tracking is off for captured graph %llu: its hooks could not be added (%s)",
             (unsigned long long)cap.graphId, ncclGetErrorString(res));
      }
    }
  }
  if (!st->tracking) return ncclSuccess;
  gpu::Event start = nullptr, end = nullptr;
  UCHECK(createEvent(&start));
  ncclResult_t res = createEvent(&end);
  if (res == ncclSuccess) res = gpu::eventRecordExternal(start, s);
  if (res != ncclSuccess) {
    destroyEvent(start);
    destroyEvent(end);
    if (res != ncclInvalidUsage) return res;
    // The runtime has no external event records: graphs run untracked.
    st->tracking = false;
    if (!gExternalUnsupported.exchange(true)) {
      WARN("This GPU runtime cannot record host-queryable events inside graphs: collectives in captured graphs "
           "run without timeout tracking (eager collectives are still tracked)");
    }
    return ncclSuccess;
  }
  c->graphId = cap.graphId;
  c->start = start;
  c->end = end;
  return ncclSuccess;
}

ncclResult_t GraphEventTracker::recordEnd(gpu::Stream s, Captured* c, const WorkDesc& desc) {
  if (c->start == nullptr) return ncclSuccess;
  ncclResult_t res = gpu::eventRecordExternal(c->end, s);
  // On failure the start node may still be in the graph: keep the pair, untimed.
  keep(c, desc, res == ncclSuccess);
  return res;
}

// Hands a captured pair to its graph (timed or not), or destroys it when the
// graph is gone (cannot happen while the capture is open).
void GraphEventTracker::keep(Captured* c, const WorkDesc& desc, bool timed) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = graphs_.find(c->graphId);
  if (it == graphs_.end()) {
    destroyEvent(c->start);
    destroyEvent(c->end);
  } else {
    it->second->works.push_back(GraphWork{c->start, c->end, desc, timed, -1});
  }
  *c = Captured{};
}

void GraphEventTracker::abandon(Captured* c) {
  if (c->start == nullptr) return;
  keep(c, WorkDesc{}, false);
}

void GraphEventTracker::releaseState(GraphState* st) {
  for (GraphWork& w : st->works) {
    destroyEvent(w.start);
    destroyEvent(w.end);
  }
  st->works.clear();
  if (st->slot != nullptr) returnSlot(st->slot);
  st->slot = nullptr;
}

void GraphEventTracker::cleanupReleasedGraphs() {
  for (auto it = graphs_.begin(); it != graphs_.end();) {
    if (it->second->slot->released.load(std::memory_order_acquire)) {
      releaseState(it->second.get());
      it = graphs_.erase(it);
    } else {
      ++it;
    }
  }
}

TrackerCheck GraphEventTracker::checkAll(int64_t nowMs, int64_t timeoutMs) {
  TrackerCheck out;
  out.inGraph = true;
  std::lock_guard<std::mutex> lock(mu_);
  cleanupReleasedGraphs();
  for (auto& kv : graphs_) {
    GraphState& st = *kv.second;
    if (!st.tracking) continue;
    uint64_t replays = st.slot->replays.load(std::memory_order_acquire);
    bool newReplay = replays != st.lastReplays;
    st.lastReplays = replays;
    for (GraphWork& w : st.works) {
      if (newReplay) w.runningSinceMs = -1;
      if (!w.timed) continue;
      if (gpu::eventQuery(w.end) != ncclInProgress) {          // completed (or failed: not ours to report)
        w.runningSinceMs = -1;
        continue;
      }
      if (gpu::eventQuery(w.start) == ncclInProgress) {        // this replay has not reached it
        w.runningSinceMs = -1;
        continue;
      }
      if (w.runningSinceMs < 0) w.runningSinceMs = nowMs;      // in progress
      int64_t elapsed = nowMs - w.runningSinceMs;
      if (timeoutMs > 0 && elapsed > timeoutMs && !out.timedOut) {
        out.timedOut = true;
        out.desc = w.desc;
        out.elapsedMs = elapsed;
      }
    }
  }
  return out;
}

void GraphEventTracker::destroyAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& kv : graphs_) releaseState(kv.second.get());
  graphs_.clear();
}

size_t GraphEventTracker::graphCount() {
  std::lock_guard<std::mutex> lock(mu_);
  return graphs_.size();
}

size_t GraphEventTracker::eventCount() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto& kv : graphs_) n += 2 * kv.second->works.size();
  return n;
}

}  // namespace uniccl
