/*
 * uniccl's Device API: the LL (flag-in-data) all-to-all. The requirement
 * builders (host) size a resource buffer of nBlocks blocks of nSlots slots;
 * a session (device) is one group of threads of one rank using block
 * `block` with the peers of an LSA team:
 *
 *   ncclLLA2ASession<Coop> a2a(coop, devComm, team, handle, block, maxElts);
 *   a2a.send(peer, slot, value);        // into peer's slot `slot`
 *   T v = a2a.recv<T>(slot);            // waits for this epoch's value
 *   a2a.endEpoch(coop);                 // then the slots can be reused
 *
 * A slot is a 16-byte line {data, flag, data, flag}: 8 bytes of data, each
 * 4-byte half stamped with the epoch, so a receiver polls the data itself
 * (no fence, no counter) and sees a value whole even where 16-byte stores
 * are not atomic. A value of T takes ceil(sizeof(T) / 8) lines, pitch =
 * maxElts apart: slot s uses lines s, s + maxElts, ... (so nSlots must be
 * at least ncclLLA2ACalcSlots(maxElts, sizeof(T)); slots are not checked).
 * Senders pick distinct slots: the receiver's slots are not per sender.
 *
 * Epochs: consecutive epochs alternate between the block's two banks of
 * nSlots lines, so a peer may send the next epoch while this rank still
 * reads the current one. endEpoch(coop) ends one; before it, every thread
 * group must have sent at least once to every team rank and received at
 * least one value from each (that is what keeps a rank at most one epoch
 * ahead of its peers). Every team rank runs the same number of epochs on a
 * block; the destructor persists the count for later sessions.
 *
 * The buffer is NCCL 2.28.9's layout: per block, one 16-byte control line
 * (x: epoch - 2) and two banks of nSlots lines, inside the
 * nBlocks * (1 + 2 nSlots) * 16 bytes ncclLLA2ACreateRequirement reserves.
 * Flags 0 and 1 are never an epoch (the buffer starts zeroed); before the
 * 32-bit epoch wraps, each bank is cleared once.
 *
 * multimem=true is accepted and ignored (bcast then stores to each peer).
 */
#ifndef UNICCL_NCCL_DEVICE_LL_A2A_H
#define UNICCL_NCCL_DEVICE_LL_A2A_H
#include "core.h"
#include "coop.h"

/* Slots that hold maxElts elements of up to maxEltSize bytes (-1 on bad input). */
NCCL_EXTERN_C __host__ int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
NCCL_EXTERN_C __host__ ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                                               ncclDevResourceRequirements_t* outReq);

#if UNICCL_DEVICE_API
namespace uniccl {
namespace devapi {
template <typename T>
NCCL_HOST_DEVICE_INLINE T&& declval() noexcept; /* unevaluated contexts only */
/* 16-byte lines a value of T takes (8 bytes of data each). */
template <typename T>
struct LinesOf {
  static constexpr int value = (int)((sizeof(T) + 7) / 8);
};
}  // namespace devapi
}  // namespace uniccl

template <typename Coop>
struct ncclLLA2ASession {
  NCCL_DEVICE_INLINE ncclLLA2ASession(Coop coop, ncclDevComm const& comm, ncclTeam team, ncclLLA2AHandle handle,
                                      uint32_t block, int maxElts, bool multimem = false,
                                      ncclMultimemHandle mmHandle = {})
      : coop_(coop), comm_(comm), team_(team), handle_(handle), block_((int)block), pitch_(maxElts) {
    (void)multimem;
    (void)mmHandle;
    epoch_ = control()->data0 + 2;
    bank_ = bankOffset();
  }

  /* Persists the epoch for the next session on this block. */
  NCCL_DEVICE_INLINE ~ncclLLA2ASession() {
    if (coop_.thread_rank() == 0) control()->data0 = epoch_ - 2;
    coop_.sync();
  }

  ncclLLA2ASession(ncclLLA2ASession const&) = delete;

  /* Stores data into team rank peer's slot `slot` (this epoch). */
  template <typename T>
  NCCL_DEVICE_INLINE void send(int peer, int slot, T data) {
    uint32_t w[2 * Lines<T>::value];
    pack(data, w);
    Line* lines = linesOf(peer) + bank_ + slot;
    for (int u = 0; u < Lines<T>::value; u++)
      uniccl::devapi::storeLine(lines + u * pitch_, w[2 * u], w[2 * u + 1], epoch_);
  }

  /* send() to every team rank, this one included (each starting after
   * this rank, so that the ranks' stores spread over the peers). */
  template <typename T>
  NCCL_DEVICE_INLINE void bcast(int slot, T data) {
    uint32_t w[2 * Lines<T>::value];
    pack(data, w);
    int r = team_.rank;
    for (int i = 0; i < team_.nRanks; i++) {
      Line* lines = linesOf(r) + bank_ + slot;
      for (int u = 0; u < Lines<T>::value; u++)
        uniccl::devapi::storeLine(lines + u * pitch_, w[2 * u], w[2 * u + 1], epoch_);
      r = r + 1 == team_.nRanks ? 0 : r + 1;
    }
  }

  /* Waits for this epoch's value in this rank's slot `slot`. */
  template <typename T>
  NCCL_DEVICE_INLINE T recv(int slot) {
    T v[1];
    recvUnrolled<1, 1>(slot, 1, 0, v);
    return v[0];
  }

  /* vals[u] = the value in slot eltStart + u * eltStride, for u < eltCount
   * (at least MinEltCount, at most MaxEltCount: the unrolling bounds). */
  template <int MinEltCount, int MaxEltCount, typename T>
  NCCL_DEVICE_INLINE void recvUnrolled(int eltStart, int eltCount, int eltStride, T (&vals)[MaxEltCount]) {
    Line* mine = linesOf(team_.rank) + bank_ + eltStart;
    for (int u = 0; u < MaxEltCount; u++) {
      if (!(u < MinEltCount || u < eltCount)) break;
      uint32_t w[2 * Lines<T>::value];
      for (int l = 0; l < Lines<T>::value; l++) {
        Line* p = mine + u * eltStride + l * pitch_;
        uniccl::devapi::Line got = uniccl::devapi::loadLine(p);
        while (got.flag0 != epoch_ || got.flag1 != epoch_) {
          uniccl::devapi::pollPause();
          got = uniccl::devapi::loadLine(p);
        }
        w[2 * l] = got.data0;
        w[2 * l + 1] = got.data1;
      }
      __builtin_memcpy(&vals[u], w, sizeof(T));
    }
  }

  /* red(... red(eltToAcc(v0), eltToAcc(v1)) ..., eltToAcc(v_{n-1})) over
   * the eltCount values in slots eltStart + i * eltStride, received Unroll
   * at a time (eltCount 0: a value-initialized Acc). */
  template <int Unroll, typename Elt, typename EltToAcc, typename Reduce>
  NCCL_DEVICE_INLINE auto recvReduce(int eltStart, int eltCount, int eltStride, EltToAcc eltToAcc, Reduce red)
      -> decltype(eltToAcc(uniccl::devapi::declval<Elt>())) {
    using Acc = decltype(eltToAcc(uniccl::devapi::declval<Elt>()));
    Acc acc = Acc();
    for (int i = 0; i < eltCount; i += Unroll) {
      Elt got[Unroll];
      int n = eltCount - i < Unroll ? eltCount - i : Unroll;
      recvUnrolled<1, Unroll>(eltStart + i * eltStride, n, eltStride, got);
      for (int j = 0; j < n; j++) acc = i + j == 0 ? eltToAcc(got[0]) : red(acc, eltToAcc(got[j]));
    }
    return acc;
  }

  /* Ends this epoch (every thread of coop calls); see above. */
  NCCL_DEVICE_INLINE void endEpoch(Coop) {
    if (epoch_ >= 0xfffffffeu) {
      /* The last two epochs before the wrap: clear the bank just read, so
       * that no line of 2^32 epochs ago carries the flag of one to come.
       * Peers cannot store into it before this rank's next epoch's sends. */
      coop_.sync();
      Line* mine = linesOf(team_.rank) + bank_;
      for (int i = coop_.thread_rank(); i < (int)handle_.nSlots; i += coop_.size())
        uniccl::devapi::storeLine(mine + i, 0, 0, 0);
    }
    coop_.sync();
    epoch_ += epoch_ == 0xffffffffu ? 3 : 1; /* epochs skip 0 and 1 */
    bank_ = bankOffset();
  }

 private:
  typedef uniccl::devapi::Line Line;
  template <typename T>
  using Lines = uniccl::devapi::LinesOf<T>;
  template <typename T>
  static constexpr int kLines() {
    return (int)((sizeof(T) + 7) / 8);
  }
  template <typename T>
  NCCL_DEVICE_INLINE static void pack(T const& data, uint32_t* w) {
    for (int i = 0; i < 2 * Lines<T>::value; i++) w[i] = 0;
    __builtin_memcpy(w, &data, sizeof(T));
  }
  /* Team rank r's buffer, at this session's block. */
  NCCL_DEVICE_INLINE Line* linesOf(int r) const {
    return (Line*)ncclGetResourceBufferPeerPointer(comm_, handle_.bufHandle, team_, r) +
           (size_t)block_ * (1 + 2 * handle_.nSlots);
  }
  NCCL_DEVICE_INLINE Line* control() const { return linesOf(team_.rank); }
  NCCL_DEVICE_INLINE uint32_t bankOffset() const { return 1 + (epoch_ & 1) * handle_.nSlots; }

  Coop coop_;
  ncclDevComm const& comm_;
  ncclTeam team_;
  ncclLLA2AHandle handle_;
  int block_;
  int pitch_;
  uint32_t epoch_;
  uint32_t bank_; /* lines from the block's control line to this epoch's bank */
};
#endif /* UNICCL_DEVICE_API */

#endif /* UNICCL_NCCL_DEVICE_LL_A2A_H */
