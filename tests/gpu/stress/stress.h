// Shared pieces of stress_test: the per-case note printed on the result line,
// process accounting (fds, threads, RSS, GPU memory) and the few
// stream-ordered runtime calls the cases need beyond ../coll/rt.h.
#pragma once

#include <chrono>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "nccl.h"
#include "../coll/rt.h"
#include "test_check.h"

namespace stress {

// Which transport the dead-peer case runs over (deadpeer.cc).
enum class DeadPeerTransport { P2p, Shm, Net };


namespace rt = colltest::rt;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t);

// Failures are recorded through test_check.h (REQUIRE, NCCL_OK, GROUPED_OK,
// RT_OK, ADD_FAILURE); a case passes when testcheck::failures() did not grow.
// Appends to the running case's result line ("key numbers").
void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string takeNote();  // the note so far, cleared

// Integer-valued floats in [-100, 100]: every reduction order is exact.
inline float randInt(std::mt19937& rng) { return (float)(int)(rng() % 201) - 100.0f; }

// ---- process accounting ----
int countFds();
int countThreads();
long rssKb();
struct Usage {
  int fds = 0, threads = 0;
  long rssKb = 0;
  std::vector<long long> gpuUsed;   // bytes in use per GPU (total - free)
};
bool measure(int ngpus, Usage* u);
// Waits (up to 3 s) for threads / fds of destroyed comms to go, then checks
// growth from `base` against the bounds and prints both snapshots in the note.
bool checkGrowth(int ngpus, const Usage& base, const char* baseLabel, const char* nowLabel);

// ---- stream-ordered runtime calls (never the legacy default stream) ----
const char* newStream(rtStream* s);   // non-blocking
const char* copyIn(void* dst, const void* src, size_t bytes, rtStream s);
const char* copyOut(void* dst, const void* src, size_t bytes, rtStream s);   // waits for s
// 1: all work done, 0: still busy, -1: failed (*err says why).
int streamState(rtStream s, const char** err);

// Device buffers and one stream on one GPU, freed on destruction.
struct GpuSide {
  int dev = -1;
  rtStream stream = nullptr;
  std::vector<float*> bufs;
  bool init(int dev, std::vector<size_t> floats);
  ~GpuSide();
};

}  // namespace stress
