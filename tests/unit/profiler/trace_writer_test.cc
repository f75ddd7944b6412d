// The trace plugin's writer side, through the loader like any plugin: events
// dropped when a thread's ring is full are counted and nothing else is lost;
// the file is written while the program runs, and an event that reaches the
// writer after later ones were written is written anyway, counted as late;
// a stop on another thread than its start finds its event; the ring of a
// thread that exited serves a new thread; the spill is a file without a
// name in the trace's directory; starts past maxEvents get no handle once
// the writer counted them; ranks that finish at different times, one slot
// serving two of them, each get their own events.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/profiler/profiler.h"

using namespace uniccl;

// Named: the unity build compiles the profiler tests as one source.
namespace trace_writer_test {

uint64_t epochNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

std::string readFile(const std::string& path) {
  std::string text;
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return text;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  fclose(f);
  return text;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) n++;
  return n;
}

// The number after "key": in the file's otherData; -1 when absent.
long otherDataNumber(const std::string& text, const std::string& key) {
  const size_t at = text.rfind("\"" + key + "\":");
  return at == std::string::npos ? -1 : strtol(text.c_str() + at + key.size() + 3, nullptr, 10);
}

// A trace plugin context writing into a fresh directory, with the given
// knobs set for its init (and unset after).
class TraceWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_ = getenv("UNICCL_TEST_TRACE_PLUGIN");
    checker_ = getenv("UNICCL_TEST_TRACE_CHECKER");
    if (plugin_ == nullptr || checker_ == nullptr) GTEST_SKIP() << "run through meson test";
    char dir[] = "/tmp/uniccl_trace_writerXXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    setenv("NCCL_PROFILER_PLUGIN", plugin_, 1);
    setenv("UNICCL_PROFILER_TRACE_FILE", (dir_ + "/trace").c_str(), 1);
    setenv("UNICCL_PROFILER_TRACE_MASK", "0xfff", 1);
  }
  void TearDown() override {
    for (const char* k : {"NCCL_PROFILER_PLUGIN", "UNICCL_PROFILER_TRACE_FILE", "UNICCL_PROFILER_TRACE_MASK",
                          "UNICCL_PROFILER_TRACE_RING_KB", "UNICCL_PROFILER_TRACE_REORDER_MS"})
      unsetenv(k);
    if (!file_.empty()) remove(file_.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  std::unique_ptr<ProfilerContext> init(uint64_t commId) {
    ProfilerCommInfo info;
    info.commId = commId;
    auto ctx = profilerInit(info);
    char name[64];
    snprintf(name, sizeof(name), "/trace.%016llx.rank0.json", (unsigned long long)commId);
    file_ = dir_ + name;
    return ctx;
  }
  bool checks(const std::string& args = "") {
    const std::string cmd = std::string("python3 '") + checker_ + "' '" + file_ + "' " + args;
    return system(cmd.c_str()) == 0;
  }

  const char* plugin_ = nullptr;
  const char* checker_ = nullptr;
  std::string dir_, file_;
};

TEST_F(TraceWriterTest, AFullRingDropsStartsCountsThemAndLosesNoStop) {
  // 4 KiB: 128 records, a few dozen events between two passes of the writer,
  // which a thread reporting events back to back outruns.
  setenv("UNICCL_PROFILER_TRACE_RING_KB", "4", 1);
  auto ctx = init(0x51);
  ASSERT_NE(ctx, nullptr);
  ProfilerContext* p = ctx.get();
  constexpr int kEvents = 20000;
  int started = 0;
  for (int i = 0; i < kEvents; i++) {
    const uint64_t t = epochNs();
    void* h = profilerStartKernelCh(p, nullptr, i % 4, t);
    profilerStopKernelCh(p, h, t + 100);   // KernelChStop state, then the stop
    void* g = profilerStartGroup(p);
    profilerStop(p, g);
    started += 2;
  }
  profilerFinalize(ctx);
  const std::string text = readFile(file_);
  const long dropped = otherDataNumber(text, "dropped");
  EXPECT_GT(dropped, 0) << "the loop outran the writer: some starts found the ring full";
  EXPECT_EQ(otherDataNumber(text, "droppedRingFull"), dropped);
  EXPECT_EQ(otherDataNumber(text, "lostUpdates"), 0) << "room is kept for the stops of started events";
  EXPECT_EQ((long)count(text, "\"ph\":\"X\""), started - dropped) << "every event is in the file or counted";
  EXPECT_EQ(count(text, "\"unfinished\""), 0u);
  EXPECT_EQ(count(text, "\"state\":\"KernelChStop\""), count(text, "\"cat\":\"KernelCh\""));
  EXPECT_TRUE(checks("--gpu-clock"));
}

TEST_F(TraceWriterTest, WritesWhileRunningAndCountsWhatComesTooLate) {
  setenv("UNICCL_PROFILER_TRACE_REORDER_MS", "0", 1);
  auto ctx = init(0x52);
  ASSERT_NE(ctx, nullptr);
  ProfilerContext* p = ctx.get();
  const uint64_t before = epochNs() - 1000000000ull;   // a GPU stamp a second before the Group
  void* g = profilerStartGroup(p);
  profilerStop(p, g);
  // The writer writes the Group on its own, long before finalize.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (count(readFile(file_), "\"cat\":\"Group\"") == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(count(readFile(file_), "\"cat\":\"Group\""), 1u) << "not written while the communicator lives";
  // A KernelCh that ran on the GPU before the Group, reported only now.
  void* k = profilerStartKernelCh(p, nullptr, 0, before);
  profilerStopKernelCh(p, k, before + 1000);
  profilerFinalize(ctx);
  const std::string text = readFile(file_);
  EXPECT_EQ(otherDataNumber(text, "lateEvents"), 1);
  EXPECT_EQ(otherDataNumber(text, "dropped"), 0);
  const size_t group = text.find("\"cat\":\"Group\""), kernel = text.find("\"cat\":\"KernelCh\"");
  ASSERT_NE(kernel, std::string::npos) << "a late event is written, not dropped";
  EXPECT_LT(group, kernel);
}

TEST_F(TraceWriterTest, StopsOnAnotherThreadFindTheirStarts) {
  auto ctx = init(0x53);
  ASSERT_NE(ctx, nullptr);
  ProfilerContext* p = ctx.get();
  constexpr int kOps = 20000;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<void*> handed;
  bool done = false;
  // ProxyOps: async slices, so that ops of one thread may overlap.
  std::thread starter([&] {
    for (int i = 0; i < kOps; i++) {
      void* op = profilerStartProxyOp(p, nullptr, i % 8, 1, 4, 65536, (i & 1) != 0);
      std::lock_guard<std::mutex> lock(mutex);
      handed.push_back(op);
      cv.notify_one();
    }
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    cv.notify_one();
  });
  std::thread stopper([&] {
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex);
      cv.wait(lock, [&] { return !handed.empty() || done; });
      if (handed.empty()) return;
      void* op = handed.front();
      handed.pop_front();
      lock.unlock();
      profilerStop(p, op);
    }
  });
  starter.join();
  stopper.join();
  profilerFinalize(ctx);
  const std::string text = readFile(file_);
  const long dropped = otherDataNumber(text, "dropped");
  EXPECT_EQ((long)count(text, "\"ph\":\"b\""), kOps - dropped);
  EXPECT_EQ(count(text, "\"ph\":\"e\""), count(text, "\"ph\":\"b\""));
  EXPECT_EQ(count(text, "\"unfinished\""), 0u) << "every stop found its start";
  EXPECT_TRUE(checks("--expect ProxyOp:ProxySend --expect ProxyOp:ProxyRecv"));
}

// The (tid, id) of every Group event in the text.
std::vector<std::pair<long, uint64_t>> groupTidsAndIds(const std::string& text) {
  std::vector<std::pair<long, uint64_t>> v;
  const std::string group = "\"cat\":\"Group\",";
  for (size_t at = text.find(group); at != std::string::npos; at = text.find(group, at + 1)) {
    const size_t tid = text.find("\"tid\":", at), id = text.find("\"id\":", at);
    if (tid == std::string::npos || id == std::string::npos) break;
    v.emplace_back(strtol(text.c_str() + tid + 6, nullptr, 10), strtoull(text.c_str() + id + 5, nullptr, 10));
  }
  return v;
}

long currentTid() { return (long)syscall(SYS_gettid); }

TEST_F(TraceWriterTest, AnExitedThreadsRingGoesToANewThread) {
  setenv("UNICCL_PROFILER_TRACE_REORDER_MS", "0", 1);
  auto ctx = init(0x54);
  ASSERT_NE(ctx, nullptr);
  ProfilerContext* p = ctx.get();
  // Ids carry the index of the ring that handed them out (above bit 40).
  constexpr int kRingIdShift = 40;
  long firstTid = 0;
  std::thread([&] {
    firstTid = currentTid();
    profilerStop(p, profilerStartGroup(p));
  }).join();
  // The writer looks for exited threads' rings once a second; threads that
  // come and go meanwhile each take a ring, then leave theirs too.
  std::set<long> tids{firstTid};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool reused = false;
  while (!reused && std::chrono::steady_clock::now() < deadline) {
    std::thread([&] {
      tids.insert(currentTid());
      profilerStop(p, profilerStartGroup(p));
    }).join();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::map<uint64_t, std::set<long>> tidsByRing;
    for (const auto& e : groupTidsAndIds(readFile(file_))) tidsByRing[e.second >> kRingIdShift].insert(e.first);
    for (const auto& r : tidsByRing) reused = reused || r.second.size() > 1;
  }
  profilerFinalize(ctx);
  EXPECT_TRUE(reused) << "no ring was handed to a second thread";
  // Each event is its own thread's, whichever ring it went through.
  for (const auto& e : groupTidsAndIds(readFile(file_))) EXPECT_EQ(tids.count(e.first), 1u) << e.first;
}

// The entries of a directory, and what the process's open files are that lie in it.
std::vector<std::string> entriesOf(const std::string& dir) {
  std::vector<std::string> v;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return v;
  while (dirent* e = readdir(d))
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) v.push_back(e->d_name);
  closedir(d);
  return v;
}
std::vector<std::string> openFilesIn(const std::string& dir) {
  std::vector<std::string> v;
  for (const std::string& fd : entriesOf("/proc/self/fd")) {
    char target[4096];
    const ssize_t n = readlink(("/proc/self/fd/" + fd).c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (strncmp(target, (dir + "/").c_str(), dir.size() + 1) == 0) v.push_back(target);
  }
  return v;
}

TEST_F(TraceWriterTest, TheSpillIsAFileWithoutANameInTheTracesDirectory) {
  auto ctx = init(0x55);
  ASSERT_NE(ctx, nullptr);
  ProfilerContext* p = ctx.get();
  for (int i = 0; i < 1000; i++) profilerStop(p, profilerStartGroup(p));
  // The trace file (the plugin keeps it open) and the spill, which has no name.
  const std::vector<std::string> open = openFilesIn(dir_);
  int unnamed = 0;
  for (const std::string& f : open) {
    const bool deleted = f.size() > 10 && f.compare(f.size() - 10, 10, " (deleted)") == 0;
    if (deleted) unnamed++;
    else EXPECT_EQ(f, file_);
  }
  EXPECT_EQ(unnamed, 1) << "one spill, in the trace's directory";
  EXPECT_EQ(entriesOf(dir_), std::vector<std::string>{file_.substr(dir_.size() + 1)}) << "only the trace has a name";
  profilerFinalize(ctx);
  EXPECT_TRUE(openFilesIn(dir_).empty()) << "the spill is closed with the last communicator";
  const std::string text = readFile(file_);
  EXPECT_EQ(count(text, "\"cat\":\"Group\""), 1000u);
  EXPECT_TRUE(checks());
}

TEST_F(TraceWriterTest, StartsPastMaxEventsGetNoHandleOnceTheWriterCountedThem) {
  setenv("UNICCL_PROFILER_TRACE_MAX_EVENTS", "10", 1);
  auto ctx = init(0x56);
  unsetenv("UNICCL_PROFILER_TRACE_MAX_EVENTS");
  ASSERT_NE(ctx, nullptr);
  ProfilerContext* p = ctx.get();
  // Events go on getting handles until the writer has read the tenth start.
  long started = 0;
  bool skipped = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!skipped && std::chrono::steady_clock::now() < deadline) {
    void* g = profilerStartGroup(p);
    started++;
    skipped = g == nullptr;
    profilerStop(p, g);
    if (started % 100 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(skipped) << "no start was skipped after " << started;
  EXPECT_GT(started, 10);
  for (int i = 0; i < 1000; i++, started++) EXPECT_EQ(profilerStartGroup(p), nullptr) << "skipped from then on";
  profilerFinalize(ctx);
  const std::string text = readFile(file_);
  EXPECT_EQ(count(text, "\"cat\":\"Group\""), 10u);
  EXPECT_EQ(otherDataNumber(text, "dropped"), started - 10);
  EXPECT_EQ(otherDataNumber(text, "droppedRingFull"), 0);
  EXPECT_EQ(count(text, "\"unfinished\""), 0u);
  EXPECT_TRUE(checks());
}

TEST_F(TraceWriterTest, RanksFinishingAtDifferentTimesKeepTheirOwnEvents) {
  setenv("UNICCL_PROFILER_TRACE_REORDER_MS", "0", 1);
  // Rings that hold every record of the test: none is dropped, however late the writer runs.
  setenv("UNICCL_PROFILER_TRACE_RING_KB", "2048", 1);
  auto a = init(0x57);
  const std::string fileA = file_;
  auto b = init(0x58);
  const std::string fileB = file_;
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // Both ranks' events from two threads, then rank a goes; its slot serves rank c.
  auto report = [](ProfilerContext* p, int groups) {
    std::thread([p, groups] {
      for (int i = 0; i < groups; i++) profilerStop(p, profilerStartGroup(p));
    }).join();
    for (int i = 0; i < groups; i++) profilerStop(p, profilerStartProxyOp(p, nullptr, i % 4, 1, 4, 65536, true));
  };
  report(a.get(), 3000);
  report(b.get(), 2000);
  profilerFinalize(a);
  auto c = init(0x59);
  const std::string fileC = file_;
  ASSERT_NE(c, nullptr);
  report(b.get(), 500);
  report(c.get(), 700);
  profilerFinalize(b);
  profilerFinalize(c);
  struct Expect {
    std::string file;
    size_t groups;
  };
  for (const Expect& x : {Expect{fileA, 3000}, Expect{fileB, 2500}, Expect{fileC, 700}}) {
    file_ = x.file;
    const std::string text = readFile(x.file);
    EXPECT_EQ(count(text, "\"cat\":\"Group\""), x.groups) << x.file;
    EXPECT_EQ(count(text, "\"ph\":\"b\""), x.groups) << x.file;
    EXPECT_EQ(count(text, "\"ph\":\"e\""), x.groups) << x.file;
    EXPECT_EQ(otherDataNumber(text, "dropped"), 0) << x.file;
    EXPECT_EQ(count(text, "\"unfinished\""), 0u) << x.file;
    EXPECT_TRUE(checks()) << x.file;
    if (x.file != fileC) remove(x.file.c_str());   // TearDown removes the last one
  }
}

}  // namespace trace_writer_test
