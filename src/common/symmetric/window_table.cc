#include "common/symmetric/window_table.h"

#include <cstddef>
#include <cstring>

#include "common/check.h"
#include "common/gpu.h"

namespace uniccl {

namespace {
constexpr int kPerBlock = 32;   // ncclDevCommWindowTable::entries
}

ncclResult_t WindowTable::grow() {
  void* p = nullptr;
  UCHECK(gpu::deviceAlloc(&p, sizeof(ncclDevCommWindowTable)));
  ncclDevCommWindowTable zero;
  memset(&zero, 0, sizeof(zero));
  ncclResult_t r = gpu::memcpy(p, &zero, sizeof(zero));
  if (r != ncclSuccess) {
    (void)gpu::deviceFree(p);   // r is the failure to report
    return r;
  }
  auto* block = static_cast<ncclDevCommWindowTable*>(p);
  if (!blocks_.empty()) {
    // Chain it last: the previous block's next pointer is written once the
    // new block is zeroed, so a kernel walking the chain never sees garbage.
    ncclDevCommWindowTable* prev = blocks_.back();
    r = gpu::memcpy(reinterpret_cast<char*>(prev) + offsetof(ncclDevCommWindowTable, next), &block, sizeof(block));
    if (r != ncclSuccess) {
      (void)gpu::deviceFree(p);   // r is the failure to report
      return r;
    }
  }
  blocks_.push_back(block);
  entries_.resize(blocks_.size() * kPerBlock, ncclDevCommWindowTableEntry{0, 0, nullptr});
  return ncclSuccess;
}

ncclResult_t WindowTable::head(ncclDevCommWindowTable** out) {
  if (blocks_.empty()) UCHECK(grow());
  *out = blocks_[0];
  return ncclSuccess;
}

ncclResult_t WindowTable::writeEntry(int slot) {
  ncclDevCommWindowTable* block = blocks_[slot / kPerBlock];
  void* dst = &block->entries[slot % kPerBlock];
  return gpu::memcpy(dst, &entries_[slot], sizeof(ncclDevCommWindowTableEntry));
}

ncclResult_t WindowTable::add(uintptr_t base, uintptr_t size, ncclWindow_t window, int* slot) {
  if (blocks_.empty()) UCHECK(grow());
  int free = -1;
  for (size_t i = 0; i < entries_.size() && free < 0; i++)
    if (entries_[i].window == nullptr) free = (int)i;
  if (free < 0) {
    free = (int)entries_.size();
    UCHECK(grow());
  }
  entries_[free] = ncclDevCommWindowTableEntry{base, size, window};
  ncclResult_t r = writeEntry(free);
  if (r != ncclSuccess) {
    entries_[free] = ncclDevCommWindowTableEntry{0, 0, nullptr};
    return r;
  }
  *slot = free;
  return ncclSuccess;
}

ncclResult_t WindowTable::remove(int slot) {
  if (slot < 0 || slot >= (int)entries_.size()) return ncclInternalError;
  entries_[slot] = ncclDevCommWindowTableEntry{0, 0, nullptr};
  return writeEntry(slot);
}

void WindowTable::release() {
  for (ncclDevCommWindowTable* b : blocks_) (void)gpu::deviceFree(b);   // teardown: the backend logs a failure
  blocks_.clear();
  entries_.clear();
}

}  // namespace uniccl
