/*
 * <rccl/rccl.h> for programs written against AMD RCCL: the whole API comes
 * from uniccl.h (RCCL speaks the same NCCL API on hipStream_t).
 */
#ifndef NCCL_H_
#include "../uniccl.h" /* defines NCCL_H_ */
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * RCCL's multi-rank-per-device init: like ncclCommInitRank on the calling
 * thread's current GPU, and the rank may share that GPU with other ranks of
 * the communicator, each passing its own virtualId (>= 0, different among
 * the ranks of one GPU). Ranks of one GPU must live in one process unless an
 * MPS server runs; each rank's channels are capped so that all their blocks
 * stay resident together, and a communicator that cannot fit is refused
 * (docs/gpu-sharing.md). NCCL programs get the same through
 * UNICCL_RANKS_PER_GPU.
 */
ncclResult_t ncclCommInitRankMulti(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, int virtualId);
ncclResult_t pncclCommInitRankMulti(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, int virtualId);

#ifdef __cplusplus
}
#endif
