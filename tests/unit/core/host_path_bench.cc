// Host cost of one eager collective through uniccl's own code, without a
// driver: a hand-built rank of a 4-rank communicator on the scripted fake
// GPU (launches are logged, events complete at once), ncclAllReduce of a
// few floats in its implicit group, many times. What it leaves out (driver
// launch and event calls) is the same for any two builds, so two builds'
// figures from this program compare their host paths
// (docs/performance-history.md). A benchmark, not a test: it asserts nothing about
// time.
//
//   host_path_bench [iterations] [repetitions]
#include <algorithm>
#include <chrono>
#include <string>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/core/comm.h"
#include "common/gpu.h"
#include "fake_comm.h"
#include "fake_gpu.h"
#include "uniccl.h"

using namespace uniccl;

int main(int argc, char** argv) {
  const long iters = argc > 1 ? std::atol(argv[1]) : 20000;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  fake::reset();
  fake::setAutoComplete(true);
  if (gpu::setDevice(0) != ncclSuccess) return 1;
  gpu::Stream s = nullptr;
  void* buf = nullptr;
  if (gpu::streamCreate(&s) != ncclSuccess || gpu::deviceAlloc(&buf, 1 << 20) != ncclSuccess) return 1;
  ncclComm* comm = test::makeFakeComm(/*rank=*/1, /*nRanks=*/4);
  comm->nChannels = 4;
  comm->peers.resize(4);
  for (PeerInfo& p : comm->peers) p.hostHash = 0x1234;
  comm->transports.setReachForTesting(4, std::vector<uint8_t>(16, 1));
  const auto stream = static_cast<uniccl_stream_t>(s);

  // GPU calls per collective (the driver's share of the real cost).
  const char* const kCalls[] = {"getDevice", "setDevice", "streamWaitEvent", "streamGetCaptureInfo", "eventCreate",
                                "eventRecord", "eventQuery", "memcpyAsync", "pointerGetInfo", "memGetAddressRange",
                                "launchKernel"};
  std::vector<uint64_t> before;
  for (const char* c : kCalls) before.push_back(fake::callCount(c));
  std::vector<double> nsPerCall;
  for (int r = 0; r < reps + 1; r++) {   // the first repetition warms up
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iters; i++) {
      const ncclResult_t res = ncclAllReduce(buf, buf, 2, ncclFloat32, ncclSum, comm, stream);
      if (res != ncclSuccess) {
        std::fprintf(stderr, "ncclAllReduce failed at %ld: %s\n", i, ncclGetLastError(comm));
        return 1;
      }
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) nsPerCall.push_back(ns / (double)iters);
  }
  const double calls = (double)iters * (reps + 1);
  std::printf("host_path_bench: GPU calls per collective:");
  for (size_t i = 0; i < sizeof(kCalls) / sizeof(kCalls[0]); i++) {
    const double per = (double)(fake::callCount(kCalls[i]) - before[i]) / calls;
    if (per > 0) std::printf(" %s %.3f", kCalls[i], per);
  }
  std::printf("\n");
  std::sort(nsPerCall.begin(), nsPerCall.end());
  std::printf("host_path_bench: %ld eager AllReduce calls x %d: ns per call min %.0f median %.0f max %.0f "
              "(launches logged: %zu)\n",
              iters, reps, nsPerCall.front(), nsPerCall[nsPerCall.size() / 2], nsPerCall.back(),
              fake::launchCount());
  return 0;
}
