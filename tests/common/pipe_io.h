// Pipe I/O between a test parent and its forked ranks (the dead-peer tests
// on GPUs and on the CPU emulator): write everything, or read until a
// deadline, never blocking past it.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>

namespace testpipe {

using Clock = std::chrono::steady_clock;

inline bool writeAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w <= 0) return false;
    c += w, n -= (size_t)w;
  }
  return true;
}

// Reads exactly n bytes unless EOF or the deadline comes first; returns the count.
inline size_t readUntil(int fd, void* p, size_t n, Clock::time_point deadline) {
  size_t got = 0;
  while (got < n && Clock::now() < deadline) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, 20) <= 0) continue;
    ssize_t r = read(fd, static_cast<char*>(p) + got, n - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  return got;
}

}  // namespace testpipe
