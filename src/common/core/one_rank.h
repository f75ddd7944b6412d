// Communicators of one rank (split groups of one, single-GPU runs of
// distributed code, PyTorch world size 1): every collective and every
// message to itself is a copy from the send buffer to the receive buffer,
// or nothing at all when they are the same buffer. Such a group needs no
// kernel: the copies go to the GPU's copy path as stream-ordered
// device-to-device copies (gpu::memcpyAsync) on the group's launch stream,
// in place costs no GPU work at all (in graph capture as well: a captured
// copy is a memcpy node, in place captures nothing).
//
// Not copies, and left to the kernels: reductions with an
// ncclRedOpCreatePreMulSum op (they scale by the user's scalar even on one
// rank; ncclAvg over one rank is a copy). A group with any of them keeps
// all of its tasks on the kernels, so the order of its tasks on the stream
// stays what the kernels give.
#pragma once

#include <cstdint>

#include "uniccl.h"

namespace uniccl {

struct CommPlan;

// Whether the plan's communicator has one rank and none of its tasks in
// this group needs a kernel (the planner's choice:
// LaunchPlan::oneRankCopies). A send to itself without a recv of the same
// size stays with the kernels' planner, which reports it.
bool oneRankNeedsNoKernel(const CommPlan& p);
// Queues the tasks' copies (when oneRankNeedsNoKernel(p)).
[[nodiscard]] ncclResult_t launchOneRank(CommPlan& p);

// Copies this process queued for communicators of one rank (tests, logs).
uint64_t oneRankCopies();

}  // namespace uniccl
