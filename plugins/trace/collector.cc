#include "collector.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "trace_clock.h"

namespace trace {

Collector::Collector(ThreadRings* rings) : rings_(rings), ranks_(kMaxRanks, nullptr) {}

Collector::~Collector() {
  for (RankTrace* r : ranks_) delete r;
}

bool Collector::addRank(uint16_t slot, const TraceContext& ctx, FILE* file, const RankTraceOptions& options) {
  ranks_[slot] = new (std::nothrow) RankTrace(ctx, file, options, &pools_);
  if (ranks_[slot] == nullptr) return false;
  liveSlots_.push_back(slot);
  return true;
}

void Collector::pass(bool final) {
  pass_++;
  // Where each ring's records end, then the clock: every record read in
  // this pass was stamped before the pair the converter takes now.
  const uint32_t n = rings_->count();
  heads_.resize(n);
  for (uint32_t i = 0; i < n; i++) heads_[i] = rings_->at(i)->published();
  if (!clock_.calibrate(final)) return;
  const int64_t now = nowNs();
  for (uint32_t i = 0; i < n; i++) {
    long tid = -1;
    rings_->at(i)->drain(heads_[i], [&](const Cell* c, unsigned cells, uint64_t startId) {
      // Read after the ring's head: a ring handed to a new thread holds only
      // that thread's records.
      if (tid < 0) tid = rings_->ownerTid(i);
      read(tid, c, cells, startId);
    });
  }
  forgetEarlyRecords();
  for (uint16_t slot : liveSlots_) {
    ranks_[slot]->writeReady(now, pass_);
    ranks_[slot]->flush();
  }
}

void Collector::read(long tid, const Cell* c, unsigned cells, uint64_t startId) {
  RecordHead h;
  memcpy(&h, c, sizeof(h));
  if (h.kind == RecordKind::kStart) {
    onStart(tid, c, cells, startId);
  } else if (h.kind == RecordKind::kState || h.kind == RecordKind::kStop) {
    UpdateRecord u;
    memcpy(&u, c, sizeof(u));
    onUpdate(u);
  }
}

void Collector::onStart(long tid, const Cell* c, unsigned cells, uint64_t id) {
  StartRecord s;
  memcpy(&s, c, sizeof(s));
  RankTrace* rank = s.head.ctxSlot < ranks_.size() ? ranks_[s.head.ctxSlot] : nullptr;
  PendingEvent* early = open_.find(id);   // its stop or a state came first
  if (rank == nullptr || !rank->admit()) {
    if (early != nullptr) {
      open_.erase(id);
      pools_.events.put(early);
    }
    return;
  }
  PendingEvent* e = early;
  if (e == nullptr) {
    e = pools_.events.take();
    e->id = id;
    e->stopNs = -1;
  }
  e->rank = rank;
  e->tid = tid;
  e->first = s;
  e->startNs = clock_.toNs(s.ticks);
  if (cells > 1) memcpy(e->rest, c + 1, (cells - 1) * sizeof(Cell));
  rank->started(e);
  if (e->stopNs >= 0) {
    if (early != nullptr) open_.erase(id);
    rank->stopped(e, pass_);
  } else if (early == nullptr) {
    open_.insert(id, e);
  }
}

void Collector::onUpdate(const UpdateRecord& u) {
  PendingEvent* e = open_.find(u.id);
  if (e == nullptr) {
    // The start was read already: the event was dropped, written, or its
    // rank finished. Otherwise the start is in a ring not read yet.
    const EventRing* r = rings_->ringOfId(u.id);
    if (r == nullptr || r->startRead(u.id)) return;
    e = pools_.events.take();
    e->id = u.id;
    e->stopNs = -1;
    e->seenInPass = pass_;
    open_.insert(u.id, e);
    early_.emplace_back(u.id, e);
  }
  if (u.head.kind == RecordKind::kState) {
    if (u.head.code == ncclProfilerKernelChStop) e->gpuStop = u.value;
    if (e->nStates < kMaxStates) {
      e->stateCodes[e->nStates] = (uint8_t)u.head.code;
      e->stateNs[e->nStates] = clock_.toNs(u.ticks);
      e->stateValues[e->nStates] = u.value;
      e->nStates++;
    }
    return;
  }
  if (e->stopNs >= 0) return;   // stopped twice: the first counts
  e->stopNs = clock_.toNs(u.ticks);
  if (e->rank != nullptr) {
    open_.erase(u.id);
    e->rank->stopped(e, pass_);
  }
}

void Collector::forgetEarlyRecords() {
  // A start published before its stop is read at the latest in the pass
  // after the one that read the stop; one that never came was not ours.
  size_t keep = 0;
  for (const auto& x : early_) {
    PendingEvent* e = x.second;
    if (e->id != x.first || e->rank != nullptr) continue;   // its start came
    if (e->seenInPass + 2 <= pass_) {
      open_.erase(x.first);
      pools_.events.put(e);
    } else {
      early_[keep++] = x;
    }
  }
  early_.resize(keep);
}

RankTraceSummary Collector::finishRank(uint16_t slot, uint64_t droppedRingFull, uint64_t lostUpdates) {
  pass(true);
  RankTrace* rank = ranks_[slot];
  std::vector<PendingEvent*> open;
  open_.forEach([&](PendingEvent* e) {
    if (e->rank == rank) open.push_back(e);
  });
  for (PendingEvent* e : open) open_.erase(e->id);
  RankTraceSummary s = rank->finish(nowNs(), open, droppedRingFull, lostUpdates);
  delete rank;
  ranks_[slot] = nullptr;
  liveSlots_.erase(std::find(liveSlots_.begin(), liveSlots_.end(), slot));
  return s;
}

}  // namespace trace
