// The communicator lifecycle steps shared by the init entry points
// (init.cc) and the calls that derive or stop communicators
// (fault_tolerance.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/core/config.h"
#include "uniccl.h"

struct ncclComm;

namespace uniccl {

// The whole initialization of one rank on GPU `gpuDev`; records the outcome
// in the comm. The ranks meet at the roots of `ids` (one id, or the several
// of ncclCommInitRankScalable: common/bootstrap/bootstrap.h).
[[nodiscard]] ncclResult_t commInitRank(ncclComm* comm, int nranks, const std::vector<ncclUniqueId>& ids, int rank, int gpuDev);
// Releases everything the communicator owns; with `abort`, in-flight kernels
// are told to stop first instead of being waited for.
void commFree(ncclComm* comm, bool abort);
// A fresh unique id with its own bootstrap root (never NCCL_COMM_ID's).
[[nodiscard]] ncclResult_t freshUniqueId(ncclUniqueId* out);
// A communicator object with `config` (nullptr: `inherit` plus the environment).
[[nodiscard]] ncclResult_t newComm(const ncclConfig_t* config, const CommConfig* inherit, ncclComm** out);
// Initializes `child` as the rank of parent's rank among `members` (parent
// ranks in the child's rank order; the parent's rank must be one): the
// first member makes a fresh unique id and sends it to the others over the
// parent's bootstrap under `tag`. On failure the child is marked failed.
[[nodiscard]] ncclResult_t initChildComm(ncclComm* parent, ncclComm* child, const std::vector<int>& members, uint32_t tag);
// Runs `job` now, or at ncclGroupEnd inside a group; on an immediate failure
// frees `child` and clears *newcomm (split, shrink).
[[nodiscard]] ncclResult_t runDerivation(std::function<ncclResult_t()> job, ncclComm* child, ncclComm** newcomm);

}  // namespace uniccl
