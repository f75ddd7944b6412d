// What the test profiler plugin reports to the test program: every plugin
// call, through a function the test executable exports (found with dlsym in
// the global scope, so the plugin library needs no link to the test).
#pragma once

#include <cstdint>

#include "uniccl_profiler.h"

enum ProfTestOp { kOpInit, kOpStart, kOpStop, kOpRecord, kOpFinalize };

struct ProfTestCall {
  int op;                // ProfTestOp
  const char* plugin;    // the plugin's name
  int version;           // ABI the plugin speaks (5 or 4)
  void* context;
  void* handle;          // start: the new handle; stop/record: the handle
  // init
  uint64_t commId;
  const char* commName;
  int nNodes, nRanks, rank;
  // start: the descriptor as the plugin saw it (v4 descriptors converted)
  ncclProfilerEventDescr_v5_t descr;
  // record
  int state;
  ncclProfilerEventStateArgs_v5_t args;
  bool hasArgs;
};

#define PROF_TEST_SINK "uniccl_profiler_test_sink"
typedef void (*ProfTestSinkFn)(const ProfTestCall*);
