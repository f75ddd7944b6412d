#include "common/core/gpu_sharing.h"

#include <algorithm>
#include <climits>
#include <map>
#include <string>
#include <utility>

#include "common/check.h"
#include "common/core/comm_plan.h"
#include "common/gpu.h"
#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl {

namespace {

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

// Why the ranks of one GPU cannot share it, or an empty string.
std::string refusal(const std::vector<PeerInfo>& peers, const std::vector<int>& group) {
  const int k = (int)group.size();
  const PeerInfo& gpu = peers[group[0]];
  char buf[512];
  for (int r : group) {
    if (peers[r].shareLimit < k) {
      snprintf(buf, sizeof(buf),
               "Duplicate GPU detected: ranks %s all use GPU %s, and rank %d accepts %d rank(s) per GPU; give each "
               "rank its own GPU, or opt in on every rank with UNICCL_RANKS_PER_GPU=%d or ncclCommInitRankMulti",
               rankList(group).c_str(), gpu.busId, r, peers[r].shareLimit, k);
      return buf;
    }
  }
  for (size_t i = 0; i < group.size(); i++)
    for (size_t j = i + 1; j < group.size(); j++) {
      const PeerInfo &a = peers[group[i]], &b = peers[group[j]];
      if (a.virtualId >= 0 && a.virtualId == b.virtualId) {
        snprintf(buf, sizeof(buf), "ranks %d and %d share GPU %s with the same virtualId %d (ncclCommInitRankMulti "
                 "needs a different one per rank of a GPU)", group[i], group[j], gpu.busId, a.virtualId);
        return buf;
      }
    }
  std::map<uint64_t, std::vector<int>> byProcess;
  for (int r : group) byProcess[peers[r].processHash].push_back(r);
  if (byProcess.size() > 1) {
    for (int r : group) {
      if (!peers[r].processesShare) {
        snprintf(buf, sizeof(buf),
                 "ranks %s of %zu processes share GPU %s, and rank %d's process sees no MPS server: kernels of "
                 "different processes do not run at the same time on a GPU without MPS (the ranks would wait "
                 "for each other forever); start nvidia-cuda-mps-control, or keep a GPU's ranks in one process",
                 rankList(group).c_str(), byProcess.size(), gpu.busId, r);
        return buf;
      }
    }
  }
  for (const auto& [process, ranks] : byProcess) {
    const int queues = peers[ranks[0]].workQueues;
    if ((int)ranks.size() > queues) {
      snprintf(buf, sizeof(buf),
               "ranks %s of one process share GPU %s, more than the process's %d host-to-GPU work queues: a "
               "kernel queued behind another rank's waiting kernel never starts; raise the queue count "
               "(CUDA_DEVICE_MAX_CONNECTIONS on CUDA, GPU_MAX_HW_QUEUES on HIP, before the first GPU call) "
               "to at least %zu",
               rankList(ranks).c_str(), gpu.busId, queues, ranks.size());
      return buf;
    }
  }
  return "";
}

}  // namespace

ncclResult_t fillSharingInfo(const std::vector<const void*>& kernels, unsigned blockThreads, int virtualId,
                             PeerInfo* info) {
  int resident = INT_MAX;
  for (const void* k : kernels) {
    int n = 0;
    UCHECK(gpu::kernelResidentBlocks(k, blockThreads, &n));
    resident = std::min(resident, n);
  }
  info->residentBlocks = kernels.empty() ? 0 : resident;
  info->virtualId = virtualId;
  info->shareLimit = virtualId >= 0 ? INT_MAX : (int32_t)std::max<int64_t>(1, knobInt(Knob::UNICCL_RANKS_PER_GPU));
  info->workQueues = gpu::workQueues().count;
  bool concurrent = false;
  const char* how = "";
  UCHECK(gpu::processesShareDevice(&concurrent, &how));
  info->processesShare = concurrent ? 1 : 0;
  return ncclSuccess;
}

ncclResult_t checkGpuSharing(const std::vector<PeerInfo>& peers, int myRank, GpuSharing* out) {
  std::map<std::pair<uint64_t, int64_t>, std::vector<int>> byGpu;   // (host, bus id) -> ranks
  for (int r = 0; r < (int)peers.size(); r++) byGpu[{peers[r].hostHash, peers[r].busIdNum}].push_back(r);
  GpuSharing v;
  v.maxChannels = INT_MAX;
  for (const auto& [gpuKey, group] : byGpu) {
    const int k = (int)group.size();
    const PeerInfo& gpu = peers[group[0]];
    if (k > 1) {
      v.shared = true;
      std::string why = refusal(peers, group);
      if (!why.empty()) {
        WARN("Rank %d: %s", myRank, why.c_str());
        return ncclInvalidUsage;
      }
    }
    int resident = INT_MAX;
    for (int r : group) resident = std::min(resident, (int)peers[r].residentBlocks);
    if (resident / k < 1) {
      WARN("Rank %d: %d rank(s) share GPU %s, whose collective kernels fit only %d block(s) at once: every rank "
           "needs one resident block per channel and at least one channel; put fewer ranks on it",
           myRank, k, gpu.busId, resident);
      return ncclInvalidUsage;
    }
    v.maxChannels = std::min(v.maxChannels, resident / k);
    if (k > 1 && std::find(group.begin(), group.end(), myRank) != group.end())
      INFO(kSubsysInit, "Rank %d shares GPU %s with %d other rank(s): at most %d channels per rank (%d resident blocks)",
           myRank, gpu.busId, k - 1, resident / k, resident);
  }
  *out = v;
  return ncclSuccess;
}

ncclResult_t checkSharedGpuStreams(const GroupPlan& group) {
  for (auto a = group.begin(); a != group.end(); ++a) {
    if (!a->gpuShared) continue;
    for (const std::vector<Task>* list : {&a->tasks.colls, &a->tasks.p2p}) {
      for (const Task& t : *list) {
        if (t.stream == nullptr) {
          WARN("Rank %d shares its GPU with other ranks of its communicator and launches on the legacy default "
               "stream, which waits for every other stream of the GPU (the other ranks' kernels wait for this "
               "one): give each rank a stream of its own", a->rank);
          return ncclInvalidUsage;
        }
        auto b = a;
        for (++b; b != group.end(); ++b) {
          if (!b->gpuShared || b->gpuDev != a->gpuDev) continue;
          for (const std::vector<Task>* other : {&b->tasks.colls, &b->tasks.p2p}) {
            for (const Task& u : *other) {
              if (u.stream != t.stream) continue;
              WARN("Ranks %d and %d share GPU %d and launch on the same stream in one group: the second kernel "
                   "would wait behind the first, which waits for it; give each rank a stream of its own",
                   a->rank, b->rank, a->gpuDev);
              return ncclInvalidUsage;
            }
          }
        }
      }
    }
  }
  return ncclSuccess;
}

}  // namespace uniccl
