// One graph per rank's stream for capture_test's parts (one per GPU unless
// ranks share a GPU): capture what `record` enqueues on every stream (all captures end before any instantiation), launch
// the graphs on their streams and wait, destroy them.
#pragma once

#include <vector>

#include "../coll/rt.h"
#include "test_check.h"

struct GpuGraphs {
  std::vector<int> devs;
  std::vector<rtStream> streams;
  std::vector<rtGraph> graphs;
  std::vector<rtGraphExec> execs;

  // record(): enqueues the operations on every stream; false on failure.
  template <typename Record>
  bool capture(Record&& record) {
    namespace rt = colltest::rt;
    const size_t n = devs.size();
    graphs.assign(n, nullptr);
    execs.assign(n, nullptr);
    for (size_t i = 0; i < n; i++) {
      RT_OK(rt::setDevice(devs[i]));
      RT_OK(rt::err(COLLTEST_RT(StreamBeginCapture)(streams[i], COLLTEST_RT_CAPTURE_GLOBAL)));
    }
    const bool recorded = record();
    for (size_t i = 0; i < n; i++) {
      RT_OK(rt::setDevice(devs[i]));
      RT_OK(rt::err(COLLTEST_RT(StreamEndCapture)(streams[i], &graphs[i])));
    }
    if (!recorded) return false;
    for (size_t i = 0; i < n; i++) {
      RT_OK(rt::setDevice(devs[i]));
      RT_OK(rt::graphInstantiate(&execs[i], graphs[i]));
    }
    return true;
  }

  bool launchAndWait() {
    namespace rt = colltest::rt;
    for (size_t i = 0; i < devs.size(); i++) {
      RT_OK(rt::setDevice(devs[i]));
      RT_OK(rt::err(COLLTEST_RT(GraphLaunch)(execs[i], streams[i])));
    }
    for (size_t i = 0; i < devs.size(); i++) RT_OK(rt::streamSync(streams[i]));
    return true;
  }

  // Before the communicators go (also on the way out of a failed check).
  void destroy() {
    for (size_t i = 0; i < execs.size(); i++) {
      colltest::rt::setDevice(devs[i]);
      if (execs[i]) (void)COLLTEST_RT(GraphExecDestroy)(execs[i]);
      if (graphs[i]) (void)COLLTEST_RT(GraphDestroy)(graphs[i]);
    }
    execs.clear();
    graphs.clear();
  }
  ~GpuGraphs() { destroy(); }
};
