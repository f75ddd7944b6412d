/*
 * uniccl's Device API: GIN (GPU-initiated network) barriers, host part. The
 * requirement builder says how many GIN signals nBarriers barriers over
 * `team` need. ncclGin (puts, signals, counters) is in gin.h; GIN barrier
 * sessions (ncclGinBarrierSession) are not part of this uniccl version and
 * are not declared (ncclDevCommCreate refuses railGinBarrierCount and world
 * barriers across LSA teams); ncclGinFenceLevel is, as the type of
 * ncclBarrierSession::sync's last argument (barrier.h).
 */
#ifndef UNICCL_NCCL_DEVICE_GIN_BARRIER_H
#define UNICCL_NCCL_DEVICE_GIN_BARRIER_H
#include "core.h"

NCCL_EXTERN_C __host__ ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                                                    ncclGinBarrierHandle_t* outHandle,
                                                                    ncclDevResourceRequirements_t* outReq);

#if UNICCL_DEVICE_API
enum class ncclGinFenceLevel { Relaxed };
#endif

#endif /* UNICCL_NCCL_DEVICE_GIN_BARRIER_H */
