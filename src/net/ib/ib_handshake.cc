#include "net/ib/ib_handshake.h"

#include <cstring>

#include "common/util/debug.h"
#include "common/util/param.h"

namespace uniccl {
namespace ib {

ConnInfo makeConnInfo(const QpEndpoint& ep, uint64_t fifoAddr, uint32_t fifoRkey) {
  ConnInfo c;
  memset(&c, 0, sizeof(c));
  c.version = kWireVersion;
  c.qpn = ep.qpn;
  c.lid = ep.lid;
  c.linkLayer = (uint8_t)ep.linkLayer;
  c.mtu = (uint8_t)ep.mtu;
  memcpy(c.gid, ep.gid.raw, sizeof(c.gid));
  c.fifoAddr = fifoAddr;
  c.fifoRkey = fifoRkey;
  return c;
}

QpEndpoint endpointOf(const ConnInfo& info) {
  QpEndpoint e;
  e.qpn = info.qpn;
  e.lid = info.lid;
  e.linkLayer = (LinkLayer)info.linkLayer;
  e.mtu = info.mtu;
  memcpy(e.gid.raw, info.gid, sizeof(info.gid));
  return e;
}

bool checkConnInfo(const ConnInfo& info, std::string* why) {
  if (info.version != kWireVersion) {
    *why = "wire version " + std::to_string(info.version) + ", expected " + std::to_string(kWireVersion) +
           " (mixed uniccl versions?)";
    return false;
  }
  if (info.linkLayer != (uint8_t)LinkLayer::kInfiniBand && info.linkLayer != (uint8_t)LinkLayer::kEthernet) {
    *why = "unknown link layer " + std::to_string(info.linkLayer);
    return false;
  }
  return true;
}

ncclResult_t receiveSome(Socket& sock, void* buf, size_t bytes, size_t* got, const char* what) {
  while (*got < bytes) {
    int err = 0;
    ssize_t n = sock.tryRecv(static_cast<char*>(buf) + *got, bytes - *got, &err);
    if (n < 0) {
      WARN("NET/IB: %s: the connection with %s closed during the handshake%s%s (did the peer fail? see its log)",
           what, sock.address().toString().c_str(), err ? ": " : "", err ? strerror(err) : "");
      return ncclRemoteError;
    }
    if (n == 0) return ncclSuccess;
    *got += (size_t)n;
  }
  return ncclSuccess;
}

}  // namespace ib
}  // namespace uniccl
