#include "rank_trace.h"

#include <algorithm>

#include "event_json.h"
#include "trace_clock.h"

namespace trace {

namespace {

// Written buckets kept for reuse with their memory (a 100 ms window has
// about a hundred at once).
constexpr size_t kMaxSpareBuckets = 128;
// Formatted text handed to the file once there is this much.
constexpr size_t kFlushBytes = 1 << 20;

std::string hex16(uint64_t v) {
  static const char kHex[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; i--, v >>= 4) s[(size_t)i] = kHex[v & 15];
  return s;
}

// Text of a JSON string value, quotes included.
std::string quoted(const std::string& s) {
  JsonOut o(64);
  o.str(s.c_str());
  return std::string(o.data(), o.size());
}

}  // namespace

RankTrace::RankTrace(const TraceContext& ctx, FILE* file, const RankTraceOptions& options, WriterPools* pools)
    : pid_(ctx.rank), file_(file), options_(options), pools_(pools) {
  const std::string commId = hex16(ctx.commId);
  // otherData, with the counts known only at the end, closes the file.
  otherData_ = "\"otherData\":{\"commId\":\"" + commId + "\",\"commName\":" + quoted(ctx.commName) +
               ",\"rank\":" + std::to_string(ctx.rank) + ",\"nRanks\":" + std::to_string(ctx.nRanks) +
               ",\"nNodes\":" + std::to_string(ctx.nNodes) + ",\"clockOrigin\":\"unix time 1700000000 s\"";
  const std::string processName =
      "rank " + std::to_string(pid_) + (ctx.commName.empty() ? "" : " ") + ctx.commName + " (comm " + commId + ")";
  out_.lit("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":");
  out_.i64(pid_);
  out_.lit(",\"args\":{\"name\":");
  out_.str(processName.c_str());
  out_.lit("}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":");
  out_.i64(pid_);
  out_.lit(",\"args\":{\"sort_index\":");
  out_.i64(pid_);
  out_.lit("}}");
  flush();
}

RankTrace::~RankTrace() {
  if (file_ != nullptr) fclose(file_);
  for (auto& b : buckets_) b.second->text.release(pools_->text);
}

void RankTrace::started(PendingEvent* e) {
  const uint32_t type = e->type();
  e->placedStart = e->startNs;
  e->track = e->tid;
  if (type == ncclProfileKernelCh) {
    e->track = kGpuTrackBase + e->first.head.small;
  } else if (type == ncclProfileProxyOp) {
    e->track = proxyOpTrack(*e);
    proxyOpTracks_[e->id] = e->track;
  } else if (type == ncclProfileProxyStep || type == ncclProfileNetPlugin) {
    // Pipelined steps overlap: async slices on their ProxyOp's track.
    auto op = proxyOpTracks_.find(e->first.parentId);
    if (op != proxyOpTracks_.end()) e->track = op->second;
  }
  if (isAsync(type)) {
    waitAsync(e);   // the begin is written in start order, stopped or not
  } else if (e->stopNs < 0) {
    if (type == ncclProfileKernelCh) {
      const int64_t gs = gpuToTraceNs(e->first.word, e->startNs);
      if (gs >= 0) e->placedStart = std::min(e->placedStart, gs);
    }
    addOpen(e);
  }
}

void RankTrace::stopped(PendingEvent* e, uint64_t pass) {
  const uint32_t type = e->type();
  if (type == ncclProfileProxyOp) stoppedProxyOps_.emplace_back(e->id, pass);
  if (isAsync(type)) {
    if (!e->beginWritten) return;   // waiting: written with its begin
    e->placedStop = std::max(e->stopNs, e->placedStart);
    separate();
    appendAsyncEnd(out_, *e, pid_, false);
    pools_->events.put(e);
    return;
  }
  removeOpen(e);
  place(e, e->stopNs);
  complete(e);
}

void RankTrace::addOpen(PendingEvent* e) {
  e->openPrev = nullptr;
  e->openNext = open_;
  if (open_ != nullptr) open_->openPrev = e;
  open_ = e;
  e->inOpenList = true;
}

void RankTrace::removeOpen(PendingEvent* e) {
  if (!e->inOpenList) return;
  if (e->openPrev != nullptr) e->openPrev->openNext = e->openNext;
  else open_ = e->openNext;
  if (e->openNext != nullptr) e->openNext->openPrev = e->openPrev;
  e->inOpenList = false;
}

int64_t RankTrace::openStart() const {
  int64_t m = INT64_MAX;
  for (const PendingEvent* e = open_; e != nullptr; e = e->openNext) m = std::min(m, e->placedStart);
  return m;
}

void RankTrace::place(PendingEvent* e, int64_t stopNs) {
  e->placedStart = e->startNs;
  e->placedStop = stopNs;
  if (e->type() == ncclProfileKernelCh) {
    const int64_t gs = gpuToTraceNs(e->first.word, e->startNs);
    const int64_t ge = gpuToTraceNs(e->gpuStop, e->startNs);
    if (gs >= 0 && ge >= gs) {
      e->placedStart = gs;
      e->placedStop = ge;
      e->gpuClock = true;
    }
  }
  if (e->placedStop < e->placedStart) e->placedStop = e->placedStart;
}

RankTrace::Bucket* RankTrace::bucketFor(int64_t start) {
  const int64_t key = start >> kBucketShift;
  if (key < writtenBelow_) return nullptr;
  if (key == lastKey_) return lastBucket_;
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    std::unique_ptr<Bucket> b;
    if (!spareBuckets_.empty()) {
      b = std::move(spareBuckets_.back());
      spareBuckets_.pop_back();
    } else {
      b.reset(new Bucket);
    }
    it = buckets_.emplace(key, std::move(b)).first;
  }
  lastKey_ = key;
  lastBucket_ = it->second.get();
  return lastBucket_;
}

void RankTrace::complete(PendingEvent* e) {
  Bucket* b = bucketFor(e->placedStart);
  if (b == nullptr) {   // its bucket is written: late, written now
    countOrder(e->placedStart);
    nameTrack(e->track);
    separate();
    appendComplete(out_, *e, pid_, e->unfinished);
    written_++;
  } else {
    scratch_.clear();
    appendComplete(scratch_, *e, pid_, e->unfinished);
    const uint32_t n = (uint32_t)scratch_.size();
    if (n > ChunkPool::kChunkBytes) {   // no event is this long, unless the library's names are
      countOrder(e->placedStart);
      nameTrack(e->track);
      separate();
      out_.raw(scratch_.data(), n);
      written_++;
    } else {
      const ChunkedText::Place at = b->text.append(pools_->text, scratch_.data(), n);
      b->events.push_back(Waiting{e->placedStart, -e->placedStop, e->id, e->track, nullptr, at, n});
      waitingBytes_ += n;
    }
  }
  pools_->events.put(e);
}

void RankTrace::waitAsync(PendingEvent* e) {
  Bucket* b = bucketFor(e->placedStart);
  if (b == nullptr) {
    writeAsync(e);
    return;
  }
  b->events.push_back(Waiting{e->placedStart, -INT64_MAX, e->id, e->track, e, {0, 0}, 0});
  waitingBytes_ += sizeof(PendingEvent);
}

void RankTrace::writeBucket(Buckets::iterator it) {
  Bucket& b = *it->second;
  std::sort(b.events.begin(), b.events.end());
  writtenBelow_ = it->first + 1;
  for (const Waiting& w : b.events) {
    if (w.async != nullptr) {
      writeAsync(w.async);
      waitingBytes_ -= sizeof(PendingEvent);
      continue;
    }
    countOrder(w.start);
    nameTrack(w.track);
    separate();
    out_.raw(b.text.at(w.text), w.textLength);
    written_++;
    waitingBytes_ -= w.textLength;
    // A burst is handed to the file as it goes: the buffer stays small.
    if (out_.size() > kFlushBytes) flush();
  }
  b.events.clear();
  b.text.release(pools_->text);
  if (lastBucket_ == &b) {
    lastKey_ = INT64_MIN;
    lastBucket_ = nullptr;
  }
  if (spareBuckets_.size() < kMaxSpareBuckets) spareBuckets_.push_back(std::move(it->second));
  buckets_.erase(it);
}

void RankTrace::writeReady(int64_t nowNs, uint64_t pass) {
  const int64_t bound = std::min(nowNs - options_.reorderNs, openStart());
  while (!buckets_.empty()) {
    const auto it = buckets_.begin();
    const bool due = ((it->first + 1) << kBucketShift) <= bound;   // all of it starts before the bound
    if (!due && waitingBytes_ <= options_.maxWaitingBytes) break;
    writeBucket(it);
  }
  // A ProxyOp's track is kept for steps that another thread's ring may
  // still bring: every record published before the op's stop is read by
  // the end of the next pass.
  size_t keep = 0;
  for (const auto& s : stoppedProxyOps_) {
    if (s.second + 2 <= pass) proxyOpTracks_.erase(s.first);
    else stoppedProxyOps_[keep++] = s;
  }
  stoppedProxyOps_.resize(keep);
}

void RankTrace::nameTrack(long track) {
  if (!namedTracks_.insert(track).second) return;
  separate();
  appendTrackName(out_, pid_, track);
}

void RankTrace::countOrder(int64_t start) {
  if (start < lastWrittenStart_) late_++;
  else lastWrittenStart_ = start;
}

void RankTrace::writeAsync(PendingEvent* e) {
  countOrder(e->placedStart);
  nameTrack(e->track);
  separate();
  written_++;
  appendAsyncBegin(out_, *e, pid_, e->unfinished);
  e->nStatesWritten = e->nStates;
  if (e->stopNs < 0 && !e->unfinished) {
    e->beginWritten = true;   // its end comes with its stop (stopped())
    return;
  }
  if (!e->unfinished) e->placedStop = e->stopNs;
  e->placedStop = std::max(e->placedStop, e->placedStart);
  separate();
  appendAsyncEnd(out_, *e, pid_, false);
  pools_->events.put(e);
}

RankTraceSummary RankTrace::finish(int64_t endNs, const std::vector<PendingEvent*>& open, const DropCounts& drops) {
  for (PendingEvent* e : open) {
    e->unfinished = true;
    if (!isAsync(e->type())) {
      removeOpen(e);
      place(e, endNs);
      complete(e);
    } else if (e->beginWritten) {
      e->placedStop = std::max(endNs, e->placedStart);
      separate();
      appendAsyncEnd(out_, *e, pid_, true);
      pools_->events.put(e);
    } else {
      e->placedStop = endNs;   // waiting: written with its begin
    }
  }
  while (!buckets_.empty()) writeBucket(buckets_.begin());
  RankTraceSummary s;
  s.written = written_;
  s.maxEvents = options_.maxEvents;
  s.droppedMaxEvents = drops.maxEvents;
  s.droppedRingFull = drops.ringFull;
  s.droppedSpill = drops.spill;
  s.lostUpdates = drops.lostUpdates;
  s.late = late_;
  // "dropped": every event not in the file (check_trace.py accepts orphans then).
  out_.lit("\n],\n");
  out_.raw(otherData_.data(), otherData_.size());
  out_.lit(",\"dropped\":");
  out_.u64(s.droppedMaxEvents + s.droppedRingFull + s.droppedSpill);
  out_.lit(",\"droppedRingFull\":");
  out_.u64(s.droppedRingFull);
  out_.lit(",\"lostUpdates\":");
  out_.u64(s.lostUpdates);
  out_.lit(",\"lateEvents\":");
  out_.u64(s.late);
  out_.lit("}}\n");
  flush();
  s.writeFailed = writeFailed_ || drops.spillFailed || fclose(file_) != 0;
  file_ = nullptr;
  return s;
}

void RankTrace::flushIfLarge() {
  if (out_.size() >= kFlushBytes) flush();
}

void RankTrace::flush() {
  if (out_.size() == 0 || file_ == nullptr) return;
  if (fwrite(out_.data(), 1, out_.size(), file_) != out_.size() || fflush(file_) != 0) writeFailed_ = true;
  out_.clear();
}

}  // namespace trace
