/*
 * uniccl's Device API: ncclBarrierSession, NCCL's barrier over an inner
 * (LSA) and an outer (GIN, the network) team:
 *
 *   ncclBarrierSession<Coop> bar(coop, ncclTeamTagLsa(), devComm, index);
 *   ncclBarrierSession<Coop> bar(coop, ncclTeamTagRail(), gin, index);
 *   ncclBarrierSession<Coop> bar(coop, ncclTeamTagWorld(), gin, index);
 *   ncclBarrierSession<Coop> bar(coop, inner, outer, gin, lsaHandle, ginHandle, index);
 *   bar.sync(coop, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
 *
 * LSA: devComm.lsaBarrier's barrier `index` (lsa_barrier.h). Rail: the GIN
 * barrier devComm.railGinBarrier over the rail team (gin_barrier.h). World:
 * the LSA barrier, then the rail GIN barrier (every rank of the world has
 * arrived once every rail peer passed its own team's LSA barrier); the
 * device communicator needs barrierCount (or lsaBarrierCount and
 * railGinBarrierCount) barriers. lsaBarrier() / ginBarrier() are the parts
 * (the one a session lacks must not be asked for). multimem is accepted and
 * ignored (uniccl's LSA barrier is unicast).
 */
#ifndef UNICCL_NCCL_DEVICE_BARRIER_H
#define UNICCL_NCCL_DEVICE_BARRIER_H
#include "core.h"
#include "coop.h"
#include "gin_barrier.h"
#include "lsa_barrier.h"

#if UNICCL_DEVICE_API
#include <new> /* placement new: a session has either part or both */

template <typename Coop>
struct ncclBarrierSession {
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagLsa tag, ncclDevComm const& comm, uint32_t index,
                                        bool multimem = false)
      : hasLsa_(true), hasGin_(false) {
    new (lsaMem_) Lsa(coop, comm, tag, index, multimem);
  }
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagRail, ncclGin gin, uint32_t index)
      : hasLsa_(false), hasGin_(true) {
    new (ginMem_) Gin(coop, gin, ncclTeamRail(gin.comm), gin.comm.railGinBarrier, index);
  }
  /* With one LSA team (a rail of one rank) the world barrier is the LSA one. */
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagWorld, ncclGin gin, uint32_t index,
                                        bool multimem = false)
      : hasLsa_(true), hasGin_(ncclTeamRail(gin.comm).nRanks > 1) {
    new (lsaMem_) Lsa(coop, gin.comm, ncclTeamLsa(gin.comm), gin.comm.lsaBarrier, index, multimem);
    if (hasGin_) new (ginMem_) Gin(coop, gin, ncclTeamRail(gin.comm), gin.comm.railGinBarrier, index);
  }
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeam innerTeam, ncclTeam outerTeam, ncclGin gin,
                                        ncclLsaBarrierHandle innerHandle, ncclGinBarrierHandle outerHandle,
                                        uint32_t index, bool multimem = false,
                                        ncclMultimemHandle innerMmHandle = ncclMultimemHandle{})
      : hasLsa_(true), hasGin_(true) {
    (void)innerMmHandle;
    new (lsaMem_) Lsa(coop, gin.comm, innerTeam, innerHandle, index, multimem);
    new (ginMem_) Gin(coop, gin, outerTeam, outerHandle, index);
  }
  NCCL_DEVICE_INLINE ~ncclBarrierSession() {
    if (hasGin_) ginBarrier().~Gin();
    if (hasLsa_) lsaBarrier().~Lsa();
  }

  ncclBarrierSession(ncclBarrierSession const&) = delete;

  NCCL_DEVICE_INLINE ncclLsaBarrierSession<Coop>& lsaBarrier() { return *reinterpret_cast<Lsa*>(lsaMem_); }
  NCCL_DEVICE_INLINE ncclGinBarrierSession<Coop>& ginBarrier() { return *reinterpret_cast<Gin*>(ginMem_); }

  /* The LSA part (releasing only, when a GIN part follows), then the GIN part. */
  NCCL_DEVICE_INLINE void sync(Coop coop, cuda::memory_order order, ncclGinFenceLevel fence) {
    if (hasLsa_) lsaBarrier().sync(coop, hasGin_ ? uniccl::devapi::storeOrderOf(order) : order);
    if (hasGin_) ginBarrier().sync(coop, hasLsa_ ? uniccl::devapi::loadOrderOf(order) : order, fence);
  }

 private:
  typedef ncclLsaBarrierSession<Coop> Lsa;
  typedef ncclGinBarrierSession<Coop> Gin;
  bool hasLsa_, hasGin_;
  alignas(Lsa) unsigned char lsaMem_[sizeof(Lsa)];
  alignas(Gin) unsigned char ginMem_[sizeof(Gin)];
};
#endif /* UNICCL_DEVICE_API */

#endif /* UNICCL_NCCL_DEVICE_BARRIER_H */
