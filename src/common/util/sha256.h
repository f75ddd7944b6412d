// SHA-256 and HMAC-SHA256 (FIPS 180-4, RFC 2104): what peer authentication
// (auth.h) and secret-derived names need. A small self-contained version so
// the library carries no crypto library dependency; not for bulk data.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace uniccl {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  Sha256Digest finish();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t bufBytes_ = 0;
  uint64_t totalBytes_ = 0;
};

Sha256Digest sha256(const void* data, size_t bytes);

// HMAC-SHA256 over the concatenation of `parts` (pointer, size pairs).
struct ByteSpan {
  const void* data;
  size_t bytes;
};
Sha256Digest hmacSha256(const void* key, size_t keyBytes, const ByteSpan* parts, size_t nParts);

// Equality that takes the same time wherever the first difference is.
bool constantTimeEqual(const void* a, const void* b, size_t bytes);

}  // namespace uniccl
