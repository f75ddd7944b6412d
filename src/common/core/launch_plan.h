// What the end of a group launches for one communicator, decided once (as
// NCCL's kernel plan): the planner and the tuning fill it, and the launch,
// the watchdog, the profiler and the side-stream code (copy engines, side
// kernels) read it instead of passing facts through the communicator. It
// is a part of the group's plan value (CommPlan, core/comm_plan.h), which
// the group end passes from step to step; its vectors keep their capacity
// across groups so steady-state launches do not allocate.
//
// Life of a plan, per group end (core/group.cc):
//   GroupPlan               the communicators of the group, each with the tasks it
//                           recorded (core/comm_plan.h)
//   checkTaskStreams        capture state of the group's streams (captureKnown, capture)
//   planSideStreams         (tuning.h) which tasks leave the kernels for the side
//                           stream and the copies they become (CommPlan::side); the
//                           group's side-stream code queues those copies (side_stream.h)
//   connections             the peers the kernels need (CommPlan::newPeers)
//   planTasks               one-rank copies, or planWorks: works (of the tasks
//                           side.paths keep on the kernels), their tasks'
//                           sequence numbers and indices, kernel launches
//   (observer)              the profiler's Coll/P2p events, described from the plan
//   launchPlan              collectStreams (the launch stream, the others
//                           ordered before it), then launchWorks(k) for each
//                           launch: arguments or FIFO, watchdog descriptor, done event
//   joinSideStreams         the copies after the kernels, then the joins, once
//                           every communicator of the group launched
//   ~GroupPlan              the storage goes back to the communicators, cleared
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/gpu.h"
#include "device/dev_types.h"

namespace uniccl {

struct CommPlan;   // core/comm_plan.h

struct LaunchStreams {
  gpu::Stream launch = nullptr;     // kernels go here (the group's first stream)
  gpu::CaptureInfo capture{};       // of `launch`; the planner checked the others agree
  bool captured = false;
};

// A work item that must begin a kernel launch (each round of a PAT
// collective: core/allgather_pat.h, core/reducescatter_pat.h), and what
// kernel its launch needs.
struct LaunchStart {
  uint32_t work = 0;
  // -1: any (the p2p kernel after the collectives). A datatype
  // (ncclDataType_t): that datatype's Simple collective kernel, the only
  // one that runs p2p items whose receive reduces (device/p2p_reduce.h).
  int reduceType = -1;
};

// One kernel launch: a range of the plan's works and the kernel that runs them.
struct KernelLaunch {
  uint32_t firstWork = 0;
  uint32_t nWorks = 0;
  const void* kernel = nullptr;
  unsigned grid = 0;                // blocks: the highest channel of its works + 1
};

// Where one task of the group runs (SidePlan::collPath / p2pPath). Tuning
// decides (planSideStreams, core/tuning.h); the planner plans works for
// Kernels and ReduceScatterThenCopy only.
enum class TaskPath : uint8_t {
  Kernels,                // the group's kernels (every task unless tuning says otherwise)
  CopyEngine,             // one peer copy and no kernel: a send/recv pair, a 2-rank Broadcast
  SelfCopyKernel,         // a kernel of its own on the side stream: a large message to itself
  ReduceScatterThenCopy,  // a 2-rank AllReduce: the kernels reduce-scatter, copy engines
                          // move each reduced half across after them
};

// What one side-stream copy moves; each names the file that makes it.
enum class SideWhat : uint8_t {
  SendRecv,        // a send's buffer into its recv's buffer (core/ce_sendrecv.h)
  Broadcast,       // the root's send buffer into the other rank's receive buffer (core/ce_broadcast.h)
  BroadcastLocal,  // the root's own out-of-place copy (core/ce_broadcast.h)
  AllReduceHalf,   // a rank's reduced half into the other rank's receive buffer (core/allreduce_ce_split.h)
  SelfCopy,        // a message to itself, by a kernel of `blocks` blocks (core/self_copy_kernel.h)
};

// When it runs, relative to the group's kernels.
enum class SideWhen : uint8_t {
  WithKernels,    // once the streams of `from` and `to` reached the group (entry
                  // events): overlaps the group's kernels
  AfterKernels,   // once both ranks' kernels of the group ended (an event behind them)
};

// On which stream `from` queues it.
enum class SideOn : uint8_t {
  SideStream,     // `from`'s side stream (SideStreams::stream); the task streams join it
  TaskStream,     // `from`'s task stream (SidePlan::stream), before its kernels
};

struct SideCopy {
  SideWhat what;
  SideWhen when;
  SideOn on;
  CommPlan* from;       // the rank that queues it and whose buffer it reads
  CommPlan* to;         // the rank whose buffer it writes (== from: a copy within one rank)
  const void* src;
  void* dst;
  size_t bytes;
  unsigned blocks = 0;  // SelfCopy: the grid of its kernel (UNICCL_SELF_COPY_BLOCKS)
};

// What the group runs outside the communicator's kernels (docs/architecture.md,
// "Side streams and copy engines"). Empty unless planSideStreams chose
// something. Read until the group's side-stream join, after every
// communicator of the group launched (the copies after the kernels need
// both ranks' kernels queued).
struct SidePlan {
  // The rank's one task stream in this group: side work forks from it
  // (entry event) and it joins the side stream (exit event).
  gpu::Stream stream = nullptr;
  // [i]: where the plan's tasks.colls[i] / .p2p[i] runs; empty: all on the kernels.
  std::vector<TaskPath> collPath;
  std::vector<TaskPath> p2pPath;
  // Every copy this rank queues (from) or receives (to).
  std::vector<SideCopy> copies;

  bool empty() const { return copies.empty(); }
  TaskPath collPathOf(size_t i) const { return collPath.empty() ? TaskPath::Kernels : collPath[i]; }
  TaskPath p2pPathOf(size_t i) const { return p2pPath.empty() ? TaskPath::Kernels : p2pPath[i]; }
  // A kernel forked onto the side stream (a message to itself): the
  // group's first kernel then launches plainly (no programmatic launch),
  // so that both start together instead of the group's kernel taking the
  // SMs first.
  bool forksKernel() const {
    for (const SideCopy& x : copies)
      if (x.what == SideWhat::SelfCopy) return true;
    return false;
  }
  // The tuning's scratch (written before it is read): the rank's sends to
  // and recvs from itself, paired.
  std::vector<size_t> selfSends, selfRecvs;
  // Bookkeeping of the group's side-stream steps (core/side_stream.cc).
  bool ceMatched = false;   // matched for copy engines: leaves the path with its partners when a copy fails
  bool exited = false;      // its side stream recorded its exit event in this group

  void clear() {
    stream = nullptr;
    collPath.clear();
    p2pPath.clear();
    copies.clear();
    ceMatched = false;
    exited = false;
  }
};

struct LaunchPlan {
  // A communicator of one rank whose tasks are all copies (core/one_rank.h):
  // no works, no kernel; the copies go on the launch stream.
  bool oneRankCopies = false;
  // Work items: the collectives in task order, then the p2p rounds.
  std::vector<dev::Work> works;
  // Per work item: the communicator-wide sequence number of its task (the
  // watchdog's descriptor names it) and the task's index in the group,
  // collectives first, then p2p tasks (the profiler's events).
  std::vector<uint64_t> workSeq;
  std::vector<int> workTask;
  size_t nColl = 0;                 // works[0, nColl) are collectives
  // Works that must begin a new kernel launch (ascending): each round of a
  // PAT AllGather or ReduceScatter.
  std::vector<LaunchStart> launchStarts;
  // A PAT ReduceScatter of this group keeps partial sums in the
  // communicator's eager scratch (core/pat_scratch.h): the launch marks
  // where it is free again.
  bool usesPatScratch = false;
  std::vector<KernelLaunch> launches;
  std::vector<int> p2pRounds;       // the planner's scratch (written before it is read): rounds that carry messages

  // Capture state of the group's first stream, once the group end asked
  // (checkTaskStreams): later steps do not ask the runtime again.
  bool captureKnown = false;
  gpu::CaptureInfo capture{};
  LaunchStreams streams;            // collectStreams()
  std::vector<gpu::Stream> otherStreams;   // the group's streams besides streams.launch

  // Clears what one group decided for the launch; capacity stays.
  void clear() {
    oneRankCopies = false;
    works.clear();
    workSeq.clear();
    workTask.clear();
    nColl = 0;
    launchStarts.clear();
    usesPatScratch = false;
    launches.clear();
    captureKnown = false;
    capture = gpu::CaptureInfo{};
    streams = LaunchStreams{};
    otherStreams.clear();
  }
};

}  // namespace uniccl
