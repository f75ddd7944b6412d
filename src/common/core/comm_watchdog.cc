#include "common/core/comm_watchdog.h"

#include <cstring>
#include <new>

#include "common/check.h"
#include "common/core/async_error.h"
#include "common/core/comm.h"
#include "common/util/debug.h"
#include "common/watchdog/watchdog.h"

namespace uniccl {

ncclResult_t watchdogRegister(ncclComm* comm, int64_t timeoutMs) {
  if (timeoutMs <= 0) {
    INFO(kSubsysInit, "comm %p rank %d: collective timeouts are off (UNICCL_TIMEOUT=0)", (void*)comm, comm->rank);
    return ncclSuccess;
  }
  comm->watch.reset(new (std::nothrow) CommWatch(timeoutMs));
  if (!comm->watch) {
    WARN("Out of host memory creating the watchdog state of rank %d", comm->rank);
    return ncclSystemError;
  }
  CommWatch& cw = *comm->watch;
  cw.owner.comm = comm;
  cw.owner.rank = comm->rank;
  cw.owner.nRanks = comm->nRanks;
  cw.owner.gpuDev = comm->gpuDev;
  cw.owner.commHash = comm->commHash;
  cw.owner.fail = [comm](ncclResult_t r) { failCommAsync(comm, r); };
  // The words the kernels report their progress in: eager launches, and
  // the graph slots (allocated now: nothing may be allocated while a stream
  // captures). The device learns where they are last, once all exist.
  const size_t wordsBytes = GraphTracker::kSlots * sizeof(dev::GraphProgress);
  const size_t replaysBytes = GraphTracker::kSlots * dev::kMaxChannels * sizeof(uint64_t);
  ncclResult_t res = gpu::hostAllocMapped(&cw.progressHost, &cw.progressDev, sizeof(dev::LaunchProgress));
  if (res == ncclSuccess) res = gpu::hostAllocMapped(&cw.graphWordsHost, &cw.graphWordsDev, wordsBytes);
  if (res == ncclSuccess) res = gpu::deviceAlloc(&cw.graphReplaysDev, replaysBytes);
  if (res == ncclSuccess) res = gpu::memset(cw.graphReplaysDev, 0, replaysBytes);
  if (res == ncclSuccess) {
    memset(cw.progressHost, 0, sizeof(dev::LaunchProgress));
    memset(cw.graphWordsHost, 0, wordsBytes);
    if (comm->devComm != nullptr) {
      comm->devCommHost.progress = static_cast<dev::LaunchProgress*>(cw.progressDev);
      res = gpu::memcpy(comm->devComm, &comm->devCommHost, sizeof(comm->devCommHost));
    }
  }
  if (res == ncclSuccess) {
    cw.eager.attach(static_cast<dev::LaunchProgress*>(cw.progressHost));
    cw.graphs.attach(static_cast<dev::GraphProgress*>(cw.graphWordsHost),
                     static_cast<dev::GraphProgress*>(cw.graphWordsDev), static_cast<uint64_t*>(cw.graphReplaysDev));
    res = watchdogAdd(&cw);
  }
  if (res != ncclSuccess) {
    // Without a watch launches carry id 0 and no graph slot: nothing writes
    // to the words, whatever the device copy of the pointer says.
    comm->devCommHost.progress = nullptr;
    comm->watch.reset();
    return res;
  }
  INFO(kSubsysInit, "comm %p rank %d: collectives time out after %lld s (UNICCL_TIMEOUT)", (void*)comm, comm->rank,
       (long long)(timeoutMs / 1000));
  return ncclSuccess;
}

void watchdogUnregister(ncclComm* comm) { watchdogRemove(comm->watch.get()); }

}  // namespace uniccl
