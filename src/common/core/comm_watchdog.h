// A communicator's place with the watchdog (common/watchdog): its watch
// (ncclComm::watch), made, filled in and handed to the watchdog thread here,
// so that the watchdog itself knows nothing of the communicator.
#pragma once

#include <cstdint>

#include "uniccl.h"

struct ncclComm;

namespace uniccl {

// Creates comm->watch with the progress words its kernels report in, and
// adds it to the watchdog (nothing when timeoutMs is 0). Called once the
// comm is fully initialized.
[[nodiscard]] ncclResult_t watchdogRegister(ncclComm* comm, int64_t timeoutMs);
// Takes the comm's watch off the watchdog: on return the thread no longer
// touches it, so its progress words and trackers may go. Safe without a
// prior register.
void watchdogUnregister(ncclComm* comm);

}  // namespace uniccl
