// Copies on one stream whose completion a host thread learns by polling: the
// proxy side of GIN starts a copy per staging slot and must know, without
// waiting, which have ended. After each copy the stream stores the copy's
// sequence number into a word of mapped host memory
// (gpu::streamWriteValue32), so "has copy k ended" is one load. An event per
// copy would cost a runtime call per query, a few microseconds each when
// several threads share the runtime (measured on an H200 with four ranks in
// one process: three microseconds a query, as much as the copy itself).
// Where the runtime cannot write values from a stream, each copy records an
// event instead and queries ask the runtime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/gpu.h"
#include "uniccl.h"

namespace uniccl {

// Names one started copy; empty until copy() fills it.
struct CopyTicket {
  uint32_t seq = 0;           // 0: no copy
  gpu::Event ev = nullptr;    // only where values cannot be written from the stream
  bool pending() const { return seq != 0; }
};

class CopyProgress {
 public:
  // Creates the stream on the current device and the polled word.
  [[nodiscard]] ncclResult_t init();
  // Waits for the copies in flight (they may still read or write the
  // caller's buffers), then frees the stream, the word and the events.
  void destroy();
  // Starts a copy on the stream; *t names it for done() and release().
  [[nodiscard]] ncclResult_t copy(void* dst, const void* src, size_t bytes, CopyTicket* t);
  // ncclSuccess when the copy ended, ncclInProgress when not yet; an error
  // when the runtime reports the stream failed (event mode only: a failed
  // stream in word mode fails the next runtime call instead).
  [[nodiscard]] ncclResult_t done(const CopyTicket& t) const;
  // Forgets an ended copy (its event goes back to the pool).
  void release(CopyTicket* t);
  bool pollsWord() const { return wordHost_ != nullptr; }

 private:
  gpu::Stream stream_ = nullptr;
  uint32_t* wordHost_ = nullptr;   // the stream's last finished sequence number
  void* wordDev_ = nullptr;
  uint32_t issued_ = 0;            // the last sequence number handed out
  std::vector<gpu::Event> events_, free_;
};

}  // namespace uniccl
