// The device window table of a communicator (ncclDevComm::windowTable):
// chained blocks of 32 {user base, size, window} entries in device memory,
// which NCCL-built kernels search (ncclFindWindow) to turn a local pointer
// into its window. The host keeps a mirror and writes entries through it.
#pragma once

#include <vector>

#include "nccl_device.h"

namespace uniccl {

class WindowTable {
 public:
  // Puts an entry in the first free slot (a new block when all are taken).
  [[nodiscard]] ncclResult_t add(uintptr_t base, uintptr_t size, ncclWindow_t window, int* slot);
  [[nodiscard]] ncclResult_t remove(int slot);
  // The first block (allocated on first use).
  [[nodiscard]] ncclResult_t head(ncclDevCommWindowTable** out);
  void release();   // frees the device blocks (the comm's device memory goes too)
  ~WindowTable() { release(); }

 private:
  [[nodiscard]] ncclResult_t grow();
  [[nodiscard]] ncclResult_t writeEntry(int slot);
  std::vector<ncclDevCommWindowTable*> blocks_;       // device memory
  std::vector<ncclDevCommWindowTableEntry> entries_;  // mirror, 32 per block
};

}  // namespace uniccl
