#include "deadpeer_fake_ib.h"

#include <cstdio>

#include "fake_verbs.h"
#include "net/ib/ib_transport.h"

namespace deadpeer {

namespace {
// Never destroyed: the IB transport keeps its verbs for the process's lifetime.
uniccl::ib::fake::FakeVerbs* gFake = nullptr;
}  // namespace

bool installFakeIb(int rank, const std::string& jobToken, std::string* error) {
  using uniccl::ib::fake::FakeVerbs;
  if (gFake != nullptr || uniccl::ib::verbsInstalled()) {
    *error = "the IB transport has its verbs already";
    return false;
  }
  gFake = new FakeVerbs();
  gFake->addDevice(FakeVerbs::roceHost("mlx5_0", (uint8_t)(rank + 1)));
  if (!gFake->joinFabric(jobToken, error)) return false;
  uniccl::ib::installVerbs(gFake);
  return true;
}

void onFakeIbQp(std::function<void(int)> hook) {
  if (gFake != nullptr) gFake->onCreateQp(std::move(hook));
}

FakeIbCount fakeIbCount() {
  FakeIbCount c;
  if (gFake == nullptr) return c;
  const uniccl::ib::fake::FakeVerbs::Census n = gFake->census();
  c.contexts = n.contexts;
  c.pds = n.pds;
  c.mrs = n.mrs;
  c.cqs = n.cqs;
  c.qps = n.qps;
  c.violations = (int)gFake->violations().size();
  c.postedSends = gFake->postedSends();
  return c;
}

void printFakeIbViolations(const char* prefix) {
  if (gFake == nullptr) return;
  for (const std::string& v : gFake->violations()) fprintf(stderr, "%sverbs misuse: %s\n", prefix, v.c_str());
}

}  // namespace deadpeer
