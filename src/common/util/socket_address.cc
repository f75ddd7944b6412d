#include "common/util/socket_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <strings.h>

#include <cstdlib>
#include <cstring>

#include "common/util/debug.h"
#include "common/util/knobs.h"
#include "common/util/name_list.h"

namespace uniccl {

int SocketAddress::port() const {
  if (sa.sa_family == AF_INET) return ntohs(sin.sin_port);
  if (sa.sa_family == AF_INET6) return ntohs(sin6.sin6_port);
  return 0;
}

void SocketAddress::setPort(int p) {
  if (sa.sa_family == AF_INET) sin.sin_port = htons((uint16_t)p);
  if (sa.sa_family == AF_INET6) sin6.sin6_port = htons((uint16_t)p);
}

std::string SocketAddress::toString(bool withPort) const {
  char host[INET6_ADDRSTRLEN] = "";
  if (sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &sin.sin_addr, host, sizeof(host));
    return withPort ? std::string(host) + ":" + std::to_string(port()) : std::string(host);
  }
  if (sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &sin6.sin6_addr, host, sizeof(host));
    return withPort ? "[" + std::string(host) + "]:" + std::to_string(port()) : std::string(host);
  }
  return "<invalid address>";
}

bool SocketAddress::operator==(const SocketAddress& o) const {
  if (family() != o.family()) return false;
  if (family() == AF_INET)
    return sin.sin_port == o.sin.sin_port && sin.sin_addr.s_addr == o.sin.sin_addr.s_addr;
  if (family() == AF_INET6)
    return sin6.sin6_port == o.sin6.sin6_port && memcmp(&sin6.sin6_addr, &o.sin6.sin6_addr, 16) == 0;
  return false;
}

SocketAddress emptySocketAddress() {
  SocketAddress a;
  memset(&a, 0, sizeof(a));
  return a;
}

ncclResult_t parseSocketAddress(const char* text, SocketAddress* out) {
  if (!text || !out) {
    WARN("parseSocketAddress: null argument");
    return ncclInvalidArgument;
  }
  std::string s(text), host, port;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') {
      WARN("Invalid address '%s': expected [ipv6-address]:port", text);
      return ncclInvalidArgument;
    }
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos || s.find(':') != colon) {
      WARN("Invalid address '%s': expected host:port, ipv4:port or [ipv6]:port", text);
      return ncclInvalidArgument;
    }
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  char* end = nullptr;
  long p = port.empty() ? -1 : strtol(port.c_str(), &end, 10);
  if (host.empty() || p < 0 || p > 65535 || (end && *end != '\0')) {
    WARN("Invalid address '%s': needs a host and a port between 0 and 65535", text);
    return ncclInvalidArgument;
  }
  addrinfo hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    WARN("Invalid address '%s': cannot resolve host '%s' (%s)", text, host.c_str(), gai_strerror(rc));
    return ncclInvalidArgument;
  }
  SocketAddress a = emptySocketAddress();
  for (addrinfo* r = res; r; r = r->ai_next) {
    if ((r->ai_family == AF_INET || r->ai_family == AF_INET6) && r->ai_addrlen <= sizeof(a)) {
      memcpy(&a, r->ai_addr, r->ai_addrlen);
      break;
    }
  }
  freeaddrinfo(res);
  if (!a.valid()) {
    WARN("Invalid address '%s': host '%s' has no IPv4 or IPv6 address", text, host.c_str());
    return ncclInvalidArgument;
  }
  a.setPort((int)p);
  *out = a;
  return ncclSuccess;
}

namespace {
// NCCL_SOCKET_IFNAME: items kept as written, prefixes unless '='.
NameList parseInterfaceList(const char* spec) {
  NameListSyntax syntax;
  syntax.exactMark = true;
  return parseNameList(spec, syntax);
}
}  // namespace

bool interfaceMatches(const char* spec, const char* name) { return parseInterfaceList(spec).accepts(name); }

namespace {

int familyFromEnv() {
  const char* env = knobValue(Knob::NCCL_SOCKET_FAMILY);
  if (!env || !env[0]) return AF_UNSPEC;
  if (strcasecmp(env, "AF_INET") == 0) return AF_INET;
  if (strcasecmp(env, "AF_INET6") == 0) return AF_INET6;
  WARN("NCCL_SOCKET_FAMILY='%s' is not AF_INET or AF_INET6; ignoring it", env);
  return AF_UNSPEC;
}

// Link-local IPv6 addresses need a scope id that other hosts cannot use.
bool usable(const sockaddr* sa) {
  if (sa->sa_family == AF_INET6) {
    const sockaddr_in6* s6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) return false;
  }
  return sa->sa_family == AF_INET || sa->sa_family == AF_INET6;
}

void collect(ifaddrs* list, const char* spec, int family, int maxIfs,
             std::vector<std::pair<std::string, SocketAddress>>* out) {
  const NameList names = parseInterfaceList(spec);
  for (ifaddrs* ifa = list; ifa && (int)out->size() < maxIfs; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || !usable(ifa->ifa_addr) || !(ifa->ifa_flags & IFF_UP)) continue;
    if (family != AF_UNSPEC && ifa->ifa_addr->sa_family != family) continue;
    if (!names.accepts(ifa->ifa_name)) continue;
    bool seen = false;
    for (const auto& e : *out) seen |= e.first == ifa->ifa_name;
    if (seen) continue;  // one address per interface, as NCCL
    SocketAddress a = emptySocketAddress();
    memcpy(&a, ifa->ifa_addr, ifa->ifa_addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    a.setPort(0);
    out->emplace_back(ifa->ifa_name, a);
  }
}

}  // namespace

ncclResult_t findInterfaces(std::vector<std::pair<std::string, SocketAddress>>* out, int maxIfs, int family) {
  if (!out || maxIfs <= 0) {
    WARN("findInterfaces: invalid arguments");
    return ncclInvalidArgument;
  }
  out->clear();
  int envFamily = familyFromEnv();
  if (family == AF_UNSPEC) family = envFamily;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    WARN("getifaddrs failed: %s", strerror(errno));
    return ncclSystemError;
  }
  const char* spec = knobValue(Knob::NCCL_SOCKET_IFNAME);
  if (spec && spec[0]) {
    collect(list, spec, family, maxIfs, out);
  } else {
    collect(list, "^docker,lo,virbr", family, maxIfs, out);
    if (out->empty()) collect(list, "lo", family, maxIfs, out);
  }
  freeifaddrs(list);
  if (out->empty()) {
    WARN("No usable network interface found (NCCL_SOCKET_IFNAME=%s, family %s): check NCCL_SOCKET_IFNAME and "
         "NCCL_SOCKET_FAMILY",
         spec ? spec : "<unset>",
         family == AF_INET ? "AF_INET" : family == AF_INET6 ? "AF_INET6" : "any");
    return ncclSystemError;
  }
  for (const auto& e : *out) INFO(kSubsysInit | kSubsysNet, "Socket interface %s: %s", e.first.c_str(),
                                  e.second.toString(false).c_str());
  return ncclSuccess;
}

}  // namespace uniccl
