#include "common/util/auth.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "common/util/debug.h"

namespace uniccl {
namespace {

// The two proofs differ in their role byte, so the acceptor's proof can
// never be replayed as a connector's (or the reverse).
Sha256Digest proof(const AuthSecret& secret, const char* context, char role, const AuthChallenge& challenge,
                   const uint8_t* connectorNonce) {
  ByteSpan parts[] = {{context, strlen(context) + 1},
                      {&role, 1},
                      {challenge.nonce, kAuthNonceBytes},
                      {connectorNonce, kAuthNonceBytes}};
  return hmacSha256(secret.bytes, kAuthSecretBytes, parts, 4);
}

}  // namespace

bool randomBytes(void* out, size_t bytes) {
  uint8_t* p = static_cast<uint8_t*>(out);
  while (bytes > 0) {
    ssize_t n = getrandom(p, bytes, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    bytes -= (size_t)n;
  }
  return true;
}

ncclResult_t randomSecret(AuthSecret* out) {
  if (!randomBytes(out->bytes, kAuthSecretBytes)) {
    WARN("Cannot get random bytes from the kernel (getrandom: %s)", strerror(errno));
    return ncclSystemError;
  }
  return ncclSuccess;
}

AuthSecret secretFromText(const char* text) {
  static const char label[] = "uniccl communicator secret v1";
  Sha256 h;
  h.update(label, sizeof(label));
  h.update(text, strlen(text));
  Sha256Digest d = h.finish();
  AuthSecret s;
  memcpy(s.bytes, d.data(), kAuthSecretBytes);
  return s;
}

Sha256Digest deriveFromSecret(const AuthSecret& secret, const char* label) {
  ByteSpan part{label, strlen(label)};
  return hmacSha256(secret.bytes, kAuthSecretBytes, &part, 1);
}

ncclResult_t makeChallenge(AuthChallenge* out) {
  out->tag = kAuthTag;
  if (!randomBytes(out->nonce, kAuthNonceBytes)) {
    WARN("Cannot get random bytes from the kernel (getrandom: %s)", strerror(errno));
    return ncclSystemError;
  }
  return ncclSuccess;
}

bool checkResponse(const AuthSecret& secret, const char* context, const AuthChallenge& challenge,
                   const AuthResponse& response) {
  Sha256Digest want = proof(secret, context, 'C', challenge, response.nonce);
  return constantTimeEqual(want.data(), response.proof, want.size());
}

AuthConfirm makeConfirm(const AuthSecret& secret, const char* context, const AuthChallenge& challenge,
                        const AuthResponse& response) {
  AuthConfirm c;
  Sha256Digest d = proof(secret, context, 'A', challenge, response.nonce);
  memcpy(c.proof, d.data(), d.size());
  return c;
}

bool makeResponse(const AuthSecret& secret, const char* context, const AuthChallenge& challenge, AuthResponse* out) {
  if (challenge.tag != kAuthTag) return false;
  if (!randomBytes(out->nonce, kAuthNonceBytes)) return false;
  Sha256Digest d = proof(secret, context, 'C', challenge, out->nonce);
  memcpy(out->proof, d.data(), d.size());
  return true;
}

bool checkConfirm(const AuthSecret& secret, const char* context, const AuthChallenge& challenge,
                  const AuthResponse& response, const AuthConfirm& confirm) {
  Sha256Digest want = proof(secret, context, 'A', challenge, response.nonce);
  return constantTimeEqual(want.data(), confirm.proof, want.size());
}

ncclResult_t authenticateAcceptor(Socket& sock, const AuthSecret& secret, const char* context, Deadline deadline,
                                  const std::atomic<uint32_t>* abortFlag, const char* what) {
  AuthChallenge challenge;
  AuthResponse response;
  ncclResult_t res = makeChallenge(&challenge);
  if (res != ncclSuccess) return res;
  if ((res = sock.sendAll(&challenge, sizeof(challenge), deadline, abortFlag)) != ncclSuccess) return res;
  if ((res = sock.recvAll(&response, sizeof(response), deadline, abortFlag)) != ncclSuccess) return res;
  if (!checkResponse(secret, context, challenge, response)) {
    WARN("%s: refusing %s: it does not prove the communicator's secret (a process without the unique id, or a "
         "different UNICCL_COMM_SECRET)",
         what, sock.address().toString().c_str());
    return ncclRemoteError;
  }
  AuthConfirm confirm = makeConfirm(secret, context, challenge, response);
  return sock.sendAll(&confirm, sizeof(confirm), deadline, abortFlag);
}

ncclResult_t authenticateConnector(Socket& sock, const AuthSecret& secret, const char* context, Deadline deadline,
                                   const std::atomic<uint32_t>* abortFlag, const char* what) {
  AuthChallenge challenge;
  AuthResponse response;
  AuthConfirm confirm;
  ncclResult_t res = sock.recvAll(&challenge, sizeof(challenge), deadline, abortFlag);
  if (res != ncclSuccess) return res;
  if (!makeResponse(secret, context, challenge, &response)) {
    WARN("%s: %s did not start the authentication exchange (not a uniccl listener of this version?)", what,
         sock.address().toString().c_str());
    return ncclRemoteError;
  }
  if ((res = sock.sendAll(&response, sizeof(response), deadline, abortFlag)) != ncclSuccess) return res;
  if ((res = sock.recvAll(&confirm, sizeof(confirm), deadline, abortFlag)) != ncclSuccess) return res;
  if (!checkConfirm(secret, context, challenge, response, confirm)) {
    WARN("%s: %s does not prove the communicator's secret: refusing to talk to it", what,
         sock.address().toString().c_str());
    return ncclRemoteError;
  }
  return ncclSuccess;
}

}  // namespace uniccl
