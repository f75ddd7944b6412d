/*
 * <rccl/rccl.h> for programs written against AMD RCCL (rccl-tests, ROCm
 * builds of PyTorch): the NCCL API comes from uniccl.h (RCCL speaks the same
 * API on hipStream_t; with uniccl's CUDA build, on cudaStream_t), plus the
 * names only RCCL has. Both backends' libraries (libuniccl.so, libnccl.so.2,
 * librccl.so.1) export these functions.
 *
 * fp8: ncclFp8E4M3 / ncclFp8E5M2 are RCCL's names of the datatype values 10
 * and 11, NCCL's ncclFloat8e4m3 / ncclFloat8e5m2. uniccl reads them as the
 * OCP formats on every target: e4m3 "FN" (bias 7, no infinities, 0x7f/0xff
 * NaN, largest 448) and e5m2 (IEEE-like, bias 15). RCCL on MI300
 * (gfx940/941/942) reads them as the FNUZ formats (e4m3fnuz: bias 8, largest
 * 240, 0x80 NaN, no negative zero; e5m2fnuz: bias 16). So on MI300, moving
 * fp8 data (AllGather, Broadcast, AlltoAll(v), Send/Recv, Gather, Scatter)
 * is bit-exact either way, but reductions of FNUZ data (AllReduce, Reduce,
 * ReduceScatter) give values RCCL would not: reduce FNUZ tensors in a wider
 * type there (docs/rccl.md).
 */
#ifndef UNICCL_RCCL_H_
#define UNICCL_RCCL_H_

#include "../uniccl.h"

/* What RCCL's header advertises; programs test these with #ifdef. */
#define RCCL_BFLOAT16 1
#define RCCL_FLOAT8 1
#define RCCL_GATHER_SCATTER 1
#define RCCL_ALLTOALLV 1

/* RCCL's spellings of the fp8 datatypes (the same enum values as RCCL's).
 * Macros rather than enumerators, so `ncclDataType_t::ncclFp8E4M3` in C++
 * and case labels in C keep working. */
#define ncclFp8E4M3 ncclFloat8e4m3
#define ncclFp8E5M2 ncclFloat8e5m2

#ifdef __cplusplus
extern "C" {
#endif

/* AllToAll: RCCL's name of ncclAlltoAll. Block j (count elements) of rank
 * i's sendbuff lands as block i of rank j's recvbuff. sendbuff == recvbuff
 * runs in place (as ncclAlltoAll). */
ncclResult_t ncclAllToAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t pncclAllToAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, uniccl_stream_t stream);

/* AllToAllv: rank i sends sendcounts[j] elements from sendbuff + sdispls[j]
 * to rank j, and receives recvcounts[j] elements from rank j into
 * recvbuff + rdispls[j] (counts and displacements in elements, arrays of
 * nranks entries). recvcounts[j] on rank i must equal sendcounts[i] on rank
 * j; zero counts move nothing. Overlapping send and receive ranges are
 * refused (ncclInvalidArgument). */
ncclResult_t ncclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                           const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype,
                           ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t pncclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                            void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                            ncclDataType_t datatype, ncclComm_t comm, uniccl_stream_t stream);

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

#endif /* UNICCL_RCCL_H_ */
