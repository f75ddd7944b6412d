// The sub-group barrier of targets without named barriers (HIP; -Damd_sync
// builds run it on GPUs that have them, to test it under real concurrency; the CPU
// emulator runs it too, with 32- and 64-lane wavefronts, so that the
// algorithm the AMD GPUs run is exercised on every CI run). Written once
// over the primitives the including port defines first (device/port.h's
// HIP branch, device/port_cpu.h):
//   kWarpSize                       lanes of a wavefront (per target)
//   wgLoadAcquire(const unsigned*)  workgroup-scope atomics on shared memory
//   wgFetchAddAcqRel(unsigned*, unsigned), wgStoreRelaxed, wgStoreRelease
//   waveSync()                      lanes of a wavefront meet (reconvergence) and
//                                   order their memory accesses
//   fenceBlock(), sleepBrief()
// Included only by those ports, after they declared these.
#pragma once

namespace uniccl::dev {

// Shared state of one sub-group barrier (zero-initialised by its owner).
struct SubBarrierState {
  unsigned arrived;
  unsigned generation;
};

// `nthreads` threads (whole wavefronts: a multiple of kWarpSize) meet. The
// lanes of each wavefront meet first (waveSync), then one lane per
// wavefront arrives; the last arrival resets the count and bumps the
// generation; the others' lane 0 waits for the bump while the rest of its
// wavefront waits for lane 0 (waveSync). Memory accesses of the
// participants before the barrier are visible to all of them after it.
//
// The first waveSync is what makes lane 0's arrival speak for its whole
// wavefront: without it a lane still before the barrier (its stores not yet
// made) counts as arrived. On AMD hardware the lanes are one instruction
// stream, so it costs nothing there (a compiler barrier); where lanes run
// on their own (the emulator's fibers) it is the wavefront's real
// meeting point.
UDEV void barrierSubWaves(int nthreads, SubBarrierState* st) {
  static_assert(kWarpSize == 32 || kWarpSize == 64, "wavefronts are 32 or 64 lanes");
  const unsigned nwaves = (unsigned)nthreads / kWarpSize;
  fenceBlock();
  waveSync();
  if ((threadIdx.x % kWarpSize) == 0) {
    const unsigned gen = wgLoadAcquire(&st->generation);
    const unsigned prev = wgFetchAddAcqRel(&st->arrived, 1u);
    if (prev == nwaves - 1) {
      wgStoreRelaxed(&st->arrived, 0u);
      wgStoreRelease(&st->generation, gen + 1);
    } else {
      while (wgLoadAcquire(&st->generation) == gen) sleepBrief();
    }
  }
  waveSync();
  fenceBlock();
}

}  // namespace uniccl::dev
