/* The public header must also serve C programs (NCCL's header does): this
 * file is compiled as C11 and pins the layouts once more through the C
 * compiler, whose struct layout rules a C program would use. */
#include <nccl.h>
#ifndef UNICCL_H_
#error "<nccl.h> did not resolve to uniccl's include/nccl.h"
#endif

#include <stddef.h>

_Static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId");
_Static_assert(sizeof(ncclConfig_t) == 80, "ncclConfig_t");
_Static_assert(offsetof(ncclConfig_t, netName) == 32, "netName");
_Static_assert(offsetof(ncclConfig_t, commName) == 48, "commName");
_Static_assert(offsetof(ncclConfig_t, nvlinkCentricSched) == 76, "nvlinkCentricSched");
_Static_assert(sizeof(ncclSimInfo_t) == 24, "ncclSimInfo_t");
_Static_assert(sizeof(ncclRedOp_t) == 4, "ncclRedOp_t");
_Static_assert(ncclMaxRedOp == 0x7fffffff, "ncclMaxRedOp");
_Static_assert(ncclNumTypes == 12, "ncclNumTypes");

/* C sees real prototypes, not K&R declarations (checked without linking). */
_Static_assert(__builtin_types_compatible_p(
                   __typeof__(&ncclAllReduce),
                   ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                    ncclComm_t, uniccl_stream_t)),
               "ncclAllReduce");
_Static_assert(__builtin_types_compatible_p(__typeof__(&ncclGroupStart), ncclResult_t (*)(void)),
               "ncclGroupStart");

/* RCCL's header adds its names for C programs too, with RCCL's values. */
#include <rccl/rccl.h>
#if !defined(RCCL_BFLOAT16) || !defined(RCCL_FLOAT8) || !defined(RCCL_GATHER_SCATTER) || !defined(RCCL_ALLTOALLV)
#error "<rccl/rccl.h> lacks RCCL's feature macros"
#endif
_Static_assert(ncclFp8E4M3 == 10 && ncclFp8E5M2 == 11, "RCCL's fp8 datatype values");
_Static_assert(__builtin_types_compatible_p(
                   __typeof__(&ncclAllToAllv),
                   ncclResult_t (*)(const void*, const size_t*, const size_t*, void*, const size_t*, const size_t*,
                                    ncclDataType_t, ncclComm_t, uniccl_stream_t)),
               "ncclAllToAllv");

int main(void) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  if (config.size != 80 || config.magic != 0xcafebeefu || config.version != 22809) return 1;
  if (sim.size != 24 || sim.magic != 0x74685283u || sim.estimatedTime != -1.0f) return 1;
  return 0;
}
