// The listener's side of the authentication every bootstrap connection opens
// with (handshake.h AcceptorHandshake, the state machine the root and the
// rank listeners run): whatever a peer without the secret sends, the
// machine never accepts it, reads no more than the fixed-size response, and
// answers a wrong proof with a refusal. The input is streamed through a real
// socket pair, in pieces, so short and split reads are exercised too.
//
// Input: piece size (1) | bytes the peer sends (rest, up to 4096).
#include <sys/socket.h>
#include <unistd.h>

#include "common/bootstrap/handshake.h"
#include "fuzz_input.h"

using namespace uniccl;
using namespace uniccl::bootstrap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const size_t piece = 1 + in.take<uint8_t>() % 64;
  const size_t wireBytes = in.remaining() < 4096 ? in.remaining() : 4096;
  const uint8_t* wire = in.rest();

  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) return 0;
  Socket acceptor = Socket::adopt(fds[1], emptySocketAddress());
  AuthSecret secret;
  memset(secret.bytes, 0x42, sizeof(secret.bytes));
  AcceptorHandshake hs;
  CHECK_OR_ABORT(hs.begin());
  CHECK_OR_ABORT(hs.wantsWrite() && !hs.done() && !hs.peerSpoke());

  AcceptorHandshake::Step step = AcceptorHandshake::Step::kBusy;
  int err = 0;
  size_t sent = 0;
  while (step == AcceptorHandshake::Step::kBusy && sent < wireBytes) {
    size_t n = wireBytes - sent < piece ? wireBytes - sent : piece;
    if (write(fds[0], wire + sent, n) != (ssize_t)n) abort();
    sent += n;
    step = hs.progress(acceptor, secret, kRootAuthContext, &err);
  }
  if (step == AcceptorHandshake::Step::kBusy) {
    shutdown(fds[0], SHUT_WR);  // the peer stops sending
    step = hs.progress(acceptor, secret, kRootAuthContext, &err);
  }
  // Without the secret nothing passes; 48 bytes decide, whatever follows.
  CHECK_OR_ABORT(step != AcceptorHandshake::Step::kDone && !hs.done());
  if (wireBytes >= sizeof(AuthResponse)) CHECK_OR_ABORT(step == AcceptorHandshake::Step::kRefused);
  else CHECK_OR_ABORT(step == AcceptorHandshake::Step::kClosed);
  CHECK_OR_ABORT(hs.peerSpoke() == (wireBytes > 0));

  // What the peer got: the challenge, then (refused) the refusal.
  AuthChallenge challenge;
  CHECK_OR_ABORT(read(fds[0], &challenge, sizeof(challenge)) == (ssize_t)sizeof(challenge));
  CHECK_OR_ABORT(challenge.tag == kAuthTag);
  if (step == AcceptorHandshake::Step::kRefused) {
    AuthConfirm answer;
    CHECK_OR_ABORT(read(fds[0], &answer, sizeof(answer)) == (ssize_t)sizeof(answer));
    CHECK_OR_ABORT(isRefusal(answer));
  }
  close(fds[0]);
  return 0;
}
