// The RC queue pair life cycle RESET -> INIT -> RTR -> RTS: the attributes
// for each transition (pure functions, unit-tested) and the calls that apply
// them with a WARN naming the failing step.
//
//   NCCL_IB_TIMEOUT    ack timeout exponent: 4.096 us x 2^value (default 20)
//   NCCL_IB_RETRY_CNT  transport retries before a completion fails (default 7)
//   NCCL_IB_SL         service level (default 0)
//   NCCL_IB_TC         traffic class (RoCE DSCP << 2; default 0)
//   NCCL_IB_PKEY       partition key index (default 0)
#pragma once

#include "net/ib/ib_devices.h"

namespace uniccl {
namespace ib {

struct QpParams {
  uint8_t timeout = 20;
  uint8_t retryCnt = 7;
  uint8_t sl = 0;
  uint8_t trafficClass = 0;
  uint16_t pkeyIndex = 0;
};

// Reads the knobs above (values out of range WARN and give the default).
QpParams qpParamsFromEnv();

// What one end tells the other about its QP (part of the handshake).
struct QpEndpoint {
  uint32_t qpn = 0;
  uint16_t lid = 0;
  Gid gid{};
  LinkLayer linkLayer = LinkLayer::kUnspecified;
  int mtu = 0;  // enum ibv_mtu of the port
};

QpEndpoint localEndpoint(const IbDevice& dev, uint32_t qpn);

// Attributes + mask of each transition. `access`: remote access the QP grants.
void initAttr(const IbDevice& dev, const QpParams& p, int access, QpAttr* attr, int* mask);
void rtrAttr(const IbDevice& dev, const QpParams& p, const QpEndpoint& remote, QpAttr* attr, int* mask);
void rtsAttr(const QpParams& p, QpAttr* attr, int* mask);

// An RC QP on `dev` with its CQ, moved to INIT.
ncclResult_t createRcQp(const IbDevice& dev, const QpParams& p, Cq* cq, uint32_t maxSendWr, uint32_t maxRecvWr,
                        int access, QpPtr* qp, uint32_t* qpn);
// INIT -> RTR -> RTS towards `remote`. `what` names the connection in WARNs.
ncclResult_t connectRcQp(const IbDevice& dev, const QpParams& p, Qp* qp, const QpEndpoint& remote,
                         const char* what);

}  // namespace ib
}  // namespace uniccl
