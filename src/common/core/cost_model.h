// Time estimates for ncclGroupSimulateEnd: a latency-bandwidth model of
// each operation, taken from the tuning's own choice (algorithm, protocol,
// channels) and the transport that carries it.
//
// An operation costs the hops its algorithm waits through (ring: 2(n-1) for
// AllReduce, n-1 for the others; tree: twice its depth; point-to-point: one)
// times the protocol's per-hop latency on that transport, plus the bytes
// each rank moves (the bus bytes nccl-tests counts) at the bandwidth its
// channel count reaches on that transport. A group costs one launch plus,
// per communicator, its collectives one after the other and its
// point-to-point messages in parallel (the slowest peer); communicators of
// one group run at the same time, so the group takes its slowest one.
//
// The topology (topo/cost.h) decides the figures: across hosts the whole
// estimate is its model (network hops and NICs per host, each host's chain
// and the tree's levels); inside one host, P2P over PCIe or a direct-link
// mesh takes its link class's figures (UNICCL_LINK_COSTS).
//
// The other constants are figures measured on H200s (docs/performance-history.md: NVLink
// P2P, SHM, sockets over loopback); other machines differ, which is why the
// result is an estimate, as NCCL's is.
#pragma once

#include <cstddef>
#include <vector>

#include "common/core/tasks.h"

struct ncclComm;

namespace uniccl {

// Microseconds one collective of `bytes` (the whole buffer a rank ends up
// with, as the tuning sees it) takes on comm, launch excluded.
double estimateCollectiveUs(const ncclComm* comm, TaskKind kind, size_t bytes);
// Microseconds one message of `bytes` between comm's rank and `peer` takes.
double estimateP2pUs(const ncclComm* comm, int peer, size_t bytes);
// Microseconds the open group's tasks of these communicators take,
// launch included; 0 when they hold no task.
double estimateGroupUs(const std::vector<ncclComm*>& comms);

}  // namespace uniccl
