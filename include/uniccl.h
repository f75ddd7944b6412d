/*
 * uniccl: GPU collective communication with the NCCL C API.
 *
 * This header declares the complete NCCL 2.28.9 C interface (names, types,
 * enum values, struct layouts, macros), so code written for NCCL or RCCL
 * compiles against uniccl unchanged, and binaries built against NCCL's own
 * header run on uniccl's libnccl.so.2 / librccl.so.1. Layouts are ABI: never
 * reorder or resize anything below; new ncclConfig_t fields only go at the end.
 *
 * Detect uniccl with `#ifdef UNICCL_H_`. include/nccl.h and include/rccl/rccl.h
 * include this file, so <nccl.h> and <rccl/rccl.h> resolve here.
 */
#ifndef UNICCL_H_
#define UNICCL_H_

/* Mixing headers would redefine every type with possibly different values;
 * fail early with a message that says how to fix the include path. */
#if defined(NCCL_H_)
#error "another nccl.h (NVIDIA NCCL or RCCL) was included before uniccl.h: put uniccl's include/ directory first on the include path (-I before -isystem)"
#endif
/* Every NCCL-compatible header uses NCCL_H_ as its guard: claiming it makes a
 * vendor nccl.h reached later through another path a harmless no-op. */
#define NCCL_H_

/* ------------------------------------------------------------------ versions */
#define UNICCL_VERSION_MAJOR 0
#define UNICCL_VERSION_MINOR 1
#define UNICCL_VERSION_PATCH 0
#define UNICCL_VERSION_CODE \
  (UNICCL_VERSION_MAJOR * 10000 + UNICCL_VERSION_MINOR * 100 + UNICCL_VERSION_PATCH)

/* The NCCL release whose API and ABI uniccl implements; ncclGetVersion()
 * reports NCCL_VERSION_CODE so version checks in applications keep working. */
#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 22809
/* Releases up to 2.8 encoded the version as X*1000+Y*100+Z; later ones use
 * X*10000+Y*100+Z. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

/* ------------------------------------------------------------ vendor runtime */
/* The only vendor-specific part of the public API is the stream type the
 * collectives are enqueued on. This is the single place outside the backends
 * that names vendor types. */
#if defined(UNICCL_GPU_BACKEND_HIP) || defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#if defined(__has_include)
#if __has_include(<hip/hip_bf16.h>)
#include <hip/hip_bf16.h>
#elif __has_include(<hip/hip_bfloat16.h>)
#include <hip/hip_bfloat16.h>
#endif
#endif
typedef hipStream_t uniccl_stream_t;
#else
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
typedef cudaStream_t uniccl_stream_t;
#endif

#include <limits.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --------------------------------------------------------------------- types */
/* Communicator handle; the structure behind it is private to the library. */
typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

/* Handle of a registered memory window (ncclCommWindowRegister). */
typedef struct ncclWindow_vidmem* ncclWindow_t;

/* Opaque rendezvous token: created by one rank (ncclGetUniqueId), shipped to
 * the others out of band (MPI, a file, a socket), passed to the init calls. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* Result of every call. Anything other than ncclSuccess and ncclInProgress is
 * an error; ncclGetLastError() returns a sentence that says what went wrong. */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1, /* the GPU runtime reported an error */
  ncclSystemError = 2,        /* a system call failed (sockets, shared memory, ...) */
  ncclInternalError = 3,      /* a bug in the library or memory corruption */
  ncclInvalidArgument = 4,    /* an argument has a wrong value */
  ncclInvalidUsage = 5,       /* calls made in a wrong order or state */
  ncclRemoteError = 6,        /* a peer failed or the network broke */
  ncclInProgress = 7,         /* non-blocking communicator: still working */
  ncclNumResults = 8
} ncclResult_t;

/* "Not set by the user": the library picks its default (and environment
 * variables may apply). */
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
/* ncclCommSplit color for ranks that take no part in any new communicator. */
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* winFlags of ncclCommWindowRegister. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy: how many GPU blocks communication may take. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* shrinkFlags of ncclCommShrink. */
#define NCCL_SHRINK_DEFAULT 0x00 /* parent is healthy: shrink it as it is */
#define NCCL_SHRINK_ABORT 0x01   /* stop the parent's pending work first, then shrink */

/* revokeFlags of ncclCommRevoke (no flags defined yet: pass 0). */
#define NCCL_REVOKE_DEFAULT 0x00

/* Communicator options for ncclCommInitRankConfig / Split / Shrink /
 * InitRankScalable. Always start from NCCL_CONFIG_INITIALIZER and set only
 * the fields you care about: size, magic and version tell the library which
 * header the program was built with, so programs built against older NCCL
 * headers (smaller structs) keep working. */
typedef struct ncclConfig_v22800 {
  /* filled by NCCL_CONFIG_INITIALIZER; do not touch */
  size_t size;
  unsigned int magic;
  unsigned int version;
  /* options (NCCL_CONFIG_UNDEF_* = library default) */
  int blocking;            /* 0: calls may return ncclInProgress */
  int cgaClusterSize;      /* thread-block cluster size of kernels (NVIDIA sm_90+) */
  int minCTAs;             /* least number of channels (GPU blocks) */
  int maxCTAs;             /* most number of channels (GPU blocks) */
  const char* netName;     /* network transport to use, e.g. "Socket", "IB" */
  int splitShare;          /* 1: children of ncclCommSplit share the parent's resources */
  int trafficClass;        /* network traffic class (QoS) */
  const char* commName;    /* name shown in logs and profilers */
  int collnetEnable;       /* 1: allow in-network reductions */
  int CTAPolicy;           /* NCCL_CTA_POLICY_* */
  int shrinkShare;         /* 1: children of ncclCommShrink share the parent's resources */
  int nvlsCTAs;            /* channels for NVLink SHARP algorithms */
  int nChannelsPerNetPeer; /* channels per remote peer for point-to-point */
  int nvlinkCentricSched;  /* 1: schedule to maximize NVLink utilization */
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER {                                    \
  sizeof(ncclConfig_t),                            /* size */             \
  0xcafebeef,                                      /* magic */            \
  NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */         \
  NCCL_CONFIG_UNDEF_INT,                           /* blocking */         \
  NCCL_CONFIG_UNDEF_INT,                           /* cgaClusterSize */   \
  NCCL_CONFIG_UNDEF_INT,                           /* minCTAs */          \
  NCCL_CONFIG_UNDEF_INT,                           /* maxCTAs */          \
  NCCL_CONFIG_UNDEF_PTR,                           /* netName */          \
  NCCL_CONFIG_UNDEF_INT,                           /* splitShare */       \
  NCCL_CONFIG_UNDEF_INT,                           /* trafficClass */     \
  NCCL_CONFIG_UNDEF_PTR,                           /* commName */         \
  NCCL_CONFIG_UNDEF_INT,                           /* collnetEnable */    \
  NCCL_CONFIG_UNDEF_INT,                           /* CTAPolicy */        \
  NCCL_CONFIG_UNDEF_INT,                           /* shrinkShare */      \
  NCCL_CONFIG_UNDEF_INT,                           /* nvlsCTAs */         \
  NCCL_CONFIG_UNDEF_INT,                           /* nChannelsPerNetPeer */ \
  NCCL_CONFIG_UNDEF_INT,                           /* nvlinkCentricSched */ \
}

/* Result of ncclGroupSimulateEnd. Start from NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime; /* predicted run time of the group, in microseconds */
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER {                                     \
  sizeof(ncclSimInfo_t),                           /* size */           \
  0x74685283,                                      /* magic */          \
  NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */       \
  NCCL_UNDEF_FLOAT                                 /* estimatedTime */  \
}

/* Reduction operators. Values from ncclNumOps upwards are handles returned by
 * ncclRedOpCreatePreMulSum. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5, /* number of built-in operators, first user-created one */
  /* Largest value: the largest signed value that keeps sizeof(ncclRedOp_t)
   * equal to that of the older, smaller enum (ABI). */
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/* Element types. ncclChar/ncclInt/ncclHalf/ncclFloat/ncclDouble are
 * historical spellings of the sized names. */
typedef enum {
  ncclInt8 = 0, ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2, ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6, ncclHalf = 6,
  ncclFloat32 = 7, ncclFloat = 7,
  ncclFloat64 = 8, ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives and when it is read. */
typedef enum {
  ncclScalarDevice = 0,       /* device memory, read by the kernel when it runs */
  ncclScalarHostImmediate = 1 /* host memory, read before the create call returns */
} ncclScalarResidence_t;

/* ------------------------------------------------------------------ memory */
/* Allocates GPU memory suited to every optimization (registration, windows,
 * multicast). The allocation may be rounded up to the runtime's granularity. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);

ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* ------------------------------------------------ library and communicators */
/* Writes NCCL_VERSION_CODE of the NCCL API the library implements. */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/* Creates the rendezvous token; call it on one rank and give the result to
 * all ranks before they call an init function. */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/* ncclCommInitRank with options (config may be NULL for defaults). */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);

/* Joins communicator `commId` as `rank` of `nranks` on the current GPU. All
 * ranks must call it concurrently (other threads/processes, or inside one
 * ncclGroupStart/ncclGroupEnd when one thread drives several GPUs). */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/* Creates `ndev` communicators in this process, one per device of `devlist`
 * (the first ndev devices when NULL); comm must hold ndev handles. */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/* Completes all work issued on the communicator and releases its shared
 * resources, so that ncclCommDestroy afterwards does not block. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/* Frees the communicator's local resources. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/* Stops all of the communicator's pending GPU and network work, then frees it. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/* Stops in-flight work but keeps the communicator, so that it can still be
 * destroyed, split or shrunk. revokeFlags must be NCCL_REVOKE_DEFAULT. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* Creates new communicators from the ranks of `comm` that pass the same
 * `color` (ordered by `key`); NCCL_SPLIT_NOCOLOR yields *newcomm == NULL.
 * config NULL: inherit the parent's options. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                            ncclConfig_t* config);

/* Creates a communicator of `comm`'s ranks minus `excludeRanksList`; ranks
 * are renumbered densely. shrinkFlags: NCCL_SHRINK_*. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);

/* ncclCommInitRankConfig with `nId` tokens (same list, same order on every
 * rank) to spread the rendezvous of large jobs over several roots. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config);

/* Short name of a result code. */
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/* Sentence describing the last error the calling thread saw. */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/* Rereads the logging environment (NCCL_DEBUG...). Kept for old programs. */
__attribute__((deprecated("ncclResetDebugInit is not part of the supported NCCL API")))
void ncclResetDebugInit(void);
__attribute__((deprecated("pncclResetDebugInit is not part of the supported NCCL API")))
void pncclResetDebugInit(void);

/* Error that background work (network, watchdog, non-blocking init) hit. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);

/* GPU device index of the communicator. */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* Registers a user buffer for zero-copy transfers; returns a handle. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/* Registers a buffer collectively as a window (winFlags: NCCL_WIN_*). */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                     int winFlags);

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* ------------------------------------------------------ reduction operators */
/* Creates an operator that multiplies each input by *scalar before summing;
 * valid only with `comm` and `datatype`. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);

/* Destroys an operator made by ncclRedOpCreatePreMulSum on the same comm; it
 * may be destroyed as soon as the last call using it has returned. */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* -------------------------------------------------------------- collectives */
/* Every rank of the communicator must call the same collectives in the same
 * order. Calls return once the work is enqueued on `stream`; it completes
 * asynchronously. Passing the same pointer as send and receive buffer (at the
 * offsets noted) runs the operation in place. */

/* Reduces `count` elements of every rank's sendbuff with `op` into the
 * recvbuff of rank `root` (recvbuff is unused elsewhere). */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        uniccl_stream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         uniccl_stream_t stream);

/* Broadcast in place (older form of ncclBroadcast with sendbuff == recvbuff). */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, uniccl_stream_t stream);

/* Copies `count` elements from `root`'s sendbuff into every rank's recvbuff. */
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           uniccl_stream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            uniccl_stream_t stream);

/* Reduces `count` elements across ranks; every rank receives the result. */
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           uniccl_stream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            uniccl_stream_t stream);

/* Reduces nranks*recvcount elements; rank i receives block i of the result.
 * In place when recvbuff == sendbuff + rank*recvcount. */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               uniccl_stream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                uniccl_stream_t stream);

/* Every rank receives all ranks' `sendcount` elements, rank i's at offset
 * i*sendcount. In place when sendbuff == recvbuff + rank*sendcount. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, uniccl_stream_t stream);

/* Block j (count elements) of sendbuff goes to rank j; the block from rank i
 * lands at recvbuff + i*count. */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, uniccl_stream_t stream);

/* `root` receives every rank's `count` elements, rank i's at recvbuff +
 * i*count. In place when sendbuff == recvbuff + root*count. */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm,
                        uniccl_stream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm,
                         uniccl_stream_t stream);

/* `root` sends block i (sendbuff + i*count) to rank i. In place when
 * recvbuff == sendbuff + root*count. */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm,
                         uniccl_stream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm,
                          uniccl_stream_t stream);

/* ----------------------------------------------------------- point to point */
/* Sends `count` elements to `peer`, which posts a matching ncclRecv. Sends
 * and receives that must progress together belong in one group. */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, uniccl_stream_t stream);

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, uniccl_stream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, uniccl_stream_t stream);

/* ------------------------------------------------------------------- groups */
/* Calls between ncclGroupStart and ncclGroupEnd are collected and launched
 * together at ncclGroupEnd: needed when one thread drives several ranks, and
 * to fuse operations or let sends and receives progress concurrently. Groups
 * nest; only the outermost ncclGroupEnd launches. */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);

ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/* Ends the group without running it and reports the predicted time. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* UNICCL_H_ */
