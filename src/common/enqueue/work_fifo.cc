#include "common/enqueue/work_fifo.h"

#include <cstring>

#include "common/check.h"
#include "common/enqueue/event_callback_queue.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl {

WorkFifo::~WorkFifo() {
  if (host_ != nullptr) (void)gpu::hostFree(host_);
}

uint32_t WorkFifo::normalizeBytes(int64_t requested) {
  int64_t n = requested;
  if (n < kMinBytes) n = kMinBytes;
  if (n > kMaxBytes) n = kMaxBytes;
  uint32_t pow2 = kMinBytes;
  while (pow2 < n) pow2 <<= 1;
  if (pow2 != requested) {
    WARN("NCCL_WORK_FIFO_BYTES=%lld is not a power of two in [%u, %u]; using %u",
         (long long)requested, kMinBytes, kMaxBytes, pow2);
  }
  return pow2;
}

static_assert(knobSpec(Knob::NCCL_WORK_FIFO_BYTES).intDefault == WorkFifo::kDefaultBytes, "one default");

uint32_t WorkFifo::configuredBytes() {
  return normalizeBytes(knobInt(Knob::NCCL_WORK_FIFO_BYTES));
}

ncclResult_t WorkFifo::init(uint32_t bytes, EventCallbackQueue* callbacks) {
  if (host_ != nullptr) {
    WARN("WorkFifo::init called twice");
    return ncclInternalError;
  }
  const uint32_t cap = bytes == 0 ? configuredBytes() : normalizeBytes(bytes);
  void* h = nullptr;
  void* d = nullptr;
  UCHECK(gpu::hostAllocMapped(&h, &d, cap));
  host_ = static_cast<char*>(h);
  dev_ = d;
  mask_ = cap - 1;
  produced_ = consumed_ = 0;
  callbacks_ = callbacks;
  return ncclSuccess;
}

ncclResult_t WorkFifo::reserve(uint32_t bytes, uint32_t* offset) {
  if (host_ == nullptr) {
    WARN("WorkFifo::reserve before init");
    return ncclInternalError;
  }
  if (bytes == 0 || bytes % kItemBytes != 0 || bytes > capacity()) {
    WARN("WorkFifo::reserve(%u): size must be a non-zero multiple of %u and at most the FIFO size %u "
         "(raise NCCL_WORK_FIFO_BYTES)", bytes, kItemBytes, capacity());
    return ncclInternalError;
  }
  // Differences stay below 2^31, so this comparison is right across the wrap.
  while (static_cast<uint32_t>(produced_ + bytes - consumed_) > capacity()) {
    if (callbacks_ == nullptr || callbacks_->empty()) {
      WARN("WorkFifo::reserve(%u): FIFO full (%u of %u bytes in use) and no pending completion can "
           "free it: consumed is not being advanced", bytes, used(), capacity());
      return ncclInternalError;
    }
    UCHECK(callbacks_->poll(/*waitSome=*/true));
  }
  *offset = produced_;
  produced_ += bytes;
  return ncclSuccess;
}

void WorkFifo::write(uint32_t offset, const void* src, uint32_t bytes) {
  const char* s = static_cast<const char*>(src);
  for (uint32_t done = 0; done < bytes; done += 16) {
    std::memcpy(host_ + ((offset + done) & mask_), s + done, 16);
  }
}

void WorkFifo::markConsumed(uint32_t upTo) {
  const uint32_t advance = upTo - consumed_;
  if (advance != 0 && advance <= produced_ - consumed_) consumed_ = upTo;
}

}  // namespace uniccl
