// The Device API's requirement builders (include/nccl_device/*.h): what one
// kind of device-side object needs in a device communicator, as NCCL 2.28.9
// sizes it. Pure functions: ncclDevCommCreate would place the resources and
// write their handles through the out pointers set here.
#include <climits>
#include <cstdint>
#include <cstring>

#include "common/api_export.h"
#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/validate.h"
#include "common/util/debug.h"
#include "nccl_device.h"

using namespace uniccl;

namespace {

[[nodiscard]] ncclResult_t checkOut(const void* p, const char* what, const char* fn) {
  if (p == nullptr) {
    WARN("%s: %s is a null pointer", fn, what);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

[[nodiscard]] ncclResult_t checkCount(int n, int min, const char* what, const char* fn) {
  if (n < min) {
    WARN("%s: %s is %d (must be at least %d)", fn, what, n, min);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

}  // namespace

// Per barrier: 3 words of its own state plus one arrival word per team rank.
NCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam_t team, int nBarriers,
         ncclLsaBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq) {
  const char* fn = "ncclLsaBarrierCreateRequirement";
  UCHECK(checkOut(outHandle, "outHandle", fn));
  UCHECK(checkOut(outReq, "outReq", fn));
  UCHECK(checkCount(team.nRanks, 1, "team.nRanks", fn));
  UCHECK(checkCount(nBarriers, 0, "nBarriers", fn));
  memset(outReq, 0, sizeof(*outReq));
  outReq->bufferSize = (size_t)nBarriers * (3 + (size_t)team.nRanks) * sizeof(uint32_t);
  outReq->bufferAlign = alignof(uint32_t);
  outReq->outBufferHandle = &outHandle->bufHandle;
  outHandle->nBarriers = nBarriers;
  return ncclSuccess;
}

// Per barrier: one GIN signal and 16 bytes of resource buffer (2.28.9; the
// team does not change the size).
NCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, ncclTeam_t team, int nBarriers,
         ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq) {
  const char* fn = "ncclGinBarrierCreateRequirement";
  UCHECK(checkCommUsable(comm, fn));
  UCHECK(checkOut(outHandle, "outHandle", fn));
  UCHECK(checkOut(outReq, "outReq", fn));
  UCHECK(checkCount(team.nRanks, 1, "team.nRanks", fn));
  UCHECK(checkCount(nBarriers, 0, "nBarriers", fn));
  memset(outReq, 0, sizeof(*outReq));
  outReq->bufferSize = (size_t)nBarriers * 4 * sizeof(uint32_t);
  outReq->bufferAlign = alignof(uint32_t);
  outReq->outBufferHandle = &outHandle->bufHandle;
  outReq->ginSignalCount = nBarriers;
  outReq->outGinSignalStart = &outHandle->signal0;
  return ncclSuccess;
}

// An LL slot carries 8 bytes of data (with 8 of flags): an element of
// maxEltSize bytes takes ceil(maxEltSize / 8) slots.
NCCL_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize);
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  const char* fn = "ncclLLA2ACalcSlots";
  if (checkCount(maxElts, 0, "maxElts", fn) != ncclSuccess || checkCount(maxEltSize, 1, "maxEltSize", fn) != ncclSuccess)
    return -1;
  long long slots = (long long)maxElts * ((maxEltSize + 7LL) / 8);
  if (slots > INT_MAX) {
    WARN("%s: %d elements of %d bytes need %lld slots, more than an int holds", fn, maxElts, maxEltSize, slots);
    return -1;
  }
  return (int)slots;
}

// Per block: one 16-byte control line and two banks of nSlots 16-byte slots
// (consecutive epochs alternate between them).
NCCL_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
         ncclDevResourceRequirements_t* outReq);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                        ncclDevResourceRequirements_t* outReq) {
  const char* fn = "ncclLLA2ACreateRequirement";
  UCHECK(checkOut(outHandle, "outHandle", fn));
  UCHECK(checkOut(outReq, "outReq", fn));
  UCHECK(checkCount(nBlocks, 0, "nBlocks", fn));
  UCHECK(checkCount(nSlots, 0, "nSlots", fn));
  memset(outReq, 0, sizeof(*outReq));
  outReq->bufferSize = (size_t)nBlocks * (1 + 2 * (size_t)nSlots) * 16;
  outReq->bufferAlign = 16;
  outReq->outBufferHandle = &outHandle->bufHandle;
  outHandle->nSlots = (uint32_t)nSlots;
  return ncclSuccess;
}
