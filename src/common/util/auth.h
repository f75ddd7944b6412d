// Mutual challenge-response between two processes that share a secret (the
// one inside a ncclUniqueId, or a per-listener key handed out through an
// already authenticated channel). The secret never crosses the wire: each
// side proves it knows it by an HMAC over both sides' fresh nonces, so a
// recorded exchange is worth nothing later, and a process without the secret
// can neither join nor pose as the side that listens.
//
//   acceptor  -> connector  AuthChallenge  (tag, acceptor nonce)
//   connector -> acceptor   AuthResponse   (connector nonce, connector proof)
//   acceptor  -> connector  AuthConfirm    (acceptor proof)
//
// The messages have fixed sizes, so an acceptor needs no state proportional
// to what an unauthenticated peer sends. `context` separates the uses (the
// bootstrap root, rank links, the NET transport, the import service): a proof
// made for one is refused by the others.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/util/sha256.h"
#include "common/util/socket.h"
#include "uniccl.h"

namespace uniccl {

constexpr size_t kAuthSecretBytes = 32;
constexpr size_t kAuthNonceBytes = 16;

struct AuthSecret {
  uint8_t bytes[kAuthSecretBytes];
};

// Cryptographically random bytes from the kernel (getrandom). False only
// when the kernel gives none, which callers treat as a system error.
bool randomBytes(void* out, size_t bytes);
[[nodiscard]] ncclResult_t randomSecret(AuthSecret* out);
// A secret derived from a text both sides know (UNICCL_COMM_SECRET).
AuthSecret secretFromText(const char* text);
// HMAC(secret, label): values derived from the secret (wire magics, names)
// that reveal nothing about it.
Sha256Digest deriveFromSecret(const AuthSecret& secret, const char* label);

constexpr uint32_t kAuthTag = 0x31414355;  // "UCA1" on the wire

struct AuthChallenge {
  uint32_t tag;
  uint8_t nonce[kAuthNonceBytes];
};
struct AuthResponse {
  uint8_t nonce[kAuthNonceBytes];
  uint8_t proof[32];
};
struct AuthConfirm {
  uint8_t proof[32];
};
static_assert(sizeof(AuthChallenge) == 20 && sizeof(AuthResponse) == 48 && sizeof(AuthConfirm) == 32, "wire layout");

// The pure steps, for event loops that keep one small state per connection.
// The acceptor makes a challenge; checks the response (false: refuse the peer)
// and answers with its own proof.
[[nodiscard]] ncclResult_t makeChallenge(AuthChallenge* out);
bool checkResponse(const AuthSecret& secret, const char* context, const AuthChallenge& challenge,
                   const AuthResponse& response);
AuthConfirm makeConfirm(const AuthSecret& secret, const char* context, const AuthChallenge& challenge,
                        const AuthResponse& response);
// The connector answers a challenge (false: not a uniccl challenge) and
// checks the acceptor's proof (false: the acceptor does not know the secret).
bool makeResponse(const AuthSecret& secret, const char* context, const AuthChallenge& challenge, AuthResponse* out);
bool checkConfirm(const AuthSecret& secret, const char* context, const AuthChallenge& challenge,
                  const AuthResponse& response, const AuthConfirm& confirm);

// Blocking versions over a connected socket: the whole exchange, each wait
// bounded by the deadline and the abort flag. A peer that fails the proof
// gets ncclRemoteError with a WARN naming `what` and its address.
[[nodiscard]] ncclResult_t authenticateAcceptor(Socket& sock, const AuthSecret& secret, const char* context, Deadline deadline,
                                  const std::atomic<uint32_t>* abortFlag, const char* what);
[[nodiscard]] ncclResult_t authenticateConnector(Socket& sock, const AuthSecret& secret, const char* context, Deadline deadline,
                                   const std::atomic<uint32_t>* abortFlag, const char* what);

}  // namespace uniccl
