// An in-memory net plugin (ncclNet_v8_t) for proxy tests: one process, sends
// matched to receives in order per connection. It can play a busy network
// (isend/irecv hand back no request, test reports "not yet"), fail or throw
// in the n-th isend, and it counts live objects so tests can check for leaks.
#pragma once

#include "common/proxy/net_api.h"

namespace uniccl::test {

struct LoopbackCounts {
  int comms;     // listen + send + recv comms alive
  int requests;  // requests alive (closed comms free theirs)
  int mrs;       // registrations alive
  int flushes;   // iflush calls so far
};

const ncclNet_v8_t* loopbackNet();
LoopbackCounts loopbackCounts();
// busyPercent of isend/irecv/test calls pretend the network is busy (seeded, deterministic).
void loopbackSetChaos(unsigned seed, int busyPercent);
// The n-th isend from now (1-based) returns ncclSystemError; 0 disables.
void loopbackFailIsendAfter(int n);
// The n-th isend from now throws std::bad_alloc (a net that ran out of
// memory, or a plugin's bug); 0 disables.
void loopbackThrowIsendAfter(int n);

}  // namespace uniccl::test
