#include "common/core/self_copy_kernel.h"

#include <atomic>
#include <cstring>

#include "common/check.h"
#include "common/core/comm.h"
#include "common/core/comm_plan.h"
#include "common/core/launch.h"
#include "common/core/redop.h"
#include "common/core/side_stream.h"
#include "common/util/debug.h"
#include "device/dev_types.h"
#include "device/kernels.h"

namespace uniccl {

namespace {

std::atomic<uint64_t> gSelfCopies{0};

}  // namespace

void planSelfCopy(CommPlan& p, size_t sendIndex, size_t recvIndex, unsigned blocks) {
  const Task& s = p.tasks.p2p[sendIndex];
  const Task& r = p.tasks.p2p[recvIndex];
  setTaskPath(&p.side.p2pPath, p.tasks.p2p.size(), sendIndex, TaskPath::SelfCopyKernel);
  setTaskPath(&p.side.p2pPath, p.tasks.p2p.size(), recvIndex, TaskPath::SelfCopyKernel);
  SideCopy x{SideWhat::SelfCopy, SideWhen::WithKernels, SideOn::SideStream, &p, &p, s.sendbuff, r.recvbuff,
             s.count * dataTypeSize(s.dtype)};
  x.blocks = blocks;
  addSideCopy(x);
}

ncclResult_t launchSelfCopyKernel(const CommPlan& p, const SideCopy& x, gpu::Stream stream) {
  const ncclComm* c = p.comm;
  dev::KernelArgs args;
  memset(&args, 0, sizeof(args));
  args.comm = c->devComm;
  args.channels = c->channelsDev;
  args.nWorks = 1;
  dev::Work& w = args.inlineWorks[0];
  w.coll = dev::kCollP2p;
  w.proto = dev::kProtoSimple;
  w.channelLo = 0;
  w.channelHi = (uint8_t)(x.blocks - 1);
  w.p.sendPeer = c->rank;
  w.p.recvPeer = c->rank;
  w.p.sendBuff = x.src;
  w.p.recvBuff = x.dst;
  w.p.sendBytes = x.bytes;
  w.p.recvBytes = x.bytes;
  // A short copy: the group's next kernel may start once it passed its wait.
  args.releaseEarly = releaseEarly(c, x.blocks);
  gpu::LaunchConfig cfg;
  cfg.gridX = x.blocks;
  cfg.blockX = dev::kThreadsPerBlock;
  cfg.stream = stream;
  void* argv[] = {&args};
  UCHECK(gpu::launchKernel(dev::p2pKernel(), cfg, argv, nullptr));
  gSelfCopies.fetch_add(1, std::memory_order_relaxed);
  TRACE(kSubsysP2p, "rank %d: %zu bytes to itself by a side-stream kernel", c->rank, x.bytes);
  return ncclSuccess;
}

uint64_t selfCopyLaunches() { return gSelfCopies.load(std::memory_order_relaxed); }

}  // namespace uniccl
