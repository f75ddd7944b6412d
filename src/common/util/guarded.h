// What a library thread does with an exception. The work uniccl runs on its
// own threads (the proxy's ops and pollers, the watchdog's polls, launch
// helpers' jobs, deferred and non-blocking inits, non-blocking finalize)
// goes through runGuarded: anything it throws becomes a WARN naming the
// thread and an ncclResult_t that the thread hands to the work's owner (an
// op's failure, a communicator's async error, a group's result), never
// std::terminate of the application.
#pragma once

#include <type_traits>
#include <utility>

#include "uniccl.h"

namespace uniccl {

// Inside a catch block: WARNs "<where>: <what was thrown>" and returns
// ncclSystemError for std::bad_alloc and std::system_error, else ncclInternalError.
[[nodiscard]] ncclResult_t currentExceptionResult(const char* where) noexcept;

// Calls fn(); returns its result (ncclSuccess when it returns void) or,
// when it throws, currentExceptionResult(where).
template <typename Fn>
[[nodiscard]] ncclResult_t runGuarded(const char* where, Fn&& fn) noexcept {
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<Fn>>) {
      std::forward<Fn>(fn)();
      return ncclSuccess;
    } else {
      return std::forward<Fn>(fn)();
    }
  } catch (...) {
    return currentExceptionResult(where);
  }
}

}  // namespace uniccl
