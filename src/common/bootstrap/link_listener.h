// A rank's bootstrap listener: a thread that serves the socket ring and p2p
// peers connect to, all connections at once (listener_loop.h: bounded state,
// eviction of the oldest unproven connection, short deadlines), and keeps
// each link that proved the communicator's secret and named itself until the
// rank takes it. Idle, half-open or slow connections therefore never delay a
// real peer, and a peer's send completes whether or not this rank is waiting
// in a receive at that moment.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "common/bootstrap/wire.h"
#include "common/util/auth.h"
#include "common/util/socket.h"
#include "uniccl.h"

namespace uniccl {
namespace bootstrap {

struct PendingConnection;

class LinkListener {
 public:
  LinkListener() = default;
  // Stops and joins the thread; closes the listener and every untaken link.
  ~LinkListener();
  LinkListener(const LinkListener&) = delete;
  LinkListener& operator=(const LinkListener&) = delete;

  // Serves `listener` (listening, non-blocking) for the ranks of a
  // communicator of `nranks` with this secret and magic; `rank` is ours.
  [[nodiscard]] ncclResult_t start(Socket listener, const AuthSecret& secret, uint64_t magic, int rank, int nranks);
  const SocketAddress& address() const { return address_; }

  // Waits until `peer`'s link of this kind has arrived and moves it to *out.
  // Timeout: ncclRemoteError (WARN); abort: ncclInternalError; the thread
  // failed: ncclSystemError.
  [[nodiscard]] ncclResult_t take(LinkHello kind, int peer, Socket* out, Deadline deadline, const std::atomic<uint32_t>* abortFlag);

 private:
  void run();
  void serve();
  // ListenerLoop handler: reads the link hello of a proven connection.
  bool identify(PendingConnection& p);
  void stop();

  Socket listener_;
  SocketAddress address_ = emptySocketAddress();
  AuthSecret secret_{};
  uint64_t magic_ = 0;
  int rank_ = -1, nranks_ = 0;
  int64_t timeoutMs_ = 0;
  int wakeFd_ = -1;  // eventfd: wakes the thread's poll to stop it
  std::atomic<bool> stop_{false};
  std::unique_ptr<std::thread> thread_;
  int owner_ = 0;  // pid that started the thread (a forked child must not join it)

  std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<std::pair<int, int>, Socket> ready_;  // (kind, peer) -> link not yet taken; guarded by mutex_
  std::string failure_;                          // the thread's failure, if any; guarded by mutex_
};

}  // namespace bootstrap
}  // namespace uniccl
