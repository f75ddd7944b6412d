// Logging in NCCL's format and under NCCL's knobs, so existing NCCL_DEBUG
// settings and log-scraping tools keep working on uniccl.
//
//   NCCL_DEBUG        VERSION | WARN | INFO | ABORT | TRACE (case-insensitive)
//   NCCL_DEBUG_SUBSYS comma list of INIT,COLL,P2P,SHM,NET,GRAPH,TUNING,ENV,ALLOC,
//                     CALL,PROXY,NVLS,BOOTSTRAP,REG,PROFILE,ALL; a leading '^'
//                     excludes the listed ones instead (default INIT,BOOTSTRAP,ENV)
//   NCCL_DEBUG_FILE   log file; %h = hostname, %p = pid (stderr if it cannot be opened)
//
// WARN always records its message as the calling thread's last error
// (ncclGetLastError), whether or not it is printed. INFO/TRACE cost one relaxed
// atomic load and a branch when their subsystem is off: they sit on the hot path.
#pragma once

#include <atomic>
#include <cstdint>

namespace uniccl {

// Bit values are NCCL's, so NCCL_DEBUG_SUBSYS masks mean the same thing.
constexpr uint64_t kSubsysInit = 1ull << 0;
constexpr uint64_t kSubsysColl = 1ull << 1;
constexpr uint64_t kSubsysP2p = 1ull << 2;
constexpr uint64_t kSubsysShm = 1ull << 3;
constexpr uint64_t kSubsysNet = 1ull << 4;
constexpr uint64_t kSubsysGraph = 1ull << 5;
constexpr uint64_t kSubsysTune = 1ull << 6;
constexpr uint64_t kSubsysEnv = 1ull << 7;
constexpr uint64_t kSubsysAlloc = 1ull << 8;
constexpr uint64_t kSubsysCall = 1ull << 9;
constexpr uint64_t kSubsysProxy = 1ull << 10;
constexpr uint64_t kSubsysNvls = 1ull << 11;
constexpr uint64_t kSubsysBootstrap = 1ull << 12;
constexpr uint64_t kSubsysReg = 1ull << 13;
constexpr uint64_t kSubsysProfile = 1ull << 14;
constexpr uint64_t kSubsysAll = ~0ull;

// NCCL's levels, in NCCL's order (ABORT prints like INFO and aborts on WARN).
enum LogLevel : int {
  kLogNone = 0,
  kLogVersion = 1,
  kLogWarn = 2,
  kLogInfo = 3,
  kLogAbort = 4,
  kLogTrace = 5,
};

namespace detail {
// Subsystems whose INFO / TRACE lines are printed. Before the configuration is
// read both hold all ones, so the first call of each takes the slow path,
// which reads the configuration and then decides.
extern std::atomic<uint64_t> gInfoMask;
extern std::atomic<uint64_t> gTraceMask;
void logMessage(int level, uint64_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
}  // namespace detail

// The device index shown in the [dev] field of this thread's lines (-1: unknown).
void setLogDevice(int dev);

// The calling thread's last WARN message ("" when none).
const char* lastErrorMessage();
void clearLastError();
// Makes `message` the calling thread's last error, as if it had logged it
// (a failure on a helper thread reported to the thread that called the API).
void setLastErrorMessage(const char* message);

// Prints "NCCL version 2.28.9+uniccl-0.1.0" once per process when NCCL_DEBUG
// is VERSION or more verbose; called at the first communicator init.
void logVersionOnce();

// The configured level (reads the configuration on first use).
int logLevel();

// Parsers behind NCCL_DEBUG / NCCL_DEBUG_SUBSYS / NCCL_DEBUG_FILE, exposed for tests.
int parseLogLevel(const char* value);          // unset/unknown -> kLogNone
uint64_t parseLogSubsys(const char* value);    // nullptr -> INIT|BOOTSTRAP|ENV
void expandLogFileName(const char* pattern, char* out, int outBytes);

// Reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE again (the file is
// closed and reopened), for programs that change them after logging started
// (NCCL's ncclResetDebugInitInternal / ncclResetDebugInit). Threads may log
// meanwhile: lines are written under the same lock, the masks are atomics.
void reloadLoggingConfig();
// The same, under the name the unit tests use.
inline void resetLoggingForTesting() { reloadLoggingConfig(); }

}  // namespace uniccl

#define WARN(fmt, ...) \
  ::uniccl::detail::logMessage(::uniccl::kLogWarn, ::uniccl::kSubsysAll, __FILE__, __LINE__, fmt, ##__VA_ARGS__)

#define INFO(subsys, fmt, ...)                                                                         \
  do {                                                                                                 \
    if (__builtin_expect(                                                                              \
            (::uniccl::detail::gInfoMask.load(std::memory_order_relaxed) & (uint64_t)(subsys)) != 0, 0)) \
      ::uniccl::detail::logMessage(::uniccl::kLogInfo, (subsys), __FILE__, __LINE__, fmt, ##__VA_ARGS__); \
  } while (0)

#define TRACE(subsys, fmt, ...)                                                                         \
  do {                                                                                                  \
    if (__builtin_expect(                                                                               \
            (::uniccl::detail::gTraceMask.load(std::memory_order_relaxed) & (uint64_t)(subsys)) != 0, 0)) \
      ::uniccl::detail::logMessage(::uniccl::kLogTrace, (subsys), __FILE__, __LINE__, fmt, ##__VA_ARGS__); \
  } while (0)
