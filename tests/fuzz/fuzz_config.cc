// readConfig (src/common/core/config.cc): the user's ncclConfig_t, possibly
// from an older or newer NCCL header, possibly never initialized.
//
// Input: flags (1) | size (8) | magic (4) | version (4) | field bytes (up to
// the rest of ncclConfig_t) | netName text NUL commName text.
// The struct is allocated with exactly min(size, sizeof(ncclConfig_t)) bytes,
// so AddressSanitizer catches any read past what the caller's header declared.
#include <string>
#include <vector>

#include "common/core/config.h"
#include "fuzz_input.h"

using namespace uniccl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  uint8_t flags = in.take<uint8_t>();
  uint64_t claimed = in.take<uint64_t>();
  uint32_t magic = in.take<uint32_t>();
  uint32_t version = in.take<uint32_t>();
  if (flags & 1) magic = 0xcafebeef;  // most inputs should get past the magic
  if (flags & 2) version = NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  if (flags & 4) claimed = sizeof(ncclConfig_t) - (claimed % 64);  // the sizes of real headers

  ncclConfig_t full;
  memset(&full, 0, sizeof(full));
  in.takeBytes(reinterpret_cast<char*>(&full) + 16, sizeof(full) - 16);
  full.size = claimed;
  full.magic = magic;
  full.version = version;
  std::string rest(reinterpret_cast<const char*>(in.rest()), in.remaining());
  std::string net = rest.substr(0, rest.find('\0'));
  std::string name = rest.size() > net.size() ? rest.substr(net.size() + 1) : std::string();
  // Pointers cannot come from the input: the user's are valid or null.
  full.netName = (flags & 8) ? nullptr : net.c_str();
  full.commName = (flags & 16) ? nullptr : name.c_str();

  size_t bytes = claimed < sizeof(full) ? (size_t)claimed : sizeof(full);
  if (bytes < sizeof(size_t)) bytes = sizeof(size_t);  // the size field itself is always there
  std::vector<unsigned char> user(bytes);
  memcpy(user.data(), &full, bytes);
  // A heap block of exactly `bytes`: reading past it is an ASan report.
  unsigned char* exact = new unsigned char[bytes];
  memcpy(exact, user.data(), bytes);

  CommConfig out;
  out.commName = "untouched";
  out.minCTAs = -7;
  ncclResult_t res = readConfig(reinterpret_cast<const ncclConfig_t*>(exact), &out);
  delete[] exact;
  if (res == ncclSuccess) {
    CHECK_OR_ABORT(claimed >= 24 && magic == 0xcafebeef);
    CHECK_OR_ABORT(out.minCTAs >= 1 && out.maxCTAs <= kMaxCTAs && out.minCTAs <= out.maxCTAs);
    CHECK_OR_ABORT(out.ctaPolicy >= NCCL_CTA_POLICY_DEFAULT && out.ctaPolicy <= NCCL_CTA_POLICY_ZERO);
    CHECK_OR_ABORT(out.userVersion == version);
  } else {
    CHECK_OR_ABORT(res == ncclInvalidArgument);
    CHECK_OR_ABORT(out.commName == "untouched" && out.minCTAs == -7);
  }
  // No config at all: defaults.
  CommConfig dflt;
  CHECK_OR_ABORT(readConfig(nullptr, &dflt) == ncclSuccess);
  return 0;
}
