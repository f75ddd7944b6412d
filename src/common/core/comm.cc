// ncclComm's constructor and destructor, out of line so that comm.h names
// the side state without its definition (core/side_state.h).
#include "common/core/comm.h"

#include "common/core/side_state.h"

// No throw: newComm allocates communicators with std::nothrow and reports
// a failed allocation of the side state as out of memory.
ncclComm::ncclComm() : sideState(new (std::nothrow) uniccl::SideState()) {}

ncclComm::~ncclComm() = default;
