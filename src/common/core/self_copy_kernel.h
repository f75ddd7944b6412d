// A rank's large message to itself (AlltoAll's own block) copied by a
// kernel of its own on the communicator's side stream (core/side_stream.h)
// while the group's kernel moves the rest. This is no copy engine: a copy
// engine moves only about 280 GB/s within an H200's memory, less than the
// kernels send to a peer (measured slower). The group's kernel would copy
// the message before its remote parts in every block, one after the other;
// the side kernel copies it on other SMs meanwhile.
//
// The side kernel is the p2p kernel with one local-copy work item in its
// arguments: no connection and no peer, it waits for nothing, so it always
// ends (the watchdog needs no progress words from it, and blocks of the
// group's kernel that find no free SM start when its blocks finish). Its
// fork and join are events, so the same shape is legal inside a graph
// capture (a fork and a join within one graph).
//
// Whether a message goes so is tuning's choice (planSideStreams,
// core/tuning.h: UNICCL_SELF_COPY_BLOCKS, UNICCL_SELF_COPY_MIN_BYTES,
// UNICCL_SELF_COPY_GRAPH_MIN_BYTES; only when the group's kernel has other
// work); the plan records the copy with its block count and both tasks'
// path (TaskPath::SelfCopyKernel), and the launch reads
// SidePlan::forksKernel() to launch the group's kernel plainly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/gpu.h"
#include "uniccl.h"

namespace uniccl {

struct CommPlan;
struct SideCopy;

// Records the plan's send to itself p2p[sendIndex] and its recv
// p2p[recvIndex] as one copy by a side kernel of `blocks` blocks.
void planSelfCopy(CommPlan& p, size_t sendIndex, size_t recvIndex, unsigned blocks);

// Launches the copy's kernel (x.blocks blocks) on `stream`, with the
// device handles of the plan's communicator.
[[nodiscard]] ncclResult_t launchSelfCopyKernel(const CommPlan& p, const SideCopy& x, gpu::Stream stream);

// Messages to itself this process copied with a side-stream kernel so far.
uint64_t selfCopyLaunches();

}  // namespace uniccl
