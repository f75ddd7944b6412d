// Copy-engine transfers between GPUs driven by one thread.
//
// When one group holds both ends of a large transfer between ranks of the
// same communicator (as a single process driving several GPUs does), the
// bytes need no kernel: a peer copy moves them from the source rank's buffer
// straight into the destination rank's buffer with a copy engine (about 392
// GB/s each way on H200 NV18, where SM stores reach about 365; no staging
// slot, no SM time; docs/performance.md). Three kinds of tasks go this way:
//   - a send on rank a to b with the matching recv on b from a (NCCL's
//     order: the k-th send from a to b meets the k-th recv at b from a),
//     when a sends to no other rank and b receives from no other rank in
//     the group (fan-out and fan-in, as AlltoAll on 4+ ranks, stay with the
//     kernels, which move all peers' parts at once; a rank's message to
//     itself too: measured faster by the kernels);
//   - a Broadcast of a 2-rank communicator whose two ranks are both in the
//     group (with more ranks the root's links would carry every copy: the
//     ring stays better);
//   - the all-gather half of a 2-rank AllReduce with an even count (both
//     ranks in the group): the kernels run a ReduceScatter, then each rank's
//     reduced half is copied into the other's receive buffer.
// And one transfer that needs no peer in the group and no copy engine: a
// rank's large message to itself (AlltoAll's own block), when the kernels
// also move other data in the group (AlltoAll whose remote parts stay with
// the kernels: in graph capture, one process per GPU, fan-out on 4+ ranks).
// The group's kernel would copy it before the remote parts in every block,
// one after the other; a kernel of UNICCL_SELF_COPY_BLOCKS blocks (default
// 64) on the side stream copies it on other SMs meanwhile (a copy engine
// moves only about 280 GB/s within an H200's memory, less than the kernels
// send to the peer: measured slower). This also runs under graph capture:
// the side stream forks from and joins the captured stream inside the same
// graph. A self message alone stays with the group's kernel.
// Each communicator counts the messages and collectives it ever posted; a
// transfer is taken only when the counts of its ranks agree before the group,
// so the k-th task of the group on one rank meets the k-th on the other.
//
// Stream order: each involved communicator has a side stream. The copies run
// there after both ranks' streams reached the group (events), overlapping
// the group's kernels (AlltoAll's local part, other collectives); the
// AllReduce halves instead wait for both ranks' kernels (an event recorded
// behind them). After the kernels are queued, both ranks' streams wait for
// the copies.
//
// UNICCL_COPY_ENGINE (default 1) turns the path on, UNICCL_COPY_ENGINE_MIN_BYTES
// (default 8 MiB) is the smallest transfer it takes,
// UNICCL_COPY_ENGINE_ALLREDUCE_MIN_BYTES (default 512 MiB) the smallest
// AllReduce; UNICCL_SELF_COPY_BLOCKS (64; 0: off), UNICCL_SELF_COPY_MIN_BYTES
// (8 MiB) and UNICCL_SELF_COPY_GRAPH_MIN_BYTES (64 KiB, in graph capture)
// shape the self copies. Tasks over other
// transports, on capturing streams (copies cannot join two graphs; messages
// to itself excepted), of communicators with a profiler plugin or with
// several streams in the group, and sends whose two ends differ in size stay
// with the group's kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "common/core/group.h"
#include "common/gpu.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

// One thread's copy-engine part of the group being launched.
class CopyEngineGroup {
 public:
  // Takes the transfers copy engines can move out of the communicators'
  // task lists, queues their copies, and counts every task of the group.
  // Called once per group, before the kernels.
  ncclResult_t start(std::vector<ncclComm*>& comms, const UseDevice& useDevice);
  // After the group's kernels are queued (launched: all of them were):
  // queues the copies that follow the kernels, then the ranks' streams wait
  // for the copies. Also after a failed launch (the copies before the
  // kernels are queued already).
  ncclResult_t join(const UseDevice& useDevice, bool launched);

 private:
  struct Side {
    ncclComm* comm;
    gpu::Stream stream;   // the one stream of the comm's tasks in this group
  };
  struct Copy {
    ncclComm* from;
    ncclComm* to;
    const void* src;
    void* dst;
    size_t bytes;
  };
  void findMessages();
  // Calls fn(ia, ib, k, taskA, taskB) for the k-th collective of each
  // 2-rank communicator with both ranks in the group (ia: rank 0's side, ib:
  // rank 1's) whose counts of posted collectives agree.
  template <typename PairFn>
  void forEachPairedCollective(PairFn&& fn);
  void findBroadcasts();
  void findAllReduces();
  ncclResult_t issue(const UseDevice& useDevice);
  ncclResult_t issueAfterKernels(const UseDevice& useDevice);
  // Records each involved side's `event` on its stream (creating the side
  // stream and events first).
  template <typename Involved>
  ncclResult_t markStreams(const UseDevice& useDevice, Involved&& involved, gpu::Event ncclComm::*event);
  // One of `copies` goes from or to c.
  static bool touches(const std::vector<Copy>& copies, const ncclComm* c);
  // A copy from `from` to `to` (nullptr: to anyone) is queued in this group.
  bool hasCopy(const ncclComm* from, const ncclComm* to) const;
  void removeTaken();
  const Side* sideOf(const ncclComm* c) const;
  // Takes each comm's large messages to itself off its task list when its
  // kernels have other work, and launches their copy on its side stream
  // (after the peer transfers are settled: a comm with those keeps its self
  // messages).
  ncclResult_t startSelfCopies(std::vector<ncclComm*>& comms, const UseDevice& useDevice);
  ncclResult_t takeSelfCopies(ncclComm* c, gpu::Stream stream, const UseDevice& useDevice);

  std::vector<Side> sides_;
  std::vector<Copy> copies_;       // over NVLink, on the `from` side stream
  std::vector<Copy> localCopies_;  // root's own out-of-place Broadcast, on its stream
  std::vector<Copy> afterCopies_;  // AllReduce halves, on the `from` side stream after the kernels
  std::vector<Side> selfSides_;    // comms whose side streams copy their messages to themselves
  std::vector<size_t> selfSends_, selfRecvs_;   // scratch: indices of one comm's self messages
  std::vector<bool> selfTaken_;                 // scratch: [task] of that comm, copied by its side stream
  std::vector<std::vector<bool>> takenColls_, takenP2p_;   // [side][task]
};

// The calling thread's instance (its vectors keep their capacity).
CopyEngineGroup& copyEngineGroup();

// Counts the tasks of a communicator launched without a group (a group of
// one), so later groups still match tasks by their order.
void countPostedTasks(ncclComm* comm);

// After a failed group the counts may no longer agree between ranks: the
// communicator leaves the copy-engine path for good.
void disableCopyEngine(ncclComm* comm);

// Transfers this process moved by copy engine so far (tests, logs).
uint64_t copyEngineTransfers();

// Messages to itself this process copied with a side-stream kernel so far.
uint64_t selfCopyLaunches();

}  // namespace uniccl
