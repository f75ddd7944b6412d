// Host time of a group of two launch jobs through the launch helpers
// (core/launch_helpers.h) with the helper awake: a benchmark program, not a
// test (two builds' figures compare their hand-offs). Each job busy-waits
// for a launch's worth of host time; with a perfect hand-off a group takes
// one job's time, since the helper runs job 0 while the caller runs job 1.
//
//   UNICCL_LAUNCH_HELPER_SPIN_US=600000000 launch_helpers_bench [job_ns=3000] [groups=50000]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "common/core/launch_helpers.h"

namespace {

using Clock = std::chrono::steady_clock;

ncclResult_t busyJob(void* ctx, int) {
  const auto end = Clock::now() + std::chrono::nanoseconds(*static_cast<long*>(ctx));
  while (Clock::now() < end) {
  }
  return ncclSuccess;
}

}  // namespace

int main(int argc, char** argv) {
  long jobNs = argc > 1 ? atol(argv[1]) : 3000;
  const long groups = argc > 2 ? atol(argv[2]) : 50000;
  for (int i = 0; i < 1000; i++)
    if (uniccl::runOnLaunchHelpers(2, busyJob, &jobNs) != ncclSuccess) return 1;
  printf("two jobs of %ld ns per group, %ld groups a run\n", jobNs, groups);
  for (int run = 0; run < 5; run++) {
    const uint64_t onHelper = uniccl::launchHelperJobs();
    const auto start = Clock::now();
    for (long i = 0; i < groups; i++)
      if (uniccl::runOnLaunchHelpers(2, busyJob, &jobNs) != ncclSuccess) return 1;
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / groups;
    printf("  %.3f us per group, %.1f%% of job 0 on the helper\n", us,
           100.0 * (double)(uniccl::launchHelperJobs() - onHelper) / (double)groups);
  }
  return 0;
}
