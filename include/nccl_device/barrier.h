/*
 * uniccl's Device API: ncclBarrierSession, NCCL's barrier over an inner
 * (LSA) and an outer (GIN, the network) team. uniccl has the LSA part only:
 *
 *   ncclBarrierSession<Coop> bar(coop, ncclTeamTagLsa(), devComm, index);
 *   bar.sync(coop, cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
 *
 * is devComm.lsaBarrier's barrier `index` over the LSA team (lsa_barrier.h
 * has the semantics); lsaBarrier() is that session. The constructors that
 * take an ncclGin (the world and rail teams, and the full inner + outer
 * form) and ginBarrier() are not declared: this version has GIN puts and
 * signals (gin.h) but no GIN barrier.
 */
#ifndef UNICCL_NCCL_DEVICE_BARRIER_H
#define UNICCL_NCCL_DEVICE_BARRIER_H
#include "core.h"
#include "coop.h"
#include "gin_barrier.h"
#include "lsa_barrier.h"

#if UNICCL_DEVICE_API
template <typename Coop>
struct ncclBarrierSession {
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagLsa tag, ncclDevComm const& comm, uint32_t index,
                                        bool multimem = false)
      : lsa_(coop, comm, tag, index, multimem) {}

  ncclBarrierSession(ncclBarrierSession const&) = delete;

  NCCL_DEVICE_INLINE ncclLsaBarrierSession<Coop>& lsaBarrier() { return lsa_; }

  /* The fence level is the GIN part's (there is none). */
  NCCL_DEVICE_INLINE void sync(Coop coop, cuda::memory_order order, ncclGinFenceLevel) { lsa_.sync(coop, order); }

 private:
  ncclLsaBarrierSession<Coop> lsa_;
};
#endif /* UNICCL_DEVICE_API */

#endif /* UNICCL_NCCL_DEVICE_BARRIER_H */
