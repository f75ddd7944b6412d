// The result-line note, process accounting and runtime helpers of stress_test.
#include <dirent.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "stress.h"

namespace stress {

namespace {
std::mutex gMutex;   // cases with threads note() concurrently
std::string gNote;
}  // namespace

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void note(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gNote.empty()) gNote += "; ";
  gNote += buf;
}

// Used by main between cases.
std::string takeNote() {
  std::lock_guard<std::mutex> lock(gMutex);
  std::string s;
  s.swap(gNote);
  return s;
}

int countFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) n++;
    closedir(d);
  }
  return n - 3;   // ".", ".." and the DIR's own fd
}

static long statusField(const char* key) {
  long v = -1;
  if (FILE* f = fopen("/proc/self/status", "r")) {
    char line[256];
    size_t k = strlen(key);
    while (fgets(line, sizeof(line), f))
      if (strncmp(line, key, k) == 0 && line[k] == ':') {
        v = atol(line + k + 1);
        break;
      }
    fclose(f);
  }
  return v;
}

int countThreads() { return (int)statusField("Threads"); }
long rssKb() { return statusField("VmRSS"); }

bool measure(int ngpus, Usage* u) {
  u->fds = countFds();
  u->threads = countThreads();
  u->rssKb = rssKb();
  u->gpuUsed.assign(ngpus, 0);
  for (int d = 0; d < ngpus; d++) {
    size_t freeB = 0, totalB = 0;
    RT_OK(rt::setDevice(d));
    RT_OK(rt::memInfo(&freeB, &totalB));
    u->gpuUsed[d] = (long long)(totalB - freeB);
  }
  return true;
}

bool checkGrowth(int ngpus, const Usage& base, const char* baseLabel, const char* nowLabel) {
  constexpr int kFdSlack = 4, kThreadSlack = 2;
  constexpr long long kMiB = 1 << 20, kGpuSlack = 64 * kMiB, kRssSlackKb = 64 * 1024;
  Usage now;
  auto within = [&] {
    bool gpuOk = true;
    for (int d = 0; d < ngpus; d++) gpuOk = gpuOk && now.gpuUsed[d] - base.gpuUsed[d] <= kGpuSlack;
    return now.fds <= base.fds + kFdSlack && now.threads <= base.threads + kThreadSlack &&
           now.rssKb - base.rssKb <= kRssSlackKb && gpuOk;
  };
  // Threads of destroyed comms (root, watchdog) may take a moment to exit.
  for (int i = 0; i < 60; i++) {
    if (!measure(ngpus, &now)) return false;
    if (within()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string gpu;
  for (int d = 0; d < ngpus; d++) {
    char b[96];
    snprintf(b, sizeof(b), " gpu%d %.1f->%.1f MiB", d, base.gpuUsed[d] / (double)kMiB, now.gpuUsed[d] / (double)kMiB);
    gpu += b;
  }
  note("%s->%s: fds %d->%d, threads %d->%d, RSS %.1f->%.1f MiB,%s", baseLabel, nowLabel, base.fds, now.fds,
       base.threads, now.threads, base.rssKb / 1024.0, now.rssKb / 1024.0, gpu.c_str());
  REQUIRE(now.fds <= base.fds + kFdSlack, "open fds grew %d -> %d", base.fds, now.fds);
  REQUIRE(now.threads <= base.threads + kThreadSlack, "threads grew %d -> %d", base.threads, now.threads);
  REQUIRE(now.rssKb - base.rssKb <= kRssSlackKb, "RSS grew %ld -> %ld kB", base.rssKb, now.rssKb);
  for (int d = 0; d < ngpus; d++)
    REQUIRE(now.gpuUsed[d] - base.gpuUsed[d] <= kGpuSlack, "GPU %d: memory in use grew by %.1f MiB", d,
            (now.gpuUsed[d] - base.gpuUsed[d]) / (double)kMiB);
  return true;
}

const char* newStream(rtStream* s) {
  return rt::err(COLLTEST_RT(StreamCreateWithFlags)(s, COLLTEST_RT(StreamNonBlocking)));
}

const char* copyIn(void* dst, const void* src, size_t bytes, rtStream s) {
  return rt::err(COLLTEST_RT(MemcpyAsync)(dst, src, bytes, COLLTEST_RT_H2D, s));
}

const char* copyOut(void* dst, const void* src, size_t bytes, rtStream s) {
  if (const char* e = rt::err(COLLTEST_RT(MemcpyAsync)(dst, src, bytes, COLLTEST_RT_D2H, s))) return e;
  return rt::streamSync(s);
}

int streamState(rtStream s, const char** err) {
  rtError e = COLLTEST_RT(StreamQuery)(s);
  if (e == COLLTEST_RT_SUCCESS) return 1;
  if (e == COLLTEST_RT(ErrorNotReady)) {
    (void)COLLTEST_RT(GetLastError)();
    return 0;
  }
  *err = COLLTEST_RT(GetErrorString)(e);
  return -1;
}

bool GpuSide::init(int d, std::vector<size_t> floats) {
  dev = d;
  RT_OK(rt::setDevice(d));
  RT_OK(newStream(&stream));
  for (size_t n : floats) {
    float* p = nullptr;
    RT_OK(rt::malloc((void**)&p, n * sizeof(float)));
    bufs.push_back(p);
  }
  return true;
}

GpuSide::~GpuSide() {
  if (dev < 0) return;
  rt::setDevice(dev);
  if (stream) {
    rt::streamSync(stream);
    rt::streamDestroy(stream);
  }
  for (float* p : bufs) rt::free(p);
}

}  // namespace stress
