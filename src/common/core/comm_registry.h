// Which ncclComm_t handles are live communicators. Every API entry asks
// here (core/validate.h: checkCommHandle) before it reads the communicator,
// so a handle used after ncclCommDestroy or ncclCommAbort returned is an
// ncclInvalidArgument with a message, never a read of freed memory.
//
// The memory of every ncclComm comes from ncclComm's own operator new (in
// comm_registry.cc), which registers it; its operator delete unregisters it
// and retires the address for the life of the process, so no later
// communicator can be placed where a destroyed one was: a stale handle can
// never become valid again by address reuse.
#pragma once

struct ncclComm;

namespace uniccl {

enum class CommHandle {
  Live,        // a communicator that exists (in any state)
  Destroyed,   // one that did and was destroyed or aborted
  Unknown,     // never a communicator of this process (or destroyed long ago)
};

// Reads nothing through `comm`. Cheap when the calling thread asked about
// the same communicator before and none was destroyed since (a few
// nanoseconds, no lock); otherwise one lock of a process-wide mutex.
CommHandle commHandleState(const ncclComm* comm);

}  // namespace uniccl
