// Reads typed values off a libFuzzer input; past the end it yields zeros, so
// every input, however short, is a valid test case. The targets check the
// parsers' promises with CHECK_OR_ABORT (test_check.h), which aborts so that
// libFuzzer keeps the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "test_check.h"  // CHECK_OR_ABORT: a property the parser promises was broken

namespace uniccl {
namespace fuzz {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  // Copies sizeof(T) bytes (zero-filled past the end) into a T.
  template <typename T>
  T take() {
    T v;
    memset(&v, 0, sizeof(v));
    takeBytes(&v, sizeof(v));
    return v;
  }
  void takeBytes(void* out, size_t n) {
    size_t have = n < remaining() ? n : remaining();
    if (have) memcpy(out, data_ + pos_, have);
    pos_ += have;
  }
  const uint8_t* rest() const { return data_ + pos_; }
  size_t remaining() const { return size_ - pos_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace fuzz
}  // namespace uniccl
