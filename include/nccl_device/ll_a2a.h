/*
 * uniccl's Device API: the LL (flag-in-data) all-to-all, host part. A slot
 * is 16 bytes: 8 of data and 8 of flags, so an element of maxEltSize bytes
 * takes ceil(maxEltSize / 8) slots. Device-side sessions are not part of
 * this uniccl version.
 */
#ifndef UNICCL_NCCL_DEVICE_LL_A2A_H
#define UNICCL_NCCL_DEVICE_LL_A2A_H
#include "core.h"

/* Slots that hold maxElts elements of up to maxEltSize bytes (-1 on bad input). */
NCCL_EXTERN_C __host__ int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
NCCL_EXTERN_C __host__ ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                                               ncclDevResourceRequirements_t* outReq);
#endif
