// emu_deadpeer_test --net=ib: the library's IB transport on the fake fabric
// across processes (tests/unit/net/ib/fake_verbs.h, joinFabric). Each rank's
// process gets one RoCE device whose GIDs are its own (::ffff:10.0.0.<rank+1>),
// so its QPs reach the other ranks' processes only through the fake's
// sockets; when a rank is killed, the survivors' sends towards it end in
// retry-exceeded, as on a real fabric.
#pragma once

#include <functional>
#include <string>

namespace deadpeer {

// What the fake holds in this process: copied through the test's pipes.
struct FakeIbCount {
  int contexts = 0, pds = 0, mrs = 0, cqs = 0, qps = 0;
  int violations = 0;       // verbs misuse the fake saw (printed when it happens)
  long long postedSends = 0;  // work requests the transport posted
};

// Installs this process's fake device as the IB transport's verbs, on the
// fabric of job `jobToken`. Before ncclCommInitRank; false with *error.
bool installFakeIb(int rank, const std::string& jobToken, std::string* error);

// Calls `hook` with the count after each QP the transport creates (a rank
// that dies while its connections are set up). After installFakeIb.
void onFakeIbQp(std::function<void(int created)> hook);

// Zeros when installFakeIb was not called.
FakeIbCount fakeIbCount();

// Prints each misuse the fake recorded, with `prefix`.
void printFakeIbViolations(const char* prefix);

}  // namespace deadpeer
