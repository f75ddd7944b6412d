// Where a device communicator's resources go in its resource window: the
// LSA barriers the requirements ask for, then every buffer of the
// resource-requirements list, each at a 128-byte unit (ncclDevResourceHandle)
// aligned to what it asks. Pure: ncclDevCommCreate allocates and publishes.
// What uniccl cannot provide (multimem) is refused here with the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "nccl_device.h"

namespace uniccl {

struct ResourceLayout {
  size_t bytes = 0;                          // the resource window's size (>= 4096)
  ncclLsaBarrierHandle_t lsaBarrier{};       // devComm.lsaBarrier
  ncclGinBarrierHandle_t railGinBarrier{};   // devComm.railGinBarrier (GIN barriers over the rail team)
  struct Placement {
    ncclDevResourceHandle_t* out;            // where the handle is written on success
    ncclDevResourceHandle_t handle;
  };
  std::vector<Placement> placements;
  // GIN: whether a GIN state is needed, the signals and counters per
  // context, and where resource requirements' first ids are written.
  bool gin = false;
  int ginSignalCount = 0, ginCounterCount = 0;
  struct GinPlacement {
    uint32_t* out;
    uint32_t first;
  };
  std::vector<GinPlacement> ginSignals, ginCounters;
};

// nRanks/lsaSize: the communicator's; lsaRank: this rank's place in its team.
// ncclInvalidUsage (with the WARN) for multimem requests,
// ncclInvalidArgument for malformed requirements.
[[nodiscard]] ncclResult_t planResources(const ncclDevCommRequirements_t& reqs, int nRanks, int lsaSize, int lsaRank,
                           ResourceLayout* out);

}  // namespace uniccl
