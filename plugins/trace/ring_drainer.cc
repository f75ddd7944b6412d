#include "ring_drainer.h"

#include <algorithm>
#include <cstring>

namespace trace {

namespace {

// Runs gathered before they are written in the middle of a pass: a ring
// whose records alternate between kept and left out splits into many.
constexpr size_t kMaxRunsPerWrite = 1024;

}  // namespace

RingDrainer::RingDrainer(ThreadRings* rings, SpillFile* spill)
    : rings_(rings), spill_(spill), slots_(kMaxTracedContexts) {
  clock_.start();
}

void RingDrainer::addRank(uint16_t slot, TraceContext* ctx, uint64_t maxEvents) {
  slots_[slot] = Slot{};
  slots_[slot].ctx = ctx;
  slots_[slot].maxEvents = maxEvents;
  if (maxEvents == 0) ctx->atMaxEvents.store(true, std::memory_order_relaxed);
}

RankDrainCounts RingDrainer::finishRank(uint16_t slot) {
  RankDrainCounts c = slots_[slot].counts;
  c.spillFailed = c.spillFailed || spillFailed_;
  slots_[slot] = Slot{};
  return c;
}

bool RingDrainer::admit(uint16_t slot) {
  if (slot >= slots_.size() || slots_[slot].ctx == nullptr) return false;   // not a rank's (any more)
  Slot& s = slots_[slot];
  if (s.admitted < s.maxEvents) {
    if (++s.admitted == s.maxEvents) s.ctx->atMaxEvents.store(true, std::memory_order_relaxed);
    return true;
  }
  s.counts.droppedMaxEvents++;
  return false;
}

void RingDrainer::skip(uint16_t slot) {
  if (slot < slots_.size() && slots_[slot].ctx != nullptr) slots_[slot].counts.droppedMaxEvents++;
}

bool RingDrainer::anyRingFuller(double share) const {
  const uint32_t n = rings_->count();
  for (uint32_t i = 0; i < n; i++) {
    const EventRing* r = rings_->at(i);
    if ((double)(r->published() - r->consumed()) > share * r->capacity()) return true;
  }
  return false;
}

RingDrainer::PassResult RingDrainer::pass(bool final) {
  pass_++;
  PassResult result;
  // Where each ring's records end, then the clock: every record moved in
  // this pass was stamped before the pair taken now.
  const uint32_t n = rings_->count();
  heads_.resize(n);
  bool any = false;
  for (uint32_t i = 0; i < n; i++) {
    const EventRing* r = rings_->at(i);
    heads_[i] = r->published();
    const uint64_t waiting = heads_[i] - r->consumed();
    if (waiting == 0) continue;
    any = true;
    result.fullest = std::max(result.fullest, (double)waiting / r->capacity());
  }
  if (!any) {
    idlePass_ = pass_;
    idleNowNs_ = nowNs();
    return result;
  }
  if (!clock_.calibrate(final)) return result;
  const int64_t now = nowNs();
  passHead_ = SpillPass{SpillBlock::kPass, 0, pass_, now, idlePass_, idleNowNs_, 0};
  passHeadWritten_ = false;
  for (uint32_t i = 0; i < n; i++)
    if (heads_[i] != rings_->at(i)->consumed()) drainRing(i, heads_[i]);
  write();
  if (passHeadWritten_) {
    idlePass_ = 0;
  } else {   // nothing was kept: to the spill's reader, a pass that found nothing
    idlePass_ = pass_;
    idleNowNs_ = now;
  }
  return result;
}

void RingDrainer::drainRing(uint32_t index, uint64_t head) {
  EventRing* ring = rings_->at(index);
  // Read after the ring's head: a ring handed to a new thread holds only
  // that thread's records.
  const long tid = rings_->ownerTid(index);
  const uint64_t startsBefore = ring->startsRead();
  uint64_t starts = startsBefore;
  uint64_t t = ring->consumed();
  while (t < head) {
    // Up to the ring's end, or to where the records end: one piece of memory.
    const uint64_t end = std::min<uint64_t>(head, t + ring->cellsToEnd(t));
    uint64_t runFrom = t, runStarts = starts;
    while (t < end) {
      RecordHead h;
      memcpy(&h, ring->cellAt(t), sizeof(h));
      bool keep = true;
      switch (h.kind) {
        case RecordKind::kStart:
          keep = admit(h.ctxSlot);
          starts++;
          break;
        case RecordKind::kSkippedStart:
          skip(h.ctxSlot);
          keep = false;
          break;
        case RecordKind::kPad:
          keep = false;
          break;
        default:
          break;
      }
      if (!keep) {
        addRun(index, tid, ring, runFrom, t, runStarts);
        runFrom = t + h.cells;
        runStarts = starts;
      }
      t += h.cells;
    }
    addRun(index, tid, ring, runFrom, t, runStarts);
  }
  releases_.push_back(Release{ring, t, starts - startsBefore});
  if (runs_.size() >= kMaxRunsPerWrite) write();
}

void RingDrainer::addRun(uint32_t index, long tid, const EventRing* ring, uint64_t from, uint64_t to,
                         uint64_t startsBefore) {
  if (to == from) return;
  runs_.push_back(Run{SpillRun{SpillBlock::kRun, index, (uint32_t)(to - from), 0, (int64_t)tid, startsBefore},
                      ring->cellAt(from)});
}

void RingDrainer::write() {
  if (!runs_.empty()) {
    parts_.clear();
    uint32_t nPairs = 0;
    if (!passHeadWritten_) {
      // The pairs taken since the last pass written; older ones than the
      // last few convert no record of this pass.
      nPairs = (uint32_t)std::min<uint64_t>(clock_.pairsAdded() - pairsSpilled_, kMaxPairsPerPass);
      for (uint32_t k = 0; k < nPairs; k++) pairs_[k] = clock_.recent(nPairs - 1 - k);
      passHead_.nPairs = nPairs;
      parts_.push_back(iovec{&passHead_, sizeof(passHead_)});
      if (nPairs != 0) parts_.push_back(iovec{pairs_, nPairs * sizeof(TickPair)});
    }
    for (Run& r : runs_) {
      parts_.push_back(iovec{&r.head, sizeof(r.head)});
      parts_.push_back(iovec{const_cast<Cell*>(r.cells), (size_t)r.head.cells * sizeof(Cell)});
    }
    if (!spillFailed_ && spill_->append(parts_.data(), parts_.size())) {
      if (!passHeadWritten_) pairsSpilled_ = clock_.pairsAdded();
      passHeadWritten_ = true;
    } else {
      spillFailed_ = true;
      for (const Run& r : runs_) countLost(r);
    }
    runs_.clear();
  }
  for (const Release& r : releases_) r.ring->release(r.to, r.starts);
  releases_.clear();
}

void RingDrainer::countLost(const Run& run) {
  for (uint32_t i = 0; i < run.head.cells;) {
    RecordHead h;
    memcpy(&h, &run.cells[i], sizeof(h));
    if (h.kind == RecordKind::kStart && h.ctxSlot < slots_.size()) slots_[h.ctxSlot].counts.droppedSpill++;
    i += h.cells;
  }
}

}  // namespace trace
