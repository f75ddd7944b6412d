// A failure found off the caller's thread (watchdog, proxy, a library
// thread's exception) becomes the communicator's async error.
#pragma once

#include "common/core/comm.h"

namespace uniccl {

// Records `res` as the async error unless one is there already (the first
// cause wins), and raises the host and device abort flags: kernels and
// bootstrap waits stop, ncclCommGetAsyncError reports `res`, and the
// application aborts the communicator as after any failure.
inline void failCommAsync(ncclComm* comm, ncclResult_t res) {
  int expected = ncclSuccess;
  comm->asyncError.compare_exchange_strong(expected, res, std::memory_order_acq_rel);
  comm->hostAbort.store(1, std::memory_order_release);
  // Atomic store: other host threads may read the word too (the kernels poll it).
  if (comm->abortFlagHost != nullptr) __atomic_store_n(comm->abortFlagHost, 1u, __ATOMIC_RELEASE);
}

}  // namespace uniccl
