#include "common/core/describe_launch.h"

#include <algorithm>

namespace uniccl {

void describeLaunch(const LaunchPlan& plan, size_t k, int ringNext, int ringPrev, WorkDesc* d) {
  *d = WorkDesc{};
  if (k >= plan.launches.size() || plan.launches[k].nWorks == 0) return;
  const KernelLaunch& L = plan.launches[k];
  const dev::Work& w = plan.works[L.firstWork];
  d->coll = w.coll;
  d->nWorks = (uint16_t)std::min<uint32_t>(L.nWorks, 65535);
  // The task of the launch's first work item.
  if (L.firstWork < plan.workSeq.size()) d->seq = plan.workSeq[L.firstWork];
  if (w.coll == dev::kCollP2p) {
    d->count = w.p.sendBytes;
    d->sendPeer = w.p.sendPeer;
    d->recvPeer = w.p.recvPeer;
  } else {
    d->dtype = w.c.dtype;
    d->redOp = w.c.redOp;
    d->count = w.c.count;
    d->sendPeer = ringNext;
    d->recvPeer = ringPrev;
  }
}

}  // namespace uniccl
