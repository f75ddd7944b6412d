#include "common/device_api/copy_progress.h"

#include "common/check.h"

namespace uniccl {

ncclResult_t CopyProgress::init() {
  UCHECK(gpu::streamCreate(&stream_));
  void* host = nullptr;
  UCHECK(gpu::hostAllocMapped(&host, &wordDev_, 64));
  wordHost_ = static_cast<uint32_t*>(host);
  __atomic_store_n(wordHost_, 0u, __ATOMIC_RELAXED);
  // One store of the starting value shows whether the runtime writes values
  // from streams at all; if not, copies are tracked by events.
  const ncclResult_t r = gpu::streamWriteValue32(stream_, wordDev_, 0);
  if (r == ncclInvalidUsage) {
    (void)gpu::hostFree(wordHost_);
    wordHost_ = nullptr;
    wordDev_ = nullptr;
    return ncclSuccess;
  }
  return r;
}

void CopyProgress::destroy() {
  // Teardown goes on past a failure (the backend logged it): a stream that
  // cannot be waited for has failed for good.
  if (stream_ != nullptr) {
    (void)gpu::streamSynchronize(stream_);
    (void)gpu::streamDestroy(stream_);
    stream_ = nullptr;
  }
  if (wordHost_ != nullptr) (void)gpu::hostFree(wordHost_);
  wordHost_ = nullptr;
  wordDev_ = nullptr;
  for (gpu::Event e : events_) (void)gpu::eventDestroy(e);
  events_.clear();
  free_.clear();
}

ncclResult_t CopyProgress::copy(void* dst, const void* src, size_t bytes, CopyTicket* t) {
  *t = CopyTicket{};
  UCHECK(gpu::memcpyAsync(dst, src, bytes, stream_));
  uint32_t seq = ++issued_;
  if (seq == 0) seq = ++issued_;   // 0 names no copy
  if (wordHost_ != nullptr) {
    UCHECK(gpu::streamWriteValue32(stream_, wordDev_, seq));
  } else {
    if (free_.empty()) {
      gpu::Event e = nullptr;
      UCHECK(gpu::eventCreate(&e, gpu::kEventDisableTiming));
      events_.push_back(e);
      free_.push_back(e);
    }
    t->ev = free_.back();
    free_.pop_back();
    if (ncclResult_t r = gpu::eventRecord(t->ev, stream_); r != ncclSuccess) {
      free_.push_back(t->ev);
      t->ev = nullptr;
      return r;
    }
  }
  t->seq = seq;
  return ncclSuccess;
}

ncclResult_t CopyProgress::done(const CopyTicket& t) const {
  if (!t.pending()) return ncclSuccess;
  if (t.ev != nullptr) return gpu::eventQuery(t.ev);
  // Copies on one stream end in order; the difference survives the wrap of
  // the 32-bit sequence.
  const uint32_t finished = __atomic_load_n(wordHost_, __ATOMIC_ACQUIRE);
  return (int32_t)(finished - t.seq) >= 0 ? ncclSuccess : ncclInProgress;
}

void CopyProgress::release(CopyTicket* t) {
  if (t->ev != nullptr) free_.push_back(t->ev);
  *t = CopyTicket{};
}

}  // namespace uniccl
