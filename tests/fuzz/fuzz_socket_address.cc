// parseSocketAddress: the NCCL_COMM_ID text ("host:port", "ipv4:port",
// "[ipv6]:port"), and interfaceMatches (NCCL_SOCKET_IFNAME).
//
// Input: one byte n, then the address text; interfaceMatches gets the text
// split at n. Name resolution is made numeric-only below, so hostile host
// names never reach DNS (a fuzz run must not depend on the network).
#include <dlfcn.h>
#include <netdb.h>

#include <string>

#include "common/util/socket_address.h"
#include "fuzz_input.h"

using namespace uniccl;

// Overrides libc's getaddrinfo for this program only.
extern "C" int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints,
                           struct addrinfo** res) {
  using Fn = int (*)(const char*, const char*, const struct addrinfo*, struct addrinfo**);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "getaddrinfo"));
  if (!real) return EAI_FAIL;
  struct addrinfo h;
  memset(&h, 0, sizeof(h));
  if (hints) h = *hints;
  h.ai_flags |= AI_NUMERICHOST;
  return real(node, service, &h, res);
}

namespace {
bool sameEndpoint(const SocketAddress& a, const SocketAddress& b) {
  if (a.family() != b.family() || a.port() != b.port()) return false;
  if (a.family() == AF_INET) return a.sin.sin_addr.s_addr == b.sin.sin_addr.s_addr;
  return memcmp(&a.sin6.sin6_addr, &b.sin6.sin6_addr, sizeof(a.sin6.sin6_addr)) == 0;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  uint8_t split = in.take<uint8_t>();
  std::string text(reinterpret_cast<const char*>(in.rest()), in.remaining() < 512 ? in.remaining() : 512);
  const char* s = text.c_str();  // ends at the first NUL of the input, as an env var would

  SocketAddress a = emptySocketAddress();
  ncclResult_t res = parseSocketAddress(s, &a);
  if (res == ncclSuccess) {
    CHECK_OR_ABORT(a.valid() && a.port() >= 0 && a.port() <= 65535);
    std::string back = a.toString();
    SocketAddress b = emptySocketAddress();
    CHECK_OR_ABORT(parseSocketAddress(back.c_str(), &b) == ncclSuccess);
    CHECK_OR_ABORT(sameEndpoint(a, b));
  } else {
    CHECK_OR_ABORT(res == ncclInvalidArgument);
    CHECK_OR_ABORT(!a.valid());  // untouched on failure
  }

  std::string spec = text.substr(0, split < text.size() ? split : text.size());
  std::string name = text.substr(spec.size());
  (void)interfaceMatches(spec.c_str(), name.c_str());
  return 0;
}
