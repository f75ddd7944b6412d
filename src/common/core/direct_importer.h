// The first direct receive from a peer of another process into a
// registered allocation needs that peer to map the allocation (its import
// service, core/import_service.h): a socket round trip that a rank
// planning its group must not wait for. The planner asks directRecvTarget
// (core/direct_recv.h), which on such a miss records the view as pending in
// the registration, queues the request here and plans the message through
// the slots (always correct). This communicator's importer thread asks the
// peer and records the answer in the registration, so later plans find the
// direct address; a registration that went meanwhile (ncclCommDeregister)
// has the peer unmap it again.
//
// One thread per communicator that may need it (started with the first
// request), stopped at destroy and abort before the registry goes; its
// waits end with the communicator's abort flag.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common/core/import_service.h"
#include "common/core/registry.h"
#include "uniccl.h"

namespace uniccl {

class DirectImporter {
 public:
  struct Request {
    uint64_t registration;   // RegisteredBuffer::id
    int peer;
    uintptr_t allocBase;
    size_t allocBytes;
    bool vmm;
  };

  // self: this rank's endpoint (secret, hash, rank, abort flag); registry:
  // where the answers go. Both outlive the importer.
  DirectImporter(const ImportEndpoint& self, BufferRegistry* registry) : self_(self), registry_(registry) {}
  ~DirectImporter() { stop(); }
  DirectImporter(const DirectImporter&) = delete;
  DirectImporter& operator=(const DirectImporter&) = delete;

  // The planning thread: queues a request and returns (no wait for the peer).
  // False when it cannot be queued (the thread could not start, or stop()
  // ran): the view stays pending, its messages go through the slots.
  bool request(const Request& r);
  // Until every queued request was answered and recorded (tests, logs).
  void waitIdle();
  // Drops what is queued, waits for the request in flight, joins the thread. Idempotent.
  void stop();
  // ncclCommDeregister, on the calling thread: the peers that mapped the
  // views' allocations unmap them (a pending view is the thread's to
  // release once answered). Best effort: a peer that is gone costs the
  // 2-second connect wait of core/import_service.cc, then an INFO line.
  void releaseViews(const std::vector<PeerView>& views);
  // Requests answered so far, mapped or refused (tests).
  uint64_t answered() const;

 private:
  void run();
  void answer(const Request& r);

  const ImportEndpoint self_;
  BufferRegistry* const registry_;
  mutable std::mutex mu_;
  std::condition_variable work_;   // a request came, or stop
  std::condition_variable idle_;   // the queue ran empty with nothing in flight
  std::deque<Request> queue_;
  bool busy_ = false;              // a request is in flight
  bool stopping_ = false;
  uint64_t answered_ = 0;
  std::thread thread_;
};

}  // namespace uniccl
