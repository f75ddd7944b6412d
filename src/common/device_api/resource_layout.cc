#include "common/device_api/resource_layout.h"

#include "common/check.h"
#include "common/util/debug.h"

namespace uniccl {

namespace {

constexpr size_t kUnit = 128;   // bytes per ncclDevResourceHandle unit
constexpr int kMaxListLength = 1 << 16;   // a longer list is a cycle or garbage


bool isPow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace

ncclResult_t planResources(const ncclDevCommRequirements_t& reqs, int nRanks, int lsaSize, int lsaRank,
                           ResourceLayout* out) {
  if (reqs.lsaMultimem) {
    WARN("ncclDevCommCreate: lsaMultimem needs NVLink multicast, which uniccl does not use");
    return ncclInvalidUsage;
  }
  int n = 0;
  for (const ncclTeamRequirements_t* t = reqs.teamRequirementsList; t != nullptr; t = t->next) {
    if (++n > kMaxListLength) {
      WARN("ncclDevCommCreate: teamRequirementsList has more than %d entries (a cycle?)", kMaxListLength);
      return ncclInvalidArgument;
    }
    if (t->multimem) {
      WARN("ncclDevCommCreate: a team requirement asks for multimem, which needs NVLink multicast (not used by uniccl)");
      return ncclInvalidUsage;
    }
  }
  if (reqs.lsaBarrierCount < 0 || reqs.barrierCount < 0 || reqs.railGinBarrierCount < 0 || reqs.ginSignalCount < 0 ||
      reqs.ginCounterCount < 0) {
    WARN("ncclDevCommCreate: negative count in the requirements (barriers %d, LSA barriers %d, rail GIN barriers %d, "
         "GIN signals %d, counters %d)", reqs.barrierCount, reqs.lsaBarrierCount, reqs.railGinBarrierCount,
         reqs.ginSignalCount, reqs.ginCounterCount);
    return ncclInvalidArgument;
  }

  size_t used = 0;
  auto place = [&](size_t bytes, size_t align, ncclDevResourceHandle_t* handle) {
    const size_t a = align > kUnit ? align : kUnit;
    used = (used + a - 1) / a * a;
    *handle = (ncclDevResourceHandle_t)(used / kUnit);
    used += bytes;
  };
  const int lsaBarriers = reqs.lsaBarrierCount > reqs.barrierCount ? reqs.lsaBarrierCount : reqs.barrierCount;
  out->lsaBarrier = ncclLsaBarrierHandle_t{0, 0};
  if (lsaBarriers > 0) {
    ncclDevResourceRequirements_t r;
    ncclTeam_t lsa{lsaSize, lsaRank, 1};
    UCHECK(ncclLsaBarrierCreateRequirement(lsa, lsaBarriers, &out->lsaBarrier, &r));
    place(r.bufferSize, r.bufferAlign, &out->lsaBarrier.bufHandle);
  }
  out->placements.clear();
  out->ginSignals.clear();
  out->ginCounters.clear();
  // GIN ids: the requirements' own first (from 0), then the rail GIN
  // barriers' (a signal each), then each resource requirement's, in list
  // order (written through its out pointers).
  long long signals = reqs.ginSignalCount, counters = reqs.ginCounterCount;
  // Rail GIN barriers: asked for, and for world barriers (barrierCount) when
  // the world spans several LSA teams (the LSA barrier, then the rail's).
  // Per barrier a signal and 4 epoch words (one per GIN context), as
  // ncclGinBarrierCreateRequirement sizes them.
  int railBarriers = reqs.railGinBarrierCount;
  if (nRanks / lsaSize > 1 && reqs.barrierCount > railBarriers) railBarriers = reqs.barrierCount;
  out->railGinBarrier = ncclGinBarrierHandle_t{0, 0};
  if (railBarriers > 0) {
    place((size_t)railBarriers * NCCL_GIN_MAX_CONTEXTS * sizeof(uint32_t), alignof(uint32_t),
          &out->railGinBarrier.bufHandle);
    out->railGinBarrier.signal0 = (ncclGinSignal_t)signals;
    signals += railBarriers;
  }
  n = 0;
  for (const ncclDevResourceRequirements_t* r = reqs.resourceRequirementsList; r != nullptr; r = r->next) {
    if (++n > kMaxListLength) {
      WARN("ncclDevCommCreate: resourceRequirementsList has more than %d entries (a cycle?)", kMaxListLength);
      return ncclInvalidArgument;
    }
    if (r->ginSignalCount < 0 || r->ginCounterCount < 0) {
      WARN("ncclDevCommCreate: resource requirement %d asks for %d GIN signals and %d counters", n, r->ginSignalCount,
           r->ginCounterCount);
      return ncclInvalidArgument;
    }
    if (r->ginSignalCount > 0 && r->outGinSignalStart != nullptr)
      out->ginSignals.push_back(ResourceLayout::GinPlacement{r->outGinSignalStart, (uint32_t)signals});
    if (r->ginCounterCount > 0 && r->outGinCounterStart != nullptr)
      out->ginCounters.push_back(ResourceLayout::GinPlacement{r->outGinCounterStart, (uint32_t)counters});
    signals += r->ginSignalCount;
    counters += r->ginCounterCount;
    if (r->bufferAlign != 0 && !isPow2(r->bufferAlign)) {
      WARN("ncclDevCommCreate: resource requirement %d asks for alignment %zu (not a power of two)", n, r->bufferAlign);
      return ncclInvalidArgument;
    }
    if (r->bufferSize > (size_t(1) << 40)) {
      WARN("ncclDevCommCreate: resource requirement %d asks for %zu bytes", n, r->bufferSize);
      return ncclInvalidArgument;
    }
    ncclDevResourceHandle_t h = 0;
    place(r->bufferSize, r->bufferAlign, &h);
    if (r->outBufferHandle != nullptr) out->placements.push_back(ResourceLayout::Placement{r->outBufferHandle, h});
  }
  // Descriptors carry 16-bit signal and counter ids (NCCL's format).
  if (signals > 65535 || counters > 65535) {
    WARN("ncclDevCommCreate: %lld GIN signals and %lld counters asked for; at most 65535 of each", signals, counters);
    return ncclInvalidArgument;
  }
  out->ginSignalCount = (int)signals;
  out->ginCounterCount = (int)counters;
  // Rail barriers need GIN when the rail team has peers. With one LSA team
  // the rail is this rank alone: its barriers' sync is the group's, and
  // nothing of GIN is set up for them (PyTorch 2.11 asks for rail barriers
  // on every communicator; opening network links for them would tie every
  // single-node program to a working socket interface).
  const bool railOfOne = nRanks / lsaSize == 1;
  out->gin = reqs.ginForceEnable || counters > 0 || signals - (railOfOne ? railBarriers : 0) > 0;
  out->bytes = (used + 4095) / 4096 * 4096;
  if (out->bytes == 0) out->bytes = 4096;
  return ncclSuccess;
}

}  // namespace uniccl
