// The checks of the test programs that do not use GoogleTest (the CPU
// emulator's end-to-end tests, the GPU tests, the fuzz targets): every failed
// check prints FAIL, its file and line and what failed to stderr, and is
// counted, so a program ends with a failing status whenever one check failed
// (it returns testcheck::failures() != 0 from main, or stops at once).
//
// What a failed check does next is in its name:
//   CHECK(cond, fmt, ...)          counted; the function goes on
//   CHECK_EQ(got, want, fmt, ...)  CHECK of two integers, printing both
//   ADD_FAILURE(fmt, ...)          a failure found without a condition: counted, goes on
//   REQUIRE(cond, fmt, ...)        counted; returns false from the function
//   NCCL_OK(call)                  REQUIRE that an ncclResult_t call succeeds (message: the
//                                  call, the error's name and ncclGetLastError's text)
//   GROUPED_OK(call)               NCCL_OK inside an open group: ends the group before returning
//   RT_OK(call)                    REQUIRE that a runtime call succeeds; the call yields its
//                                  error text, nullptr on success (tests/gpu/coll/rt.h's form)
//   CHECK_ERR(call, code, needle)  CHECK that the call fails with exactly `code` and a
//                                  last-error text containing `needle`
//   NCCL_OK_OR_EXIT(call), RT_OK_OR_EXIT(call)
//                                  for programs that cannot go on after the failure: exit(1)
//   CHECK_OR_ABORT(cond)           fuzz targets: abort(), so libFuzzer keeps the input
//
// Checks may fail on several threads at once; the prefix (which rank, which
// case) is set while no other thread checks.
//
// GoogleTest-based unit tests keep GoogleTest. bench/ and examples/ keep their
// own error handling: they are programs for users (the *_perf tools and their
// --self-test are installed and also build against NVIDIA's NCCL; a failure
// there ends the whole MPI job), and the example is meant to be read and
// copied, so its checks stay in its own file.
#pragma once

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nccl.h"

namespace testcheck {
namespace detail {

inline std::atomic<int>& failureCount() {
  static std::atomic<int> count{0};
  return count;
}

inline std::string& prefix() {
  static std::string text;
  return text;
}

inline void vreport(const char* file, int line, const char* what, const char* fmt, va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  // One write per failure, so that lines of concurrent failures do not interleave.
  fprintf(stderr, "FAIL %s:%d: %s%s%s%s\n", file, line, prefix().c_str(), what ? what : "", what ? ": " : "", msg);
}

}  // namespace detail

// Failed checks of this process so far.
inline int failures() { return detail::failureCount().load(); }

// Printed before every failure's text, e.g. "rank 1 (pid 4242): " in a
// forked rank or "[case] " while a case runs.
inline void setFailPrefix(const std::string& text) { detail::prefix() = text; }
inline const std::string& failPrefix() { return detail::prefix(); }

// Prints and counts one failure at file:line; `what` (may be null) is the
// condition that did not hold.
inline void failAt(const char* file, int line, const char* what, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
inline void failAt(const char* file, int line, const char* what, const char* fmt, ...) {
  detail::failureCount()++;
  va_list ap;
  va_start(ap, fmt);
  detail::vreport(file, line, what, fmt, ap);
  va_end(ap);
}

// The library's last error text on this thread, never null.
inline const char* ncclLastError() {
  const char* e = ncclGetLastError(nullptr);
  return e ? e : "";
}

// Whether an NCCL call failed; a failure is reported (the call's text, the
// error's name and the last error) and counted.
inline bool ncclFailed(ncclResult_t result, const char* file, int line, const char* call) {
  if (result == ncclSuccess) return false;
  failAt(file, line, nullptr, "%s -> %s: %s", call, ncclGetErrorString(result), ncclLastError());
  return true;
}

// Whether a runtime call failed (`error`: its error text, null on success);
// a failure is reported and counted.
inline bool runtimeFailed(const char* error, const char* file, int line, const char* call) {
  if (error == nullptr) return false;
  failAt(file, line, nullptr, "%s: %s", call, error);
  return true;
}

// After a failure a program cannot go on from: status 1, what it printed kept.
[[noreturn]] inline void exitFailed() {
  fflush(stdout);
  exit(1);
}

}  // namespace testcheck

#define CHECK(cond, ...)                                                      \
  do {                                                                        \
    if (!(cond)) ::testcheck::failAt(__FILE__, __LINE__, #cond, __VA_ARGS__); \
  } while (0)

#define CHECK_EQ(got, want, ...)                                                 \
  do {                                                                           \
    const long long got_ = (long long)(got), want_ = (long long)(want);          \
    if (got_ != want_) {                                                         \
      char what_[256];                                                           \
      snprintf(what_, sizeof(what_), "%s = %lld, want %lld", #got, got_, want_); \
      ::testcheck::failAt(__FILE__, __LINE__, what_, __VA_ARGS__);               \
    }                                                                            \
  } while (0)

#define ADD_FAILURE(...) ::testcheck::failAt(__FILE__, __LINE__, nullptr, __VA_ARGS__)

#define REQUIRE(cond, ...)                                         \
  do {                                                             \
    if (!(cond)) {                                                 \
      ::testcheck::failAt(__FILE__, __LINE__, #cond, __VA_ARGS__); \
      return false;                                                \
    }                                                              \
  } while (0)

#define NCCL_OK(call)                                                             \
  do {                                                                            \
    if (::testcheck::ncclFailed((call), __FILE__, __LINE__, #call)) return false; \
  } while (0)

#define GROUPED_OK(call)                                              \
  do {                                                                \
    if (::testcheck::ncclFailed((call), __FILE__, __LINE__, #call)) { \
      ncclGroupEnd();                                                 \
      return false;                                                   \
    }                                                                 \
  } while (0)

#define RT_OK(call)                                                                  \
  do {                                                                               \
    if (::testcheck::runtimeFailed((call), __FILE__, __LINE__, #call)) return false; \
  } while (0)

#define CHECK_ERR(call, code, needle)                                                                           \
  do {                                                                                                          \
    const ncclResult_t r_ = (call);                                                                             \
    CHECK(r_ == (code), "%s -> %s, expected %s", #call, ncclGetErrorString(r_), ncclGetErrorString(code));      \
    CHECK(strstr(::testcheck::ncclLastError(), needle) != nullptr, "%s: last error '%s' does not mention '%s'", \
          #call, ::testcheck::ncclLastError(), needle);                                                         \
  } while (0)

#define NCCL_OK_OR_EXIT(call)                                                                  \
  do {                                                                                         \
    if (::testcheck::ncclFailed((call), __FILE__, __LINE__, #call)) ::testcheck::exitFailed(); \
  } while (0)

#define RT_OK_OR_EXIT(call)                                                                       \
  do {                                                                                            \
    if (::testcheck::runtimeFailed((call), __FILE__, __LINE__, #call)) ::testcheck::exitFailed(); \
  } while (0)

#define CHECK_OR_ABORT(cond)                                          \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                        \
    }                                                                 \
  } while (0)
