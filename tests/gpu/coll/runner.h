// Runs test cases on the ranks one process drives (all GPUs in mode A, one
// in mode B): fills the arena, issues the operations through the NCCL API,
// synchronizes, reads everything back and checks it. A watchdog thread ends
// the process (exit 3) naming the case when one runs past its limit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cases.h"
#include "nccl.h"
#include "rt.h"

namespace colltest {

struct LocalRank {
  int rank = 0;
  int dev = 0;
  ncclComm_t comm = nullptr;
  rtStream stream = nullptr;
  uint8_t* arena = nullptr;  // device memory, poisoned and filled per case
  size_t arenaBytes = 0;
};

struct World {
  std::string who;  // for messages: "A-all/p2p" or "B/p2p rank 1"
  int nranks = 1;
  bool verbose = false;
  std::vector<LocalRank> locals;
};

struct PerfResult {
  double ms = 0, algbw = 0, busbw = 0;  // GB/s
  int nranks = 0;
  bool valid = false;
};

enum class Status : uint8_t { NotRun = 0, Pass = 1, Fail = 2 };

// Streams and arenas for every local rank (comms already made). Prints and
// returns false on failure.
bool setupLocals(World& w, size_t arenaBytes);
void freeLocals(World& w);

// Runs one case on every local rank. `fatal` is set when the GPU runtime
// failed in a way later cases cannot recover from (sticky errors).
Status runCase(World& w, const Case& c, PerfResult* perf, bool* fatal);

namespace watchdog {
void start(const std::string& who);
void arm(const char* what, double seconds);
void disarm();
}  // namespace watchdog

}  // namespace colltest
