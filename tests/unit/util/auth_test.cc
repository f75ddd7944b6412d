// SHA-256 and HMAC against the published test vectors, and the
// challenge-response exchange: the right secret passes both ways, a wrong
// secret, a wrong context or a replayed answer is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

#include "common/util/auth.h"
#include "common/util/sha256.h"

using namespace uniccl;

namespace {

std::string hex(const Sha256Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

Sha256Digest hmac(const std::string& key, const std::string& data) {
  ByteSpan part{data.data(), data.size()};
  return hmacSha256(key.data(), key.size(), &part, 1);
}

AuthSecret secretOf(uint8_t fill) {
  AuthSecret s;
  memset(s.bytes, fill, sizeof(s.bytes));
  return s;
}

// A connected pair of sockets on loopback.
void socketPair(Socket* a, Socket* b) {
  SocketAddress any;
  ASSERT_EQ(parseSocketAddress("127.0.0.1:0", &any), ncclSuccess);
  Socket listener;
  ASSERT_EQ(listener.listen(any), ncclSuccess);
  std::thread t([&] { EXPECT_EQ(a->connect(listener.address(), deadlineAfterMs(5000)), ncclSuccess); });
  EXPECT_EQ(listener.accept(b, deadlineAfterMs(5000)), ncclSuccess);
  t.join();
}

struct Outcome {
  ncclResult_t acceptor, connector;
};

Outcome exchange(const AuthSecret& acceptorSecret, const char* acceptorContext, const AuthSecret& connectorSecret,
                 const char* connectorContext) {
  Socket c, a;
  socketPair(&c, &a);
  Outcome o;
  std::thread t([&] {
    o.connector = authenticateConnector(c, connectorSecret, connectorContext, deadlineAfterMs(5000), nullptr, "test");
    // A refused connector must not wait for the confirm forever.
    if (o.connector != ncclSuccess) c.close();
  });
  o.acceptor = authenticateAcceptor(a, acceptorSecret, acceptorContext, deadlineAfterMs(5000), nullptr, "test");
  if (o.acceptor != ncclSuccess) a.close();
  t.join();
  return o;
}

}  // namespace

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(hex(sha256("", 0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc", 3)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(hex(sha256(two.data(), two.size())), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // A million 'a', fed in uneven pieces: the block boundary handling.
  std::string a(1000000, 'a');
  Sha256 h;
  for (size_t off = 0; off < a.size();) {
    size_t n = std::min<size_t>(a.size() - off, 1 + off % 97);
    h.update(a.data() + off, n);
    off += n;
  }
  EXPECT_EQ(hex(h.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, HmacRfc4231) {
  EXPECT_EQ(hex(hmac(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(hmac("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than the block is hashed first.
  EXPECT_EQ(hex(hmac(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(Auth, ConstantTimeEqual) {
  uint8_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4};
  EXPECT_TRUE(constantTimeEqual(a, b, 4));
  b[3] = 5;
  EXPECT_FALSE(constantTimeEqual(a, b, 4));
  EXPECT_TRUE(constantTimeEqual(a, b, 3));
}

TEST(Auth, SameSecretPassesBothWays) {
  Outcome o = exchange(secretOf(7), "ctx", secretOf(7), "ctx");
  EXPECT_EQ(o.acceptor, ncclSuccess);
  EXPECT_EQ(o.connector, ncclSuccess);
}

TEST(Auth, WrongSecretIsRefused) {
  Outcome o = exchange(secretOf(7), "ctx", secretOf(8), "ctx");
  EXPECT_EQ(o.acceptor, ncclRemoteError);
  EXPECT_NE(o.connector, ncclSuccess);
}

TEST(Auth, ProofForAnotherContextIsRefused) {
  Outcome o = exchange(secretOf(7), "bootstrap", secretOf(7), "net");
  EXPECT_EQ(o.acceptor, ncclRemoteError);
  EXPECT_NE(o.connector, ncclSuccess);
}

TEST(Auth, PureStepsAgreeAndRefuseReplays) {
  AuthSecret s = secretOf(3);
  AuthChallenge ch;
  ASSERT_EQ(makeChallenge(&ch), ncclSuccess);
  AuthResponse r;
  ASSERT_TRUE(makeResponse(s, "ctx", ch, &r));
  EXPECT_TRUE(checkResponse(s, "ctx", ch, r));
  AuthConfirm c = makeConfirm(s, "ctx", ch, r);
  EXPECT_TRUE(checkConfirm(s, "ctx", ch, r, c));
  // The acceptor's proof is not a valid connector proof, and the reverse.
  AuthResponse mirrored = r;
  memcpy(mirrored.proof, c.proof, sizeof(c.proof));
  EXPECT_FALSE(checkResponse(s, "ctx", ch, mirrored));
  // A response recorded for one challenge fails a fresh one.
  AuthChallenge fresh;
  ASSERT_EQ(makeChallenge(&fresh), ncclSuccess);
  EXPECT_FALSE(checkResponse(s, "ctx", fresh, r));
  // Something that is not a challenge gets no response.
  AuthChallenge bogus = ch;
  bogus.tag = 0x48545448;  // "HTTP"
  EXPECT_FALSE(makeResponse(s, "ctx", bogus, &r));
}

TEST(Auth, DerivedValuesDependOnSecretAndLabel) {
  AuthSecret a = secretFromText("job-42"), b = secretFromText("job-43");
  EXPECT_NE(memcmp(a.bytes, b.bytes, sizeof(a.bytes)), 0);
  EXPECT_NE(deriveFromSecret(a, "magic"), deriveFromSecret(b, "magic"));
  EXPECT_NE(deriveFromSecret(a, "magic"), deriveFromSecret(a, "names"));
  AuthSecret r1, r2;
  ASSERT_EQ(randomSecret(&r1), ncclSuccess);
  ASSERT_EQ(randomSecret(&r2), ncclSuccess);
  EXPECT_NE(memcmp(r1.bytes, r2.bytes, sizeof(r1.bytes)), 0);
}
