// IPv4/IPv6 socket addresses, their text forms, and the choice of network
// interface under NCCL's knobs:
//
//   NCCL_SOCKET_IFNAME  comma list of interface-name prefixes; '^' first excludes
//                       them instead; '=' first makes the names exact. Default:
//                       any interface but lo, docker*, virbr*; lo if none.
//   NCCL_SOCKET_FAMILY  AF_INET or AF_INET6 to use only that address family.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <utility>
#include <vector>

#include "uniccl.h"

namespace uniccl {

// Fits the IPv6 form (28 bytes), so it can travel in a unique id and on the wire.
union SocketAddress {
  sockaddr sa;
  sockaddr_in sin;
  sockaddr_in6 sin6;

  int family() const { return sa.sa_family; }
  bool valid() const { return sa.sa_family == AF_INET || sa.sa_family == AF_INET6; }
  socklen_t length() const { return sa.sa_family == AF_INET6 ? sizeof(sin6) : sizeof(sin); }
  int port() const;
  void setPort(int port);
  // "1.2.3.4:5678" or "[::1]:5678" (port omitted with withPort = false).
  std::string toString(bool withPort = true) const;
  bool operator==(const SocketAddress& o) const;
};
static_assert(sizeof(SocketAddress) == 28, "SocketAddress travels in ids and messages");

// A zeroed address (family AF_UNSPEC: invalid).
SocketAddress emptySocketAddress();

// Parses "host:port", "ipv4:port" or "[ipv6]:port" (the NCCL_COMM_ID format).
// Host names are resolved. WARNs and returns ncclInvalidArgument when malformed.
[[nodiscard]] ncclResult_t parseSocketAddress(const char* text, SocketAddress* out);

// Interfaces to use, best first, one address per interface (name, address with
// port 0), at most maxIfs. `family` (AF_INET / AF_INET6) restricts the choice
// further; AF_UNSPEC leaves it to NCCL_SOCKET_FAMILY. Fails with a WARN saying
// which setting to change when nothing matches.
[[nodiscard]] ncclResult_t findInterfaces(std::vector<std::pair<std::string, SocketAddress>>* out, int maxIfs,
                            int family = AF_UNSPEC);

// NCCL_SOCKET_IFNAME matching, exposed for tests: does interface `name` pass `spec`?
bool interfaceMatches(const char* spec, const char* name);

}  // namespace uniccl
