// ncclDevCommCreate / ncclDevCommDestroy: not supported by this uniccl
// version, and they say so. A device communicator hands kernels symmetric
// memory windows (every LSA peer's buffer mapped at a fixed stride) and a
// resource window for barriers and LL all-to-all slots; uniccl has no
// symmetric windows yet (ncclCommWindowRegister is unsupported too). Create
// validates its arguments like a real implementation, then answers
// ncclInvalidUsage with an explicit message; since it never makes a device
// communicator, Destroy rejects whatever it is given. README's status table
// lists what of the Device API exists.
#include "common/api_export.h"
#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/validate.h"
#include "common/util/debug.h"
#include "nccl_device.h"

using namespace uniccl;

NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
         ncclDevComm_t* outDevComm);
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm) {
  const char* fn = "ncclDevCommCreate";
  UCHECK(checkCommUsable(comm, fn));
  if (reqs == nullptr) {
    WARN("%s: reqs is a null pointer", fn);
    return ncclInvalidArgument;
  }
  if (outDevComm == nullptr) {
    WARN("%s: outDevComm is a null pointer", fn);
    return ncclInvalidArgument;
  }
  WARN("%s: the Device API's device communicators are not supported by this uniccl version yet "
       "(they need symmetric memory windows); see README, Status",
       fn);
  return ncclInvalidUsage;
}

NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, ncclDevComm_t const* devComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm) {
  const char* fn = "ncclDevCommDestroy";
  UCHECK(checkCommHandle(comm, fn));
  if (devComm == nullptr) {
    WARN("%s: devComm is a null pointer", fn);
    return ncclInvalidArgument;
  }
  WARN("%s: devComm %p was not made by ncclDevCommCreate (which this uniccl version does not support yet)", fn,
       (const void*)devComm);
  return ncclInvalidArgument;
}
