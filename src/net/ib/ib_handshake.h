// The IB connection handshake over TCP (the QPs cannot talk before each knows
// the other's QP number and address):
//
//   connector -> acceptor : ConnInfo (its QP, port, GID; address/rkey of its FIFO)
//   acceptor: QP to RTR/RTS -> connector : ConnInfo (its QP, port, GID)
//   connector: QP to RTR/RTS -> acceptor : one "ready" byte
//
// The ready byte keeps the receiver from writing FIFO entries into a QP that
// is not in RTR yet. Both sides move at most one step per call (never block
// on the peer) and give up after UNICCL_NET_CONNECT_TIMEOUT_MS.
#pragma once

#include <string>

#include "common/util/socket.h"
#include "net/ib/qp_setup.h"
#include "uniccl_net.h"

namespace uniccl {
namespace ib {

constexpr uint32_t kWireVersion = 1;

// What listen() writes into the caller's NCCL_NET_HANDLE_MAXSIZE bytes.
// `stage` is only meaningful in the process that calls connect() with it.
struct IbHandle {
  SocketAddress addr;
  uint32_t pad;
  uint64_t magic;
  void* stage;
};
static_assert(sizeof(IbHandle) <= NCCL_NET_HANDLE_MAXSIZE, "handle must fit NCCL_NET_HANDLE_MAXSIZE");

struct ConnInfo {
  uint64_t magic;
  uint32_t version;
  uint32_t qpn;
  uint16_t lid;
  uint8_t linkLayer;
  uint8_t mtu;
  uint32_t pad;
  uint8_t gid[16];
  uint64_t fifoAddr;  // connector only: where the receiver writes FIFO entries
  uint32_t fifoRkey;
  uint32_t pad2;
};

ConnInfo makeConnInfo(uint64_t magic, const QpEndpoint& ep, uint64_t fifoAddr, uint32_t fifoRkey);
QpEndpoint endpointOf(const ConnInfo& info);
// Whether `info` belongs to this connection; on mismatch `why` says what differs.
bool checkConnInfo(const ConnInfo& info, uint64_t magic, std::string* why);

// Receives the rest of a fixed-size message without blocking: *got advances;
// returns ncclRemoteError with a WARN when the peer closed or the socket failed.
ncclResult_t receiveSome(Socket& sock, void* buf, size_t bytes, size_t* got, const char* what);

}  // namespace ib
}  // namespace uniccl
