#include "common/util/debug.h"

#include <pthread.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/util/knobs.h"
#include "common/util/name_list.h"
#include "common/util/version.h"

namespace uniccl {
namespace detail {
std::atomic<uint64_t> gInfoMask{~0ull};
std::atomic<uint64_t> gTraceMask{~0ull};
}  // namespace detail

namespace {

constexpr int kMaxMessage = 1024;

// Plain globals with trivial destructors: threads may still log while static
// destructors run at process exit.
std::once_flag gConfigOnce;
std::mutex gOutputMutex;
std::atomic<int> gLevel{kLogNone};
std::atomic<uint64_t> gSubsysMask{0};   // atomic: reloadLoggingConfig may run while threads log
FILE* gFile = nullptr;  // nullptr means stderr
char gHostname[64] = "";

thread_local int tLogDevice = -1;
thread_local char tLastError[kMaxMessage] = "";

FILE* outputFile() { return gFile ? gFile : stderr; }

// A fork while another thread holds the output lock would leave the child
// unable to log forever; hold it across fork instead.
void lockForFork() { gOutputMutex.lock(); }
void unlockAfterFork() { gOutputMutex.unlock(); }

void readHostname() {
  if (gethostname(gHostname, sizeof(gHostname)) != 0) snprintf(gHostname, sizeof(gHostname), "unknown");
  gHostname[sizeof(gHostname) - 1] = '\0';
  // NCCL prints the short name.
  if (char* dot = strchr(gHostname, '.')) *dot = '\0';
}

// Caller holds gOutputMutex.
void applyConfigLocked() {
  readHostname();
  int level = parseLogLevel(knobValue(Knob::NCCL_DEBUG));
  uint64_t subsys = parseLogSubsys(knobValue(Knob::NCCL_DEBUG_SUBSYS));
  if (gFile) {
    fclose(gFile);
    gFile = nullptr;
  }
  const char* fileName = knobValue(Knob::NCCL_DEBUG_FILE);
  if (fileName && fileName[0] && level > kLogNone) {
    char path[4096];
    expandLogFileName(fileName, path, sizeof(path));
    gFile = fopen(path, "w");
    if (!gFile)
      fprintf(stderr, "%s:%d NCCL WARN cannot open NCCL_DEBUG_FILE %s (%s); logging to stderr\n", gHostname,
              (int)getpid(), path, strerror(errno));
  }
  gSubsysMask.store(subsys, std::memory_order_relaxed);
  gLevel.store(level, std::memory_order_relaxed);
  detail::gInfoMask.store(level >= kLogInfo ? subsys : 0, std::memory_order_relaxed);
  detail::gTraceMask.store(level >= kLogTrace ? subsys : 0, std::memory_order_relaxed);
}

void initOnce() {
  std::call_once(gConfigOnce, [] {
    pthread_atfork(lockForFork, unlockAfterFork, unlockAfterFork);
    std::lock_guard<std::mutex> lock(gOutputMutex);
    applyConfigLocked();
  });
}

void writeLine(const char* levelName, const char* file, int line, const char* msg, bool withLocation) {
  long tid = syscall(SYS_gettid);
  std::lock_guard<std::mutex> lock(gOutputMutex);
  FILE* f = outputFile();
  if (withLocation)
    fprintf(f, "%s:%d:%ld [%d] %s:%d NCCL %s %s\n", gHostname, (int)getpid(), tid, tLogDevice, file, line, levelName,
            msg);
  else
    fprintf(f, "%s:%d:%ld [%d] NCCL %s %s\n", gHostname, (int)getpid(), tid, tLogDevice, levelName, msg);
  fflush(f);
}

}  // namespace

namespace detail {
void logMessage(int level, uint64_t subsys, const char* file, int line, const char* fmt, ...) {
  initOnce();
  char msg[kMaxMessage];
  va_list args;
  va_start(args, fmt);
  vsnprintf(msg, sizeof(msg), fmt, args);
  va_end(args);
  if (level == kLogWarn) memcpy(tLastError, msg, sizeof(msg));

  int current = gLevel.load(std::memory_order_relaxed);
  if (current < level) return;  // ABORT (4) sits above INFO: it prints INFO lines too
  if (level == kLogWarn) {
    // File and line help only those who read the source: shown with TRACE.
    writeLine("WARN", file, line, msg, current >= kLogTrace);
    if (current == kLogAbort) {
      writeLine("ABORT", file, line, "aborting on WARN because NCCL_DEBUG=ABORT", true);
      abort();
    }
    return;
  }
  if ((gSubsysMask.load(std::memory_order_relaxed) & subsys) == 0) return;
  writeLine(level == kLogTrace ? "TRACE" : "INFO", file, line, msg, level == kLogTrace);
}
}  // namespace detail

void setLogDevice(int dev) { tLogDevice = dev; }

const char* lastErrorMessage() { return tLastError; }

void clearLastError() { tLastError[0] = '\0'; }

void setLastErrorMessage(const char* message) {
  snprintf(tLastError, sizeof(tLastError), "%s", message);
}

int logLevel() {
  initOnce();
  return gLevel.load(std::memory_order_relaxed);
}

void logVersionOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (logLevel() < kLogVersion) return;
    char msg[128];
    snprintf(msg, sizeof(msg), "NCCL version %s+uniccl-%s", UNICCL_NCCL_VERSION_STRING, UNICCL_VERSION_STRING);
    writeLine("INFO", __FILE__, __LINE__, msg, false);
  });
}

int parseLogLevel(const char* value) {
  if (!value) return kLogNone;
  if (strcasecmp(value, "VERSION") == 0) return kLogVersion;
  if (strcasecmp(value, "WARN") == 0) return kLogWarn;
  if (strcasecmp(value, "INFO") == 0) return kLogInfo;
  if (strcasecmp(value, "ABORT") == 0) return kLogAbort;
  if (strcasecmp(value, "TRACE") == 0) return kLogTrace;
  return kLogNone;
}

uint64_t parseLogSubsys(const char* value) {
  if (!value) return kSubsysInit | kSubsysBootstrap | kSubsysEnv;
  static const struct {
    const char* name;
    uint64_t bit;
  } kNames[] = {{"INIT", kSubsysInit},   {"COLL", kSubsysColl},   {"P2P", kSubsysP2p},
                {"SHM", kSubsysShm},     {"NET", kSubsysNet},     {"GRAPH", kSubsysGraph},
                {"TUNING", kSubsysTune}, {"ENV", kSubsysEnv},     {"ALLOC", kSubsysAlloc},
                {"CALL", kSubsysCall},   {"PROXY", kSubsysProxy}, {"NVLS", kSubsysNvls},
                {"BOOTSTRAP", kSubsysBootstrap}, {"REG", kSubsysReg}, {"PROFILE", kSubsysProfile},
                {"ALL", kSubsysAll}};
  NameListSyntax syntax;
  syntax.trim = " \t";
  const NameList list = parseNameList(value, syntax);
  uint64_t mask = 0;
  for (const auto& n : kNames)
    if (list.hasIgnoringCase(n.name)) mask |= n.bit;
  const bool invert = list.exclude;
  return invert ? ~mask : mask;
}

void expandLogFileName(const char* pattern, char* out, int outBytes) {
  if (outBytes <= 0) return;
  char host[64];
  if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "unknown");
  host[sizeof(host) - 1] = '\0';
  if (char* dot = strchr(host, '.')) *dot = '\0';
  int o = 0;
  auto append = [&](const char* s, size_t n) {
    for (size_t i = 0; i < n && o < outBytes - 1; i++) out[o++] = s[i];
  };
  for (const char* p = pattern; *p; p++) {
    if (p[0] == '%' && p[1] == 'h') {
      append(host, strlen(host));
      p++;
    } else if (p[0] == '%' && p[1] == 'p') {
      char pid[24];
      int n = snprintf(pid, sizeof(pid), "%d", (int)getpid());
      append(pid, (size_t)n);
      p++;
    } else if (p[0] == '%' && p[1] == '%') {
      append("%", 1);
      p++;
    } else {
      append(p, 1);
    }
  }
  out[o] = '\0';
}

void reloadLoggingConfig() {
  initOnce();
  std::lock_guard<std::mutex> lock(gOutputMutex);
  applyConfigLocked();
}

}  // namespace uniccl
