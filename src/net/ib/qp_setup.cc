#include "net/ib/qp_setup.h"

#include <algorithm>
#include <cstring>

#include "common/util/debug.h"
#include "common/util/knobs.h"

namespace uniccl {
namespace ib {

namespace {
uint8_t boundedParam(Knob k, int64_t lo, int64_t hi) {
  const KnobSpec& spec = knobSpec(k);
  const int64_t dflt = spec.intDefault;
  int64_t v = knobInt(spec);
  if (v < lo || v > hi) {
    WARN("%s=%lld is out of range [%lld, %lld]: using %lld", spec.name, (long long)v, (long long)lo, (long long)hi,
         (long long)dflt);
    v = dflt;
  }
  return (uint8_t)v;
}
}  // namespace

QpParams qpParamsFromEnv() {
  QpParams p;
  p.timeout = boundedParam(Knob::NCCL_IB_TIMEOUT, 1, 31);
  p.retryCnt = boundedParam(Knob::NCCL_IB_RETRY_CNT, 0, 7);
  p.sl = boundedParam(Knob::NCCL_IB_SL, 0, 15);
  p.trafficClass = boundedParam(Knob::NCCL_IB_TC, 0, 255);
  int64_t pkey = knobInt(Knob::NCCL_IB_PKEY);
  if (pkey < 0 || pkey > 0xffff) {
    WARN("NCCL_IB_PKEY=%lld is out of range [0, 65535]: using 0", (long long)pkey);
    pkey = 0;
  }
  p.pkeyIndex = (uint16_t)pkey;
  return p;
}

QpEndpoint localEndpoint(const IbDevice& dev, uint32_t qpn) {
  QpEndpoint e;
  e.qpn = qpn;
  e.lid = dev.portAttr.lid;
  e.gid = dev.gid;
  e.linkLayer = dev.portAttr.linkLayer;
  e.mtu = dev.portAttr.activeMtu;
  return e;
}

void initAttr(const IbDevice& dev, const QpParams& p, int access, QpAttr* attr, int* mask) {
  *attr = QpAttr();
  attr->state = QpState::kInit;
  attr->pkeyIndex = p.pkeyIndex;
  attr->portNum = (uint8_t)dev.port;
  attr->accessFlags = access;
  *mask = kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags;
}

void rtrAttr(const IbDevice& dev, const QpParams& p, const QpEndpoint& remote, QpAttr* attr, int* mask) {
  *attr = QpAttr();
  attr->state = QpState::kRtr;
  attr->pathMtu = std::min(dev.portAttr.activeMtu, remote.mtu);
  attr->destQpn = remote.qpn;
  attr->rqPsn = 0;
  attr->maxDestRdAtomic = 1;
  attr->minRnrTimer = 12;  // 0.64 ms: NCCL's value
  AhAttr& ah = attr->ah;
  if (dev.portAttr.linkLayer == LinkLayer::kEthernet) {
    ah.isGlobal = true;  // RoCE is always GRH-routed
    ah.dgid = remote.gid;
    ah.flowLabel = 0;
    ah.sgidIndex = (uint8_t)dev.gidIndex;
    ah.hopLimit = 255;
    ah.trafficClass = p.trafficClass;
  } else {
    ah.isGlobal = false;
    ah.dlid = remote.lid;
  }
  ah.sl = p.sl;
  ah.portNum = (uint8_t)dev.port;
  *mask = kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
}

void rtsAttr(const QpParams& p, QpAttr* attr, int* mask) {
  *attr = QpAttr();
  attr->state = QpState::kRts;
  attr->timeout = p.timeout;
  attr->retryCnt = p.retryCnt;
  attr->rnrRetry = 7;  // infinite: receives are always posted before a write lands
  attr->sqPsn = 0;
  attr->maxRdAtomic = 1;
  *mask = kQpState | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic;
}

ncclResult_t createRcQp(const IbDevice& dev, const QpParams& p, Cq* cq, uint32_t maxSendWr, uint32_t maxRecvWr,
                        int access, QpPtr* qp, uint32_t* qpn) {
  Verbs* v = dev.context->verbs;
  QpInitAttr ia;
  ia.sendCq = cq;
  ia.recvCq = cq;
  ia.maxSendWr = maxSendWr;
  ia.maxRecvWr = maxRecvWr;
  ia.maxSendSge = 1;
  ia.maxRecvSge = 1;
  ia.maxInlineData = 0;
  Qp* raw = nullptr;
  if (int err = v->createQp(dev.context->pd.get(), ia, &raw, qpn)) {
    WARN("NET/IB: ibv_create_qp on %s:%d failed: %s (too many QPs? check ulimit -l and the HCA's max_qp)",
         dev.name.c_str(), dev.port, strerror(err));
    return ncclSystemError;
  }
  *qp = own<QpPtr>(v, raw);
  QpAttr attr;
  int mask = 0;
  initAttr(dev, p, access, &attr, &mask);
  if (int err = v->modifyQp(raw, attr, mask)) {
    WARN("NET/IB: moving a QP on %s:%d to INIT failed: %s (check NCCL_IB_PKEY=%u)", dev.name.c_str(), dev.port,
         strerror(err), (unsigned)p.pkeyIndex);
    qp->reset();
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t connectRcQp(const IbDevice& dev, const QpParams& p, Qp* qp, const QpEndpoint& remote,
                         const char* what) {
  Verbs* v = dev.context->verbs;
  if (remote.linkLayer != dev.portAttr.linkLayer) {
    WARN("NET/IB: %s: the peer's port is %s but %s:%d is %s: both ends must use the same link layer "
         "(check NCCL_IB_HCA on both sides)",
         what, linkLayerName(remote.linkLayer), dev.name.c_str(), dev.port, linkLayerName(dev.portAttr.linkLayer));
    return ncclInvalidUsage;
  }
  if (mtuBytes(remote.mtu) == 0) {
    WARN("NET/IB: %s: the peer sent an invalid MTU code %d", what, remote.mtu);
    return ncclRemoteError;
  }
  QpAttr attr;
  int mask = 0;
  rtrAttr(dev, p, remote, &attr, &mask);
  if (int err = v->modifyQp(qp, attr, mask)) {
    WARN("NET/IB: %s: moving QP to RTR (remote QPN %u, %s %s, MTU %d) on %s:%d failed: %s "
         "(check NCCL_IB_GID_INDEX / NCCL_IB_SL / NCCL_IB_TC and that the ports share a fabric)",
         what, remote.qpn, remote.linkLayer == LinkLayer::kEthernet ? "GID" : "LID",
         remote.linkLayer == LinkLayer::kEthernet ? gidToString(remote.gid).c_str()
                                                  : std::to_string(remote.lid).c_str(),
         mtuBytes(attr.pathMtu), dev.name.c_str(), dev.port, strerror(err));
    return ncclSystemError;
  }
  rtsAttr(p, &attr, &mask);
  if (int err = v->modifyQp(qp, attr, mask)) {
    WARN("NET/IB: %s: moving QP to RTS on %s:%d failed: %s (check NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT)", what,
         dev.name.c_str(), dev.port, strerror(err));
    return ncclSystemError;
  }
  return ncclSuccess;
}

}  // namespace ib
}  // namespace uniccl
