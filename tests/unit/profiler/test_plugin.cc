// A profiler plugin for the loader tests. Built in several variants:
//   (default)              exports ncclProfiler_v5, named TEST_PROF_NAME
//   -DTEST_PROF_V4         exports only ncclProfiler_v4
//   -DTEST_PROF_FAIL_INIT  init returns ncclSystemError
//   -DTEST_PROF_IN_PROGRAM compiled into the test executable (STATIC_PLUGIN)
// The activation mask comes from UNICCL_TEST_PROFILER_MASK (default: all).
// Every call is reported to the test program's sink (test_sink.h).
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "test_sink.h"

#ifndef TEST_PROF_NAME
#define TEST_PROF_NAME "test-v5"
#endif

namespace {

#ifdef TEST_PROF_V4
constexpr int kVersion = 4;
#else
constexpr int kVersion = 5;
#endif

void report(ProfTestCall& c) {
  static ProfTestSinkFn sink = (ProfTestSinkFn)dlsym(RTLD_DEFAULT, PROF_TEST_SINK);
  c.plugin = TEST_PROF_NAME;
  c.version = kVersion;
  if (sink) sink(&c);
}

struct Context {
  std::mutex mutex;
  std::vector<int*> events;  // handles: distinct addresses, freed at finalize
};

ncclResult_t initCommon(void** context, uint64_t commId, int* mask, const char* commName, int nNodes, int nRanks,
                        int rank) {
  ProfTestCall c{};
  c.op = kOpInit;
  c.commId = commId;
  c.commName = commName;
  c.nNodes = nNodes;
  c.nRanks = nRanks;
  c.rank = rank;
#ifdef TEST_PROF_FAIL_INIT
  *context = nullptr;
  report(c);
  return ncclSystemError;
#else
  const char* m = getenv("UNICCL_TEST_PROFILER_MASK");
  *mask = m ? (int)strtol(m, nullptr, 0) : 0xfff;
  Context* ctx = new Context();
  *context = ctx;
  c.context = ctx;
  report(c);
  return ncclSuccess;
#endif
}

ncclResult_t startCommon(void* context, void** eHandle, const ncclProfilerEventDescr_v5_t& d) {
  Context* ctx = static_cast<Context*>(context);
  int* h = new int(0);
  {
    std::lock_guard<std::mutex> lock(ctx->mutex);
    ctx->events.push_back(h);
  }
  *eHandle = h;
  ProfTestCall c{};
  c.op = kOpStart;
  c.context = context;
  c.handle = h;
  c.descr = d;
  report(c);
  return ncclSuccess;
}

ncclResult_t stopEvent(void* eHandle) {
  ProfTestCall c{};
  c.op = kOpStop;
  c.handle = eHandle;
  report(c);
  return ncclSuccess;
}

ncclResult_t recordEventState(void* eHandle, ncclProfilerEventState_t state, ncclProfilerEventStateArgs_v5_t* args) {
  ProfTestCall c{};
  c.op = kOpRecord;
  c.handle = eHandle;
  c.state = state;
  c.hasArgs = args != nullptr;
  if (args) c.args = *args;
  report(c);
  return ncclSuccess;
}

ncclResult_t finalize(void* context) {
  Context* ctx = static_cast<Context*>(context);
  ProfTestCall c{};
  c.op = kOpFinalize;
  c.context = context;
  report(c);
  for (int* h : ctx->events) delete h;
  delete ctx;
  return ncclSuccess;
}

#ifdef TEST_PROF_V4
ncclResult_t initV4(void** context, int* mask, const char* commName, uint64_t commHash, int nNodes, int nRanks,
                    int rank, ncclDebugLogger_t) {
  return initCommon(context, commHash, mask, commName, nNodes, nRanks, rank);
}
ncclResult_t startV4(void* context, void** eHandle, ncclProfilerEventDescr_v4_t* d4) {
  ncclProfilerEventDescr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = d4->type;
  d.parentObj = d4->parentObj;
  d.rank = d4->rank;
  if (d4->type == ncclProfileColl) {
    d.coll.seqNumber = d4->coll.seqNumber;
    d.coll.func = d4->coll.func;
    d.coll.count = d4->coll.count;
    d.coll.datatype = d4->coll.datatype;
    d.coll.algo = d4->coll.algo;
    d.coll.proto = d4->coll.proto;
    d.coll.nChannels = d4->coll.nChannels;
  } else if (d4->type == ncclProfileKernelCh) {
    d.kernelCh.channelId = d4->kernelCh.channelId;
    d.kernelCh.pTimer = d4->kernelCh.pTimer;
  }
  return startCommon(context, eHandle, d);
}
#else
ncclResult_t initV5(void** context, uint64_t commId, int* mask, const char* commName, int nNodes, int nRanks, int rank,
                    ncclDebugLogger_t logfn) {
  if (logfn) logfn(NCCL_LOG_INFO, NCCL_INIT, __FILE__, __LINE__, "test profiler %s: init rank %d", TEST_PROF_NAME, rank);
  return initCommon(context, commId, mask, commName, nNodes, nRanks, rank);
}
ncclResult_t startV5(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* d) {
  return startCommon(context, eHandle, *d);
}
#endif

}  // namespace

#ifdef TEST_PROF_V4
extern "C" {
__attribute__((visibility("default"))) ncclProfiler_v4_t ncclProfiler_v4 = {
    TEST_PROF_NAME, initV4, startV4, stopEvent, recordEventState, finalize};
}
#else
extern "C" {
__attribute__((visibility("default"))) ncclProfiler_v5_t ncclProfiler_v5 = {
    TEST_PROF_NAME, initV5, startV5, stopEvent, recordEventState, finalize};
}
#endif
