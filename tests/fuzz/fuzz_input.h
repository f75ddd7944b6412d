// Reads typed values off a libFuzzer input; past the end it yields zeros, so
// every input, however short, is a valid test case.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

// A property the parser promises was broken: abort so libFuzzer saves the input.
#define FUZZ_CHECK(cond)                                                      \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: fuzz property failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                \
    }                                                                         \
  } while (0)
