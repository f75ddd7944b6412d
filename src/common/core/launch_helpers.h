// Helper threads that issue part of a group's kernel launches while the
// calling thread issues the rest.
//
// With one thread driving several GPUs (one process for all GPUs, as
// nccl-tests' -g N and single-process frameworks run), every eager group ends
// in one kernel launch per GPU, and each launch costs the host about 3 us of
// driver time (H200 host, measured in docs/performance-history.md): on two GPUs the
// launches alone are half of NCCL's host time per AllReduce. Launches into
// different devices' contexts run in parallel in the driver, so a helper
// thread that launches one device's kernels while the caller launches the
// other's overlaps them.
//
// The caller never waits for a helper to wake up: a job goes to a helper
// only when that helper is spinning and free, and a job the helper has not
// started by the time the caller finished its own part is taken back and run
// by the caller. A helper spins for UNICCL_LAUNCH_HELPER_SPIN_US (default
// 1000) after its last job, then sleeps; the caller that finds it asleep runs
// the job itself and wakes it after the group (one futex wake) for the next
// group. UNICCL_LAUNCH_HELPERS caps the helper threads (default 15; 0: every
// launch on the calling thread, as before). Helpers are created on first use
// and live as long as the process (a forked child starts without any).
#pragma once

#include <cstdint>

#include "uniccl.h"

namespace uniccl {

// One job: runs on some thread with `index` in [0, n).
using HelperJob = ncclResult_t (*)(void* ctx, int index);

// Runs job(ctx, i) for every i in [0, n): jobs 0..n-2 on free, awake helper
// threads where there are any, the others on the calling thread; returns when
// all ended. The result is the first failure by index (its ncclGetLastError
// text copied to the calling thread), or ncclSuccess.
[[nodiscard]] ncclResult_t runOnLaunchHelpers(int n, HelperJob job, void* ctx);

// Jobs that ran on a helper thread so far in this process (tests, benchmarks).
uint64_t launchHelperJobs();

// Helpers asleep now, and how often a helper woke from its sleep so far in
// this process (tests wait for these states instead of assuming how fast
// threads run). Only a caller's wake ends a helper's sleep, so a helper seen
// asleep stays asleep until the next group that finds it.
int launchHelpersAsleep();
uint64_t launchHelperWakeups();

}  // namespace uniccl
