// The text of events that wait for their turn in the file, in chunks of
// 64 KiB that the writer reuses: the memory is the most that waited at once
// (which RankTraceOptions::maxWaitingBytes bounds), not the largest burst
// each bucket ever held, and it is not handed back and faulted in again.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace trace {

class ChunkPool {
 public:
  static constexpr uint32_t kChunkBytes = 64 << 10;

  ChunkPool() = default;
  ~ChunkPool() {
    for (char* c : spare_) delete[] c;
  }
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;

  char* take() {
    if (spare_.empty()) return new char[kChunkBytes];
    char* c = spare_.back();
    spare_.pop_back();
    return c;
  }
  void put(char* chunk) { spare_.push_back(chunk); }

 private:
  std::vector<char*> spare_;
};

// One bucket's text.
class ChunkedText {
 public:
  struct Place {
    uint32_t chunk, offset;
  };
  // Copies n bytes (at most kChunkBytes) into the text.
  Place append(ChunkPool& pool, const char* s, uint32_t n) {
    if (chunks_.empty() || used_ + n > ChunkPool::kChunkBytes) {
      chunks_.push_back(pool.take());
      used_ = 0;
    }
    const Place p{(uint32_t)chunks_.size() - 1, used_};
    memcpy(chunks_.back() + used_, s, n);
    used_ += n;
    return p;
  }
  const char* at(Place p) const { return chunks_[p.chunk] + p.offset; }
  void release(ChunkPool& pool) {
    for (char* c : chunks_) pool.put(c);
    chunks_.clear();
    used_ = 0;
  }

 private:
  std::vector<char*> chunks_;
  uint32_t used_ = 0;   // bytes of the last chunk in use
};

}  // namespace trace
