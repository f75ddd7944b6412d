// NCCL 2.28's fault-tolerance calls: ncclCommRevoke stops a communicator's
// in-flight operations and leaves it quiescent for management calls;
// ncclCommShrink makes a communicator of the ranks that remain when some
// are excluded, also when those are dead (NCCL_SHRINK_ABORT stops the
// parent's operations first).
//
// Both stop work the same way ncclCommAbort does (the device abort flag the
// kernels poll, then waiting for the launches to end), but keep the
// communicator's bootstrap: the live ranks still reach each other through
// it, which is all a shrink needs (the first remaining rank hands the others
// a fresh unique id, as a split does). uniccl's revoke returns once the
// launches the watchdog tracks have ended, so ncclCommGetAsyncError answers
// ncclSuccess right after it (NCCL may answer ncclInProgress for a while);
// launches still queued behind them on the stream exit at their first abort
// check when they start (the CPU emulator showed such a stream busy for
// seconds after the revoke returned). Destroying a revoked communicator
// takes the abort path: nothing of its stopped operations is left to send.
#include <algorithm>
#include <vector>

#include "common/api_export.h"
#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/comm_init.h"
#include "common/core/launch.h"
#include "common/core/side_state.h"
#include "common/core/validate.h"
#include "common/device_guard.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

// The states a communicator can be revoked or shrunk from; anything else
// (still initializing, failed, finalized, aborted) is the caller's error.
[[nodiscard]] ncclResult_t checkStoppable(ncclComm* comm, const char* fn) {
  UCHECK(checkCommHandle(comm, fn));
  const CommState st = comm->state.load(std::memory_order_acquire);
  if (st == CommState::Ready || st == CommState::Revoked) return ncclSuccess;
  return checkCommUsable(comm, fn);   // says why, with the state's own message
}

// Stops every in-flight operation of `comm` and waits until its launches
// ended; the communicator is revoked afterwards (quiescent, no async error).
[[nodiscard]] ncclResult_t revoke(ncclComm* comm) {
  if (comm->state.load(std::memory_order_acquire) == CommState::Revoked) return ncclSuccess;
  // Kernels see the flag in their spin loops and exit; so do replays of
  // graphs captured earlier (they would compute nothing after a revoke).
  __atomic_store_n(comm->abortFlagHost, 1u, __ATOMIC_RELEASE);
  DeviceGuard device;   // the waits below are on the comm's GPU
  UCHECK(device.use(comm->gpuDev));
  ncclResult_t res = drainLaunches(comm);
  if (res == ncclSuccess && comm->sideState->streams.stream != nullptr)
    res = gpu::streamSynchronize(comm->sideState->streams.stream);
  if (res != ncclSuccess) {
    WARN("Rank %d: waiting for the revoked operations failed (%s); abort the communicator", comm->rank,
         ncclGetErrorString(res));
    return res;
  }
  // A dead peer or a timeout raised the host abort too (it stops bootstrap
  // waits): the launches are over, and the live ranks' bootstrap is what a
  // later shrink or split uses.
  comm->hostAbort.store(0, std::memory_order_release);
  comm->state.store(CommState::Revoked, std::memory_order_release);
  comm->asyncError.store(ncclSuccess, std::memory_order_release);
  INFO(kSubsysInit, "Rank %d: communicator %p revoked", comm->rank, (void*)comm);
  return ncclSuccess;
}

}  // namespace

}  // namespace uniccl

using namespace uniccl;

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags);
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  const char* fn = "ncclCommRevoke";
  UCHECK(checkStoppable(comm, fn));
  if (revokeFlags != NCCL_REVOKE_DEFAULT) {
    WARN("%s: revokeFlags must be NCCL_REVOKE_DEFAULT (0), got %d", fn, revokeFlags);
    return ncclInvalidArgument;
  }
  return revoke(comm);
}

NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
         ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags) {
  const char* fn = "ncclCommShrink";
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    UCHECK(checkCommHandle(comm, fn));
    WARN("%s: shrinkFlags must be NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT, got %d", fn, shrinkFlags);
    return ncclInvalidArgument;
  }
  // After a failure (a dead peer, a timeout) the parent has an async error:
  // that is what NCCL_SHRINK_ABORT is for. Without it the parent must be healthy.
  UCHECK(shrinkFlags == NCCL_SHRINK_ABORT ? checkStoppable(comm, fn) : checkCommManageable(comm, fn));
  if (newcomm == nullptr) {
    WARN("%s: newcomm is a NULL pointer", fn);
    return ncclInvalidArgument;
  }
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && excludeRanksList == nullptr)) {
    WARN("%s: need excludeRanksCount >= 0 and a list of that many ranks (got %d, %p)", fn, excludeRanksCount,
         (void*)excludeRanksList);
    return ncclInvalidArgument;
  }
  std::vector<bool> excluded(comm->nRanks, false);
  for (int i = 0; i < excludeRanksCount; i++) {
    const int r = excludeRanksList[i];
    if (r < 0 || r >= comm->nRanks || excluded[r]) {
      WARN("%s: excluded rank %d (entry %d) is out of range 0..%d or listed twice", fn, r, i, comm->nRanks - 1);
      return ncclInvalidArgument;
    }
    excluded[r] = true;
  }
  if (excluded[comm->rank]) {
    WARN("%s: rank %d is in its own exclude list: only the remaining ranks call ncclCommShrink", fn, comm->rank);
    return ncclInvalidArgument;
  }
  *newcomm = nullptr;
  ncclComm* child = nullptr;
  UCHECK(newComm(config, &comm->config, &child));
  child->virtualId = comm->virtualId;   // ranks made to share a GPU may share it in the child too
  *newcomm = child;
  std::vector<int> members;
  for (int r = 0; r < comm->nRanks; r++)
    if (!excluded[r]) members.push_back(r);
  auto job = [comm, child, members, shrinkFlags]() -> ncclResult_t {
    if (shrinkFlags == NCCL_SHRINK_ABORT) {
      ncclResult_t res = revoke(comm);
      if (res != ncclSuccess) {
        child->asyncError.store(res);
        child->state.store(CommState::Failed);
        return res;
      }
    }
    return initChildComm(comm, child, members, 0x53484b00u);   // "SHK"
  };
  return runDerivation(job, child, newcomm);
}
