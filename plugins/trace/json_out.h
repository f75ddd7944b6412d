// A text buffer with the few JSON writers the trace file needs. The writer
// thread formats every event, so this is written for speed: literals are
// copied with their length known at compile time, numbers are formatted by
// hand (printf's formatting of a double cost more than all the rest of an
// event), and the buffer grows only when a trace's largest burst needs it.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>

namespace trace {

class JsonOut {
 public:
  explicit JsonOut(size_t initialBytes) { grow(initialBytes); }

  template <size_t N>
  void lit(const char (&s)[N]) {
    room(N - 1);
    memcpy(end_, s, N - 1);
    end_ += N - 1;
  }
  void raw(const char* s, size_t n) {
    room(n);
    memcpy(end_, s, n);
    end_ += n;
  }
  void raw(const char* s) { raw(s, strlen(s)); }
  void ch(char c) {
    room(1);
    *end_++ = c;
  }
  void u64(uint64_t v);
  void i64(int64_t v) {
    if (v < 0) {
      ch('-');
      u64(0 - (uint64_t)v);
    } else {
      u64((uint64_t)v);
    }
  }
  // A trace-clock time as microseconds since kTraceOriginNs, to the ns ("95312468411459.203").
  void usSinceOrigin(int64_t ns);
  // A duration in ns as microseconds to the ns ("1.160").
  void usOf(int64_t ns);
  // A quoted, escaped string (nullptr: "").
  void str(const char* s);
  // A pointer as "%p" prints it: "0x7ffca9b9c014", "(nil)".
  void ptr(const void* p);

  size_t size() const { return (size_t)(end_ - buf_.get()); }
  const char* data() const { return buf_.get(); }
  void clear() { end_ = buf_.get(); }

 private:
  void room(size_t n) {
    if ((size_t)(limit_ - end_) < n) grow(n);
  }
  void grow(size_t n);
  std::unique_ptr<char[]> buf_;
  char* end_ = nullptr;
  char* limit_ = nullptr;
};

}  // namespace trace
