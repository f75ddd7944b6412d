#include "collector.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "thread_rings.h"
#include "trace_clock.h"

namespace trace {

namespace {

// What is read from the spill at once.
constexpr size_t kBufBytes = 256 << 10;
// How often readSpill() asks whether to stop: every few tens of
// microseconds of formatting, in which a thread reporting events as fast as
// it can writes a few thousand cells.
constexpr unsigned kRecordsPerStopCheck = 32;

}  // namespace

Collector::Collector(SpillFile* spill)
    : spill_(spill), ranks_(kMaxTracedContexts, nullptr), startsSeen_(ThreadRings::kMaxRings, 0) {}

Collector::~Collector() {
  for (RankTrace* r : ranks_) delete r;
}

bool Collector::addRank(uint16_t slot, const TraceContext& ctx, FILE* file, const RankTraceOptions& options) {
  ranks_[slot] = new (std::nothrow) RankTrace(ctx, file, options, &pools_);
  if (ranks_[slot] == nullptr) return false;
  liveSlots_.push_back(slot);
  return true;
}

const unsigned char* Collector::peek(size_t n) {
  if (bufEnd_ - bufAt_ >= n) return &buf_[bufAt_];
  if (!buf_) buf_.reset(new unsigned char[kBufBytes]);
  const size_t left = bufEnd_ - bufAt_;
  memmove(&buf_[0], &buf_[bufAt_], left);
  bufAt_ = 0;
  bufEnd_ = left;
  const uint64_t size = spill_->size();
  const size_t want = (size_t)std::min<uint64_t>(kBufBytes - left, size - loaded_);
  const size_t got = want != 0 ? spill_->read(loaded_, &buf_[left], want) : 0;
  if (got != want) readable_ = false;
  bufEnd_ += got;
  loaded_ += got;
  return bufEnd_ >= n ? &buf_[0] : nullptr;
}

bool Collector::readSpill(const std::function<bool()>& stop) {
  unsigned sinceCheck = 0;
  for (;;) {
    if (stop && ++sinceCheck == kRecordsPerStopCheck) {
      sinceCheck = 0;
      if (stop()) {
        flushRanks();
        return false;
      }
    }
    if (run_.cells == 0) {
      if (!readBlockHead()) break;
      continue;
    }
    const unsigned char* p = peek(sizeof(RecordHead));
    RecordHead h;
    if (p != nullptr) memcpy(&h, p, sizeof(h));
    if (p == nullptr || h.cells == 0 || h.cells > kMaxRecordCells || h.cells > run_.cells ||
        (p = peek((size_t)h.cells * sizeof(Cell))) == nullptr) {
      readable_ = false;
      break;
    }
    // Copied out: the buffer's bytes are not aligned for cells.
    Cell record[kMaxRecordCells];
    memcpy(record, p, (size_t)h.cells * sizeof(Cell));
    consume((size_t)h.cells * sizeof(Cell));
    run_.cells -= h.cells;
    readRecord(record, h.cells);
  }
  // The end of the spill, which ends with a pass (the drainer writes whole
  // passes, and only while no reader runs).
  if (inPass_) endPass();
  flushRanks();
  run_ = SpillRun{};
  if (spill_->clear()) {
    bufAt_ = bufEnd_ = 0;
    loaded_ = 0;
  } else {   // read again from here next time
    bufAt_ = bufEnd_ = 0;
    loaded_ = spill_->size();
  }
  return true;
}

bool Collector::readBlockHead() {
  const unsigned char* p = peek(sizeof(SpillBlock));
  if (p == nullptr) return false;
  SpillBlock kind;
  memcpy(&kind, p, sizeof(kind));
  if (kind == SpillBlock::kRun && (p = peek(sizeof(SpillRun))) != nullptr) {
    memcpy(&run_, p, sizeof(run_));
    consume(sizeof(run_));
    if (run_.ring < ThreadRings::kMaxRings) return true;
  } else if (kind == SpillBlock::kPass && (p = peek(sizeof(SpillPass))) != nullptr) {
    SpillPass pass;
    memcpy(&pass, p, sizeof(pass));
    const size_t pairBytes = (size_t)pass.nPairs * sizeof(TickPair);
    if (pass.nPairs <= 64 && (p = peek(sizeof(pass) + pairBytes)) != nullptr) {
      if (inPass_) endPass();
      beginPass(pass);
      for (uint32_t i = 0; i < pass.nPairs; i++) {
        TickPair pair;
        memcpy(&pair, p + sizeof(pass) + i * sizeof(TickPair), sizeof(pair));
        clock_.add(pair);
      }
      consume(sizeof(pass) + pairBytes);
      return true;
    }
  }
  readable_ = false;
  run_ = SpillRun{};
  return false;
}

void Collector::beginPass(const SpillPass& p) {
  // Passes that found nothing came in between: the window passed then.
  if (p.idlePass > pass_) {
    pass_ = p.idlePass;
    forgetEarlyRecords();
    letWindowPass(p.idleNowNs);
  }
  pass_ = p.pass;
  passNowNs_ = p.nowNs;
  inPass_ = true;
}

void Collector::idleUntil(uint64_t pass, int64_t nowNs) {
  if (pass <= pass_ || inPass_ || behind()) return;
  pass_ = pass;
  forgetEarlyRecords();
  letWindowPass(nowNs);
  flushRanks();
}

void Collector::endPass() {
  forgetEarlyRecords();
  letWindowPass(passNowNs_);
  inPass_ = false;
}

void Collector::letWindowPass(int64_t nowNs) {
  for (uint16_t slot : liveSlots_) {
    ranks_[slot]->writeReady(nowNs, pass_);
    ranks_[slot]->flushIfLarge();
  }
}

void Collector::flushRanks() {
  for (uint16_t slot : liveSlots_) ranks_[slot]->flush();
}

void Collector::readRecord(const Cell* c, unsigned cells) {
  RecordHead h;
  memcpy(&h, c, sizeof(h));
  if (h.kind == RecordKind::kStart) {
    const uint64_t seq = ++run_.startsBefore;
    uint64_t& seen = startsSeen_[run_.ring];
    seen = std::max(seen, seq);
    onStart(c, cells, (uint64_t)run_.ring << kRingIdShift | seq);
  } else if (h.kind == RecordKind::kState || h.kind == RecordKind::kStop) {
    UpdateRecord u;
    memcpy(&u, c, sizeof(u));
    onUpdate(u);
  }
}

void Collector::onStart(const Cell* c, unsigned cells, uint64_t id) {
  StartRecord s;
  memcpy(&s, c, sizeof(s));
  // The drainer spills only the starts of live ranks it takes.
  RankTrace* rank = s.head.ctxSlot < ranks_.size() ? ranks_[s.head.ctxSlot] : nullptr;
  PendingEvent* early = open_.find(id);   // its stop or a state came first
  if (rank == nullptr) {
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
  e->tid = (long)run_.tid;
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
    // rank finished. Otherwise the start is in a run not read yet.
    const uint64_t ring = u.id >> kRingIdShift;
    const uint64_t seq = u.id & ((1ull << kRingIdShift) - 1);
    if (ring >= startsSeen_.size() || seq <= startsSeen_[ring]) return;
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
  // after the one that read the stop; one that never came was not ours
  // (or its start was not taken).
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

RankTraceSummary Collector::finishRank(uint16_t slot, const DropCounts& drops) {
  RankTrace* rank = ranks_[slot];
  std::vector<PendingEvent*> open;
  open_.forEach([&](PendingEvent* e) {
    if (e->rank == rank) open.push_back(e);
  });
  for (PendingEvent* e : open) open_.erase(e->id);
  RankTraceSummary s = rank->finish(nowNs(), open, drops);
  delete rank;
  ranks_[slot] = nullptr;
  liveSlots_.erase(std::find(liveSlots_.begin(), liveSlots_.end(), slot));
  return s;
}

}  // namespace trace
