/*
 * uniccl's Device API: GIN (GPU-initiated network) barriers. The requirement
 * builder says how many GIN signals and bytes nBarriers barriers over `team`
 * need (NCCL 2.28.9's sizes: a signal per barrier, four epoch words per
 * barrier, one per GIN context); ncclGinBarrierSession is the barrier.
 *
 * As NCCL 2.28.9: sync() has the group's threads signal (SignalInc on the
 * barrier's signal) every other rank of the team through the GIN context,
 * then thread 0 waits until the signal reached epoch + nRanks - 1 (32-bit
 * rolling comparison); the epoch lives in the barrier's resource buffer word
 * [index * 4 + context] and is persisted by the destructor. A signal is
 * applied after the earlier puts of that context to that peer landed, so a
 * rank that passed the barrier sees what its team peers put to it before
 * they arrived. The wait ends early when the communicator is aborted (gin.h).
 * A team of one rank has nothing to wait for: sync() is the group's sync.
 * Each barrier index and context is used by one group per rank at a time,
 * and every rank of the team runs the same number of rounds.
 */
#ifndef UNICCL_NCCL_DEVICE_GIN_BARRIER_H
#define UNICCL_NCCL_DEVICE_GIN_BARRIER_H
#include "core.h"
#include "gin.h"

NCCL_EXTERN_C __host__ ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                                                    ncclGinBarrierHandle_t* outHandle,
                                                                    ncclDevResourceRequirements_t* outReq);

#if UNICCL_DEVICE_API
enum class ncclGinFenceLevel { Relaxed };

template <typename Coop>
struct ncclGinBarrierSession {
  /* Barrier `index` of handle's barriers over team (a team this rank is in). */
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGin gin, ncclTeam team, ncclGinBarrierHandle handle,
                                           uint32_t index)
      : coop(coop), net(gin), team(team), handle(handle), index((int)index) {
    epoch = *epochWord();
    signal = handle.signal0 + index;
  }
  /* The device communicator's rail barriers (railGinBarrierCount). */
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGin gin, ncclTeamTagRail, uint32_t index)
      : ncclGinBarrierSession(coop, gin, ncclTeamRail(gin.comm), gin.comm.railGinBarrier, index) {}
  NCCL_DEVICE_INLINE ~ncclGinBarrierSession() {
    if (coop.thread_rank() == 0) *epochWord() = epoch;
    coop.sync();
  }
  ncclGinBarrierSession(ncclGinBarrierSession const&) = delete;

  NCCL_DEVICE_INLINE void sync(Coop, cuda::memory_order order, ncclGinFenceLevel) {
    coop.sync();
    /* A team of one (the rail of a communicator that is one LSA team, where
     * uniccl sets up no GIN for rail barriers): nobody to wait for. */
    if (team.nRanks == 1) return;
    for (int i = coop.thread_rank(); i < team.nRanks - 1; i += coop.size()) {
      int peer = team.rank + 1 + i;
      if (peer >= team.nRanks) peer -= team.nRanks;
      net.signal(team, peer, ncclGin_SignalInc{signal}, ncclCoopThread());
    }
    epoch += (uint32_t)(team.nRanks - 1);
    if (coop.thread_rank() == 0) net.waitSignal(ncclCoopThread(), signal, epoch, 32, order);
    coop.sync();
  }

  /* NCCL's member names (ncclGinBarrierSession_internal). */
  Coop coop;
  ncclGin net;
  ncclTeam team;
  ncclGinBarrierHandle handle;
  int index;
  uint32_t epoch;
  ncclGinSignal_t signal;

 private:
  NCCL_DEVICE_INLINE uint32_t* epochWord() const {
    return (uint32_t*)ncclGetResourceBufferLocalPointer(net.comm, handle.bufHandle) + index * NCCL_GIN_MAX_CONTEXTS +
           net.contextId;
  }
};
#endif

#endif /* UNICCL_NCCL_DEVICE_GIN_BARRIER_H */
