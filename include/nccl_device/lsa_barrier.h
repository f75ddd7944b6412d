/*
 * uniccl's Device API: LSA barriers (host part). The requirement builder says
 * how much resource-window memory nBarriers barriers over `team` need; the
 * device-side barrier sessions are not part of this uniccl version.
 */
#ifndef UNICCL_NCCL_DEVICE_LSA_BARRIER_H
#define UNICCL_NCCL_DEVICE_LSA_BARRIER_H
#include "core.h"

NCCL_EXTERN_C __host__ ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                                    ncclLsaBarrierHandle_t* outHandle,
                                                                    ncclDevResourceRequirements_t* outReq);
#endif
