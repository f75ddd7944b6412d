/*
 * uniccl's Device API: LSA barriers. The requirement builder (host) says how
 * much resource-window memory nBarriers barriers over `team` need; a
 * session (device) is one group of threads of one rank using barrier
 * `index` over an LSA team:
 *
 *   ncclLsaBarrierSession<Coop> bar(coop, devComm, ncclTeamTagLsa(), index);
 *   ... stores to peers' windows ...
 *   bar.sync(coop, cuda::memory_order_release);   // or arrive(), then wait()
 *   ... loads of what peers stored before their arrive ...
 *
 * arrive(coop, order) tells every other team rank that this rank reached
 * the barrier; with a release order (release, acq_rel, seq_cst), the coop's
 * memory accesses before it are visible to peers whose wait returned.
 * wait(coop, order) returns once every other team rank arrived as often as
 * this one; with an acquire order (acquire, acq_rel, seq_cst) the coop then
 * sees what they published. sync = arrive + wait. The session's state (an
 * epoch: how many times this barrier completed) is read by the constructor
 * and written back by the destructor, so later sessions on the same barrier
 * (in this kernel or later ones) continue the count; every team rank must
 * run the same number of rounds on a barrier. One session per barrier index
 * at a time on a rank.
 *
 * The buffer is NCCL 2.28.9's layout (uint32 words from the handle's
 * buffer, which starts zeroed; nB = handle.nBarriers, n = team.nRanks):
 *   [nB + index]                 this rank's epoch of barrier `index`
 *   [3 nB + index n + r]         in rank `owner`'s buffer: the epoch rank r
 *                                last arrived at (written by r)
 * inside the nB * (3 + n) words ncclLsaBarrierCreateRequirement reserves
 * (words [0, nB) and [2 nB, 3 nB) are NCCL's multimem state, unused here).
 *
 * multimem=true is accepted and ignored: uniccl has no multicast objects,
 * and the unicast barrier is the same barrier (only slower on NVLink SHARP).
 */
#ifndef UNICCL_NCCL_DEVICE_LSA_BARRIER_H
#define UNICCL_NCCL_DEVICE_LSA_BARRIER_H
#include "core.h"
#include "coop.h"

NCCL_EXTERN_C __host__ ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                                    ncclLsaBarrierHandle_t* outHandle,
                                                                    ncclDevResourceRequirements_t* outReq);

#if UNICCL_DEVICE_API
template <typename Coop>
struct ncclLsaBarrierSession {
  NCCL_DEVICE_INLINE ncclLsaBarrierSession(Coop coop, ncclDevComm const& comm, ncclTeam team,
                                           ncclLsaBarrierHandle handle, uint32_t index, bool multimem = false,
                                           ncclMultimemHandle mmHandle = {})
      : coop_(coop), comm_(comm), team_(team), handle_(handle), index_((int)index) {
    (void)multimem;
    (void)mmHandle;
    epoch_ = *epochWord();
  }
  NCCL_DEVICE_INLINE ncclLsaBarrierSession(Coop coop, ncclDevComm const& comm, ncclTeamTagLsa, uint32_t index,
                                           bool multimem = false)
      : ncclLsaBarrierSession(coop, comm, ncclTeamLsa(comm), comm.lsaBarrier, index, multimem, comm.lsaMultimem) {}

  /* Persists the epoch for the next session on this barrier. */
  NCCL_DEVICE_INLINE ~ncclLsaBarrierSession() {
    if (coop_.thread_rank() == 0) *epochWord() = epoch_;
    coop_.sync();
  }

  ncclLsaBarrierSession(ncclLsaBarrierSession const&) = delete;

  NCCL_DEVICE_INLINE void arrive(Coop, cuda::memory_order order) {
    coop_.sync(); /* the whole group's accesses before this thread's posts */
    const uint32_t next = epoch_ + 1;
    for (int i = coop_.thread_rank(); i < team_.nRanks - 1; i += coop_.size()) {
      int peer = i < team_.rank ? i : i + 1;
      uniccl::devapi::store32(inbox(peer, team_.rank), next, order);
    }
  }

  NCCL_DEVICE_INLINE void wait(Coop, cuda::memory_order order) {
    const uint32_t want = epoch_ + 1;
    for (int i = coop_.thread_rank(); i < team_.nRanks - 1; i += coop_.size()) {
      int peer = i < team_.rank ? i : i + 1;
      /* Reached: the peer's count is at or past ours (modulo 2^32). */
      uniccl::devapi::spinLoad32(inbox(team_.rank, peer), order,
                                 [want](uint32_t got) { return got - want <= 0x7fffffffu; });
    }
    epoch_ = want;
    coop_.sync(); /* what the pollers acquired, for the whole group */
  }

  NCCL_DEVICE_INLINE void sync(Coop coop, cuda::memory_order order) {
    arrive(coop, order);
    wait(coop, order);
  }

 private:
  NCCL_DEVICE_INLINE uint32_t* epochWord() const {
    return (uint32_t*)ncclGetResourceBufferLocalPointer(comm_, handle_.bufHandle) + handle_.nBarriers + index_;
  }
  /* In team rank owner's buffer: the word team rank `from` arrives in. */
  NCCL_DEVICE_INLINE uint32_t* inbox(int owner, int from) const {
    return (uint32_t*)ncclGetResourceBufferPeerPointer(comm_, handle_.bufHandle, team_, owner) +
           3 * handle_.nBarriers + index_ * team_.nRanks + from;
  }

  Coop coop_;
  ncclDevComm const& comm_;
  ncclTeam team_;
  ncclLsaBarrierHandle handle_;
  int index_;
  uint32_t epoch_;
};
#endif /* UNICCL_DEVICE_API */

#endif /* UNICCL_NCCL_DEVICE_LSA_BARRIER_H */
