/*
 * uniccl's Device API, host-visible part (NCCL 2.28.9 names and layouts):
 * teams, resource handles, window and device-communicator structures, the
 * requirements a program hands to ncclDevCommCreate, and the host functions.
 *
 * Structures that NCCL-built kernels read inline (ncclDevComm, the window,
 * the handles, ncclTeam) have NCCL 2.28.9's exact layout; a unit test pins
 * every size and offset (tests/unit/api/device_abi_test.cc).
 *
 * What works in this version (README "Status", docs/device_api.md): the
 * team functions, the requirement builders, the team arithmetic below,
 * device communicators over LSA teams, and in device code (nvcc, hipcc, the
 * CPU emulator: utility.h) the window pointer functions at the end of this
 * file, ncclSymPtr (ptr.h), the cooperative groups (coop.h), LSA barriers
 * (lsa_barrier.h, barrier.h), the LL all-to-all (ll_a2a.h) and GIN puts,
 * signals, counters and barriers through uniccl's proxy thread (gin.h,
 * gin_barrier.h). Multimem requests are refused by ncclDevCommCreate with
 * ncclInvalidUsage.
 */
#ifndef UNICCL_NCCL_DEVICE_CORE_H
#define UNICCL_NCCL_DEVICE_CORE_H

#ifdef _NCCL_DEVICE_CORE_H_
#error "NVIDIA's nccl_device/core.h was included before uniccl's: put uniccl's include/ first"
#endif

#include "../nccl.h" /* relative: never a vendor nccl.h found on the search path */
#include "utility.h"
#include "coop.h"

/* ------------------------------------------------------------ plain handles */
typedef uint32_t ncclDevResourceHandle; /* 128-byte units into the resource window */
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;
typedef void* ncclGinWindow_t;

#define NCCL_GIN_MAX_CONTEXTS 4

/* A team: nRanks ranks of which this one is `rank`; consecutive team ranks
 * are `stride` apart in world (communicator) ranks. */
struct ncclTeam {
  int nRanks, rank, stride;
};
typedef struct ncclTeam ncclTeam_t;

struct ncclMultimemHandle {
  void* mcBasePtr;
};
typedef struct ncclMultimemHandle ncclMultimemHandle_t;

struct ncclLsaBarrierHandle {
  ncclDevResourceHandle_t bufHandle;
  int nBarriers;
};
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;

struct ncclGinBarrierHandle {
  ncclGinSignal_t signal0;
  ncclDevResourceHandle_t bufHandle;
};
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;

struct ncclLLA2AHandle {
  ncclDevResourceHandle_t bufHandle;
  uint32_t nSlots;
};
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

/* What ncclWindow_t (nccl.h) points to: the LSA team's buffers of a window
 * mapped one after another, stride4G * 4 GiB apart, from lsaFlatBase. */
struct ncclWindow_vidmem {
  void* winHost;
  char* lsaFlatBase;
  int lsaRank;
  int worldRank;
  uint32_t stride4G;
  uint32_t mcOffset4K;
  uint32_t ginOffset4K;
  ncclGinWindow_t ginWins[NCCL_GIN_MAX_CONTEXTS];
};

/* Registered windows by address: 32 entries per table, chained. */
struct ncclDevCommWindowTableEntry {
  uintptr_t base, size;
  ncclWindow_t window;
};
struct ncclDevCommWindowTable {
#ifdef __cplusplus
  typedef ncclDevCommWindowTableEntry Entry; /* NCCL's nested name */
#endif
  struct ncclDevCommWindowTableEntry entries[32];
  struct ncclDevCommWindowTable* next;
};

/* The device communicator a kernel receives by value. */
struct ncclDevComm {
  int rank, nRanks;
  uint32_t nRanks_rcp32; /* reciprocal for fast division on the GPU */
  int lsaRank, lsaSize;
  uint32_t lsaSize_rcp32;
  struct ncclDevCommWindowTable* windowTable;
  ncclWindow_t resourceWindow;
  struct ncclWindow_vidmem resourceWindow_inlined;
  ncclMultimemHandle_t lsaMultimem;
  ncclLsaBarrierHandle_t lsaBarrier;
  ncclGinBarrierHandle_t railGinBarrier;
  uint8_t ginContextCount;
  uint8_t ginTypes[4];
  void* ginHandles[4];
  uint32_t ginSignalBase;
  int ginSignalCount;
  uint32_t ginCounterBase;
  int ginCounterCount;
  uint64_t* ginSignalShadows;
};
typedef struct ncclDevComm ncclDevComm_t;

/* ------------------------------------------------------------- requirements */
/* One resource a library or kernel needs in the device communicator: a
 * buffer in the resource window and/or GIN signals and counters. The
 * ncclDevCommCreate call writes where they landed through the out pointers. */
struct ncclDevResourceRequirements {
  struct ncclDevResourceRequirements* next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
};
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;

struct ncclTeamRequirements {
  struct ncclTeamRequirements* next;
  ncclTeam_t team;
  bool multimem;
  ncclMultimemHandle_t* outMultimemHandle;
};
typedef struct ncclTeamRequirements ncclTeamRequirements_t;

struct ncclDevCommRequirements {
  ncclDevResourceRequirements_t* resourceRequirementsList;
  ncclTeamRequirements_t* teamRequirementsList;
  bool lsaMultimem;
  int barrierCount;
  int lsaBarrierCount;
  int railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount; /* a hint */
  int ginSignalCount;  /* ids start at 0 */
  int ginCounterCount; /* ids start at 0 */
};
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;

/* NCCL 2.28.9 has no initializer macro (programs zero the struct); later
 * NCCL versions add one under this name, so code written for them builds. */
#ifdef __cplusplus
#define NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER {}
#else
#define NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER {0}
#endif

/* ------------------------------------------------------- host API functions */
/* Collective over comm (in a group, it runs at ncclGroupEnd). GIN signals,
 * counters, contexts and barriers are set up over the network (every rank
 * must ask for the same); multimem: ncclInvalidUsage on every rank. */
NCCL_EXTERN_C __host__ ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                                      ncclDevComm_t* outDevComm);
NCCL_EXTERN_C __host__ ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);

/* World: every rank (stride 1). LSA: the ranks this one can load/store
 * directly, a block of consecutive ranks of the same size on every rank.
 * Rail: the ranks at the same position of every LSA block (stride lsaSize).
 * A bad comm gives a WARN and the empty team {0, 0, 0}. */
NCCL_EXTERN_C __host__ ncclTeam_t ncclTeamWorld(ncclComm_t comm);
NCCL_EXTERN_C __host__ ncclTeam_t ncclTeamLsa(ncclComm_t comm);
NCCL_EXTERN_C __host__ ncclTeam_t ncclTeamRail(ncclComm_t comm);
/* Rank `rank` of `team` (a team this rank belongs to) as a world / LSA
 * rank; -1 with a WARN when it is not one. */
NCCL_EXTERN_C __host__ int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
NCCL_EXTERN_C __host__ int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/* ---------------------------------------------------------- team arithmetic */
/* Both teams contain this rank. Is b's rank bRank a member of a? */
NCCL_HOST_DEVICE_INLINE bool ncclTeamRankIsMember(ncclTeam_t a, ncclTeam_t b, int bRank) {
  int world = (bRank - b.rank) * b.stride; /* world distance from this rank */
  int aRank = a.rank + world / a.stride;
  return world % a.stride == 0 && 0 <= aRank && aRank < a.nRanks;
}

/* b's rank bRank as a rank of a (meaningful when it is a member). */
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToTeam(ncclTeam_t a, ncclTeam_t b, int bRank) {
  return a.rank + (bRank - b.rank) * b.stride / a.stride;
}

/* Split parent into blocks of innerSize consecutive team ranks: the block of
 * this rank (inner) or the team of the ranks at its position in every
 * block (outer). */
NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamInnerFactor(ncclTeam_t parent, int innerSize) {
  ncclTeam_t t;
  t.nRanks = innerSize;
  t.rank = parent.rank % innerSize;
  t.stride = parent.stride;
  return t;
}
NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamOuterFactor(ncclTeam_t parent, int innerSize) {
  ncclTeam_t t;
  t.nRanks = parent.nRanks / innerSize;
  t.rank = parent.rank / innerSize;
  t.stride = parent.stride * innerSize;
  return t;
}

/* The index-th parent rank (in increasing order) that is not in subset,
 * subset being a subset of parent that contains this rank. */
NCCL_HOST_DEVICE_INLINE int ncclTeamRankInDifference(ncclTeam_t parent, ncclTeam_t subset, int index) {
  for (int r = 0; r < parent.nRanks; r++) {
    if (ncclTeamRankIsMember(subset, parent, r)) continue;
    if (index-- == 0) return r;
  }
  return -1;
}

/* Byte offset of a resource buffer in the device communicator's resource window. */
NCCL_HOST_DEVICE_INLINE size_t ncclGetResourceBufferOffset(ncclDevResourceHandle_t h) {
  return (size_t)h * 128;
}

#ifdef __cplusplus
/* The same teams read from a device communicator (host or device code). */
NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamWorld(ncclDevComm const& comm) {
  return ncclTeam{comm.nRanks, comm.rank, 1};
}
NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamLsa(ncclDevComm const& comm) {
  return ncclTeam{comm.lsaSize, comm.lsaRank, 1};
}
NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamRail(ncclDevComm const& comm) {
  return ncclTeam{comm.nRanks / comm.lsaSize, comm.rank / comm.lsaSize, comm.lsaSize};
}
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToWorld(ncclDevComm const& comm, ncclTeam team, int rank) {
  return comm.rank + (rank - team.rank) * team.stride;
}
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToLsa(ncclDevComm const& comm, ncclTeam team, int rank) {
  return comm.lsaRank + (rank - team.rank) * team.stride;
}
#endif

#ifdef __cplusplus
/* Tags that pick a team a device communicator knows (session constructors). */
struct ncclTeamTagWorld {};
struct ncclTeamTagLsa {};
struct ncclTeamTagRail {};

template <typename T>
struct ncclSymPtr; /* ptr.h */
#endif

/* ------------------------------------------------ window pointers (device) */
/* A window's LSA team buffers are mapped one after another from
 * lsaFlatBase, stride4G * 4 GiB apart: LSA rank i's byte `offset` is at
 * lsaFlatBase + i * stride4G * 4 GiB + offset (NCCL's flat layout). Peers
 * are named by LSA rank (Lsa), world rank (Peer) or rank in a team (Peer
 * with a team); they must be members of this rank's LSA team, which is not
 * checked (a device function cannot fail).
 *
 * Multimem pointers (ncclGetMultimemPointer, ncclGetLsaMultimemPointer and
 * their resource-buffer forms) compute NCCL's address (the handle's
 * multicast base + the window's mcOffset4K pages + offset) so that kernels
 * written for NCCL build; they are meaningful only with a device
 * communicator made with multimem, which uniccl never makes
 * (ncclDevCommCreate refuses lsaMultimem and multimem teams: NVLink
 * multicast is not used), so a program cannot reach them with a valid
 * handle: its ncclDevCommCreate call fails first. */
#if UNICCL_DEVICE_API
namespace uniccl {
namespace devapi {
NCCL_DEVICE_INLINE void* flatPointer(char* lsaFlatBase, uint32_t stride4G, int lsaPeer, size_t offset) {
  return lsaFlatBase + (size_t)lsaPeer * ((size_t)stride4G << 32) + offset;
}
}  // namespace devapi
}  // namespace uniccl

NCCL_DEVICE_INLINE void* ncclGetLocalPointer(ncclWindow_t w, size_t offset) {
  return uniccl::devapi::flatPointer(w->lsaFlatBase, w->stride4G, w->lsaRank, offset);
}
/* peer: an LSA rank. */
NCCL_DEVICE_INLINE void* ncclGetLsaPointer(ncclWindow_t w, size_t offset, int peer) {
  return uniccl::devapi::flatPointer(w->lsaFlatBase, w->stride4G, peer, offset);
}
/* peer: a world rank of this rank's LSA team. */
NCCL_DEVICE_INLINE void* ncclGetPeerPointer(ncclWindow_t w, size_t offset, int peer) {
  return uniccl::devapi::flatPointer(w->lsaFlatBase, w->stride4G, w->lsaRank + (peer - w->worldRank), offset);
}
/* peer: a rank of `team` (a team this rank is in, inside its LSA team). */
NCCL_DEVICE_INLINE void* ncclGetPeerPointer(ncclWindow_t w, size_t offset, ncclTeam tm, int peer) {
  return uniccl::devapi::flatPointer(w->lsaFlatBase, w->stride4G, w->lsaRank + (peer - tm.rank) * tm.stride, offset);
}

/* The same in the device communicator's resource window (its inlined copy),
 * at the buffer a resource handle names. */
NCCL_DEVICE_INLINE void* ncclGetResourceBufferLocalPointer(ncclDevComm const& comm, ncclDevResourceHandle h) {
  return uniccl::devapi::flatPointer(comm.resourceWindow_inlined.lsaFlatBase, comm.resourceWindow_inlined.stride4G,
                                     comm.lsaRank, ncclGetResourceBufferOffset(h));
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferLsaPointer(ncclDevComm const& comm, ncclDevResourceHandle h, int peer) {
  return uniccl::devapi::flatPointer(comm.resourceWindow_inlined.lsaFlatBase, comm.resourceWindow_inlined.stride4G,
                                     peer, ncclGetResourceBufferOffset(h));
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferPeerPointer(ncclDevComm const& comm, ncclDevResourceHandle h,
                                                          ncclTeam team, int peer) {
  return uniccl::devapi::flatPointer(comm.resourceWindow_inlined.lsaFlatBase, comm.resourceWindow_inlined.stride4G,
                                     comm.lsaRank + (peer - team.rank) * team.stride, ncclGetResourceBufferOffset(h));
}

/* Multimem (see above: unreachable with a device communicator uniccl made). */
NCCL_DEVICE_INLINE void* ncclGetMultimemPointer(ncclWindow_t w, size_t offset, ncclMultimemHandle mm) {
  return (char*)mm.mcBasePtr + (size_t)w->mcOffset4K * 4096 + offset;
}
NCCL_DEVICE_INLINE void* ncclGetLsaMultimemPointer(ncclWindow_t w, size_t offset, ncclDevComm const& comm) {
  return ncclGetMultimemPointer(w, offset, comm.lsaMultimem);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferMultimemPointer(ncclDevComm const& comm, ncclDevResourceHandle h,
                                                              ncclMultimemHandle mm) {
  return (char*)mm.mcBasePtr + (size_t)comm.resourceWindow_inlined.mcOffset4K * 4096 + ncclGetResourceBufferOffset(h);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferLsaMultimemPointer(ncclDevComm const& comm, ncclDevResourceHandle h) {
  return ncclGetResourceBufferMultimemPointer(comm, h, comm.lsaMultimem);
}

/* The registered window that holds ptr, from the device communicator's
 * window table; NULL when none does (NCCL 2.28.9 never returns then). Every
 * thread of coop calls it and gets the same answer (each looks itself). */
template <typename Coop>
NCCL_DEVICE_INLINE ncclWindow_t ncclFindWindow(Coop, ncclDevComm const& comm, void const* ptr) {
  uintptr_t p = (uintptr_t)ptr;
  for (ncclDevCommWindowTable const* t = comm.windowTable; t != NULL; t = t->next) {
    for (int i = 0; i < 32; i++) {
      ncclDevCommWindowTableEntry const& e = t->entries[i];
      if (e.base != 0 && e.size != 0 && e.window != NULL && p - e.base < e.size) return e.window;
    }
  }
  return NULL;
}
#endif /* UNICCL_DEVICE_API */

#endif /* UNICCL_NCCL_DEVICE_CORE_H */
