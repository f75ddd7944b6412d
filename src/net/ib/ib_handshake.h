// The IB connection handshake over TCP (the QPs cannot talk before each knows
// the other's QP number and address):
//
//   connector -> acceptor : Opening = proof of the handle's key + ConnInfo
//                           (its QP, port, GID; address/rkey of its FIFO)
//   acceptor: checks the proof, QP to RTR/RTS
//                         -> connector : Reply = the listener's proof + ConnInfo (its QP, port, GID)
//   connector: checks the proof, QP to RTR/RTS -> acceptor : one "ready" byte
//
// The proofs are auth.h's challenge-response over the key and challenge that
// listen() put into the handle (context "net-ib", see net/listener_guard.h):
// the acceptor creates no verbs object for a connection that did not prove
// the key, and the connector writes nothing into a QP of a listener that did
// not. The ready byte keeps the receiver from writing FIFO entries into a QP
// that is not in RTR yet. Both sides move at most one step per call (never
// block on the peer) and give up after UNICCL_NET_CONNECT_TIMEOUT_MS.
#pragma once

#include <string>

#include "common/util/auth.h"
#include "common/util/socket.h"
#include "net/ib/qp_setup.h"
#include "net/listener_guard.h"
#include "uniccl_net.h"

namespace uniccl {
namespace ib {

constexpr uint32_t kWireVersion = 2;  // 2: proofs of the listener's key
constexpr const char* kAuthContext = "net-ib";

// What listen() writes into the caller's NCCL_NET_HANDLE_MAXSIZE bytes.
// `stage` is only meaningful in the process that calls connect() with it.
struct IbHandle {
  SocketAddress addr;
  uint32_t pad;
  ListenerSecret secret;
  void* stage;
};
static_assert(sizeof(IbHandle) <= NCCL_NET_HANDLE_MAXSIZE, "handle must fit NCCL_NET_HANDLE_MAXSIZE");

struct ConnInfo {
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

// connector -> acceptor, first bytes on the socket.
struct Opening {
  AuthResponse response;
  ConnInfo info;
};
// acceptor -> connector, once the connector's proof checked out.
struct Reply {
  AuthConfirm confirm;
  ConnInfo info;
};

ConnInfo makeConnInfo(const QpEndpoint& ep, uint64_t fifoAddr, uint32_t fifoRkey);
QpEndpoint endpointOf(const ConnInfo& info);
// Whether `info` is one this version can use; if not `why` says what is wrong.
bool checkConnInfo(const ConnInfo& info, std::string* why);

// Receives the rest of a fixed-size message without blocking: *got advances;
// returns ncclRemoteError with a WARN when the peer closed or the socket failed.
ncclResult_t receiveSome(Socket& sock, void* buf, size_t bytes, size_t* got, const char* what);

}  // namespace ib
}  // namespace uniccl
