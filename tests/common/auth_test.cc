// common/auth.h: HMAC-SHA256 against RFC 4231's vectors, and the handshake between two ends of a real
// loopback connection with every kind of mismatch (token, no token, job id, the server's own check).
#include "common/auth.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace psring {
namespace {

std::string Hex(const std::array<uint8_t, 32>& mac) {
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
}

TEST(HmacSha256Test, MatchesRfc4231) {
  // Test case 1: a 20-byte key of 0x0b.
  EXPECT_EQ(Hex(HmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Test case 2: a key shorter than the block.
  EXPECT_EQ(Hex(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(ConstantTimeEqualsTest, ComparesBytesAndLengths) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(AuthConfigTest, FlagWinsOverTheEnvironment) {
  setenv(kAuthTokenEnv, "from-the-environment", 1);
  setenv(kJobIdEnv, "job-env", 1);
  EXPECT_EQ(AuthConfigFrom("", "", "")->token, "from-the-environment");
  EXPECT_EQ(AuthConfigFrom("", "", "")->job_id, "job-env");
  EXPECT_EQ(AuthConfigFrom("flag-token-of-16-bytes", "", "j")->token, "flag-token-of-16-bytes");
  EXPECT_EQ(AuthConfigFrom("flag-token-of-16-bytes", "", "j")->job_id, "j");
  unsetenv(kAuthTokenEnv);
  unsetenv(kJobIdEnv);
  EXPECT_EQ(AuthConfigFrom("", "", "")->token, "");
  EXPECT_EQ(AuthConfigFrom("", "", std::string(kMaxJobIdBytes + 1, 'j')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Issue 34: the ring loads its token as the parameter server does (LoadAuthToken): the 16-byte minimum
// applies to the flag and to the environment. The landed AuthConfigFrom took any length.
TEST(AuthConfigTest, TheRingRefusesShortTokensLikeThePs) {
  const absl::StatusOr<AuthConfig> flag = AuthConfigFrom("ten-bytes!", "", "");
  ASSERT_FALSE(flag.ok());
  EXPECT_EQ(flag.status(), LoadAuthToken("ten-bytes!", "").status());
  EXPECT_TRUE(absl::StrContains(flag.status().message(), "has 10 bytes; use at least 16")) << flag.status();
  setenv(kAuthTokenEnv, "ten-bytes!", 1);
  EXPECT_EQ(AuthConfigFrom("", "", "").status().code(), absl::StatusCode::kInvalidArgument);
  unsetenv(kAuthTokenEnv);
}

// The ring's handshake keys are derived from the token with their own label, so the PS's (another label)
// are unrelated, and neither is the token: a MAC captured from one protocol cannot be checked offline
// against the other's. RFC 4231 test case 2's key and message give the HMAC's known answer.
TEST(DeriveProtocolKeyTest, LabelsGiveIndependentKeys) {
  const std::string token = "a token of sixteen bytes or more";
  const std::array<uint8_t, 32> ring = DeriveProtocolKey(token, kRingKeyLabel);
  const std::array<uint8_t, 32> ps = DeriveProtocolKey(token, kPsKeyLabel);
  EXPECT_NE(ring, ps);
  EXPECT_EQ(ring, HmacSha256(token, "psring-ring-key-v1"));
  EXPECT_EQ(ps, HmacSha256(token, "psring-ps-key-v1"));
  EXPECT_EQ(Hex(DeriveProtocolKey("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_NE(DeriveProtocolKey(token + "x", kRingKeyLabel), ring);
}

TEST(WipeBytesTest, ZeroesKeyMaterial) {
  using Key = std::array<uint8_t, 32>;
  const Key zero{};
  Key key = DeriveProtocolKey("a token of sixteen bytes or more", kRingKeyLabel);
  ASSERT_NE(key, zero);
  WipeBytes(key.data(), key.size());
  EXPECT_EQ(key, zero);
  std::string token = "secret token bytes";
  WipeBytes(token.data(), token.size());
  EXPECT_EQ(token, std::string(18, '\0'));
}

struct Outcome {
  absl::StatusOr<HandshakeHello> client = absl::UnknownError("not run");
  absl::StatusOr<HandshakeHello> server = absl::UnknownError("not run");
  SessionKeys client_keys, server_keys;
};

// One handshake over a real loopback connection: the client is rank 3 of 4 and means to reach `peer_rank`,
// the server rank 0.
Outcome Handshake(const AuthConfig& client_auth, const AuthConfig& server_auth,
                  const HelloCheck& check = nullptr, int peer_rank = -1) {
  Outcome out;
  absl::StatusOr<Socket> listener = ListenTcp("127.0.0.1", 0);
  EXPECT_TRUE(listener.ok()) << listener.status();
  if (!listener.ok()) return out;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  std::thread server([&] {
    absl::StatusOr<Socket> s = AcceptTcp(*listener, deadline);
    if (!s.ok()) {
      out.server = s.status();
      return;
    }
    out.server = ServerHandshake(*s, server_auth, HandshakeHello{HandshakeProtocol::kStore, 0, 4}, check,
                                 deadline, &out.server_keys);
  });
  absl::StatusOr<Socket> c = ConnectTcp("127.0.0.1", *LocalPort(*listener), deadline);
  EXPECT_TRUE(c.ok()) << c.status();
  if (c.ok()) {
    HandshakeHello mine{HandshakeProtocol::kStore, 3, 4};
    mine.peer_rank = peer_rank;
    out.client = ClientHandshake(*c, client_auth, mine, deadline, &out.client_keys);
  }
  c = absl::UnknownError("closed");  // hang up, so a server waiting for the client's proof sees it
  server.join();
  return out;
}

TEST(HandshakeTest, SameTokenAndJobAuthenticatesBothSides) {
  const AuthConfig auth{"s3cret", "job-1"};
  Outcome o = Handshake(auth, auth);
  ASSERT_TRUE(o.client.ok()) << o.client.status();
  ASSERT_TRUE(o.server.ok()) << o.server.status();
  EXPECT_EQ(o.client->rank, 0);
  EXPECT_EQ(o.server->rank, 3);
  EXPECT_EQ(o.server->world_size, 4);
  EXPECT_EQ(o.server->job_id, "job-1");
}

TEST(HandshakeTest, NoTokenOnEitherSideStillChecksTheJob) {
  Outcome o = Handshake(AuthConfig{"", "a"}, AuthConfig{"", "a"});
  EXPECT_TRUE(o.client.ok()) << o.client.status();
  o = Handshake(AuthConfig{"", "a"}, AuthConfig{"", "b"});
  EXPECT_EQ(o.client.status().code(), absl::StatusCode::kPermissionDenied) << o.client.status();
  EXPECT_EQ(o.server.status().code(), absl::StatusCode::kPermissionDenied) << o.server.status();
  EXPECT_TRUE(absl::StrContains(o.client.status().message(), "job id mismatch")) << o.client.status();
}

TEST(HandshakeTest, WrongTokenIsRefusedOnBothSides) {
  Outcome o = Handshake(AuthConfig{"wrong", ""}, AuthConfig{"s3cret", ""});
  // The client cannot verify the server's proof, so it never sends its own: the server sees it hang up
  // right after its proof, and says what that means (not just "closed the connection").
  EXPECT_EQ(o.client.status().code(), absl::StatusCode::kUnauthenticated) << o.client.status();
  EXPECT_TRUE(absl::StrContains(o.client.status().message(), "failed to prove the auth token"));
  EXPECT_EQ(o.server.status().code(), absl::StatusCode::kUnauthenticated) << o.server.status();
  EXPECT_TRUE(absl::StrContains(o.server.status().message(), "rank 3 hung up after this side proved the auth token"))
      << o.server.status();
  EXPECT_TRUE(absl::StrContains(o.server.status().message(), "another --auth_token")) << o.server.status();
  EXPECT_FALSE(absl::StrContains(o.server.status().message(), "s3cret"));
  EXPECT_FALSE(absl::StrContains(o.client.status().message(), "s3cret"));
  EXPECT_FALSE(absl::StrContains(o.client.status().message(), "wrong"));
}

TEST(HandshakeTest, MissingTokenOnEitherSideIsRefusedWithAClearMessage) {
  Outcome o = Handshake(AuthConfig{"", ""}, AuthConfig{"s3cret", ""});
  EXPECT_EQ(o.client.status().code(), absl::StatusCode::kUnauthenticated) << o.client.status();
  EXPECT_TRUE(absl::StrContains(o.client.status().message(), "requires an auth token")) << o.client.status();
  EXPECT_TRUE(absl::StrContains(o.client.status().message(), kAuthTokenEnv)) << o.client.status();
  EXPECT_EQ(o.server.status().code(), absl::StatusCode::kUnauthenticated) << o.server.status();

  o = Handshake(AuthConfig{"s3cret", ""}, AuthConfig{"", ""});
  EXPECT_EQ(o.client.status().code(), absl::StatusCode::kUnauthenticated) << o.client.status();
  EXPECT_TRUE(absl::StrContains(o.client.status().message(), "runs without an auth token"));
  EXPECT_EQ(o.server.status().code(), absl::StatusCode::kUnauthenticated) << o.server.status();
  EXPECT_TRUE(absl::StrContains(o.server.status().message(), "rank 3 has an auth token and this job runs without one"))
      << o.server.status();
}

TEST(HandshakeTest, AnotherJobWithTheSameTokenIsRefused) {
  Outcome o = Handshake(AuthConfig{"s3cret", "job-2"}, AuthConfig{"s3cret", "job-1"});
  EXPECT_EQ(o.client.status().code(), absl::StatusCode::kPermissionDenied) << o.client.status();
  EXPECT_TRUE(absl::StrContains(o.client.status().message(), "'job-2'")) << o.client.status();
  EXPECT_TRUE(absl::StrContains(o.client.status().message(), "'job-1'")) << o.client.status();
  EXPECT_EQ(o.server.status().code(), absl::StatusCode::kPermissionDenied);
}

TEST(HandshakeTest, TheServersCheckRunsOnlyAfterTheProofAndItsVerdictReachesTheClient) {
  bool checked = false;
  HelloCheck refuse_rank_3 = [&](const HandshakeHello& h) {
    checked = true;
    return h.rank == 3 ? absl::AlreadyExistsError("rank 3 already joined") : absl::OkStatus();
  };
  Outcome o = Handshake(AuthConfig{"", ""}, AuthConfig{"s3cret", ""}, refuse_rank_3);
  EXPECT_FALSE(checked) << "an unauthenticated client reached the server's check";
  o = Handshake(AuthConfig{"s3cret", ""}, AuthConfig{"s3cret", ""}, refuse_rank_3);
  EXPECT_TRUE(checked);
  EXPECT_EQ(o.client.status().code(), absl::StatusCode::kAlreadyExists) << o.client.status();
  EXPECT_TRUE(absl::StrContains(o.client.status().message(), "rank 3 already joined"));
  EXPECT_EQ(o.server.status().code(), absl::StatusCode::kAlreadyExists);
}

TEST(HandshakeTest, GarbageInsteadOfAHelloIsRefused) {
  absl::StatusOr<Socket> listener = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::StatusOr<HandshakeHello> server = absl::UnknownError("not run");
  std::thread t([&] {
    absl::StatusOr<Socket> s = AcceptTcp(*listener, deadline);
    if (s.ok()) server = ServerHandshake(*s, AuthConfig{"s3cret", ""}, HandshakeHello{}, nullptr, deadline);
  });
  absl::StatusOr<Socket> c = ConnectTcp("127.0.0.1", *LocalPort(*listener), deadline);
  ASSERT_TRUE(c.ok());
  const std::string garbage = "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(64, 'x');
  ASSERT_TRUE(SendAll(*c, garbage.data(), garbage.size(), deadline).ok());
  t.join();
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << server.status();
}

// Issue 34: the handshake's MACs are keyed by DeriveProtocolKey(token, kRingKeyLabel), not by the token, so
// a MAC captured here cannot be checked offline against anything the parameter server (kPsKeyLabel) sends,
// and vice versa. A raw client reads the server's proof and recomputes it both ways.
TEST(HandshakeTest, TheMacsAreKeyedByTheRingKeyNotTheToken) {
  const std::string token = "a token of sixteen bytes or more";
  absl::StatusOr<Socket> listener = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool hello_seen = false;
  std::thread server([&] {
    absl::StatusOr<Socket> s = AcceptTcp(*listener, deadline);
    if (!s.ok()) return;
    ServerHandshakeSteps steps;
    steps.on_hello = [&] { hello_seen = true; };
    (void)ServerHandshake(*s, AuthConfig{token, ""}, HandshakeHello{HandshakeProtocol::kStore, 0, 4}, nullptr,
                          deadline, nullptr, &steps);
  });
  absl::StatusOr<Socket> c = ConnectTcp("127.0.0.1", *LocalPort(*listener), deadline);
  ASSERT_TRUE(c.ok());
  // The hello's documented layout (auth.cc's HelloWire): magic, version 3, protocol, rank, world size,
  // has_token, job id length, reserved, peer rank, data integrity, nonce.
  const uint32_t head[10] = {0x50534155, 3, 1, 3, 4, 1, 0, 0, static_cast<uint32_t>(-1), 1};
  std::string client_hello(reinterpret_cast<const char*>(head), sizeof(head));
  client_hello += std::string(32, '\x5a');
  ASSERT_EQ(client_hello.size(), kHelloWireBytes);
  ASSERT_TRUE(SendAll(*c, client_hello.data(), client_hello.size(), deadline).ok());
  std::string server_hello(kHelloWireBytes, '\0');
  std::array<uint8_t, 32> mac{};
  ASSERT_TRUE(RecvAll(*c, server_hello.data(), server_hello.size(), deadline).ok());
  ASSERT_TRUE(RecvAll(*c, mac.data(), mac.size(), deadline).ok());
  c = absl::UnknownError("closed");
  server.join();
  EXPECT_TRUE(hello_seen);
  const std::string transcript = absl::StrCat("psring-auth-v3 server", client_hello, server_hello);
  const std::array<uint8_t, 32> ring_key = DeriveProtocolKey(token, kRingKeyLabel);
  const absl::string_view ring_key_view(reinterpret_cast<const char*>(ring_key.data()), ring_key.size());
  EXPECT_EQ(mac, HmacSha256(ring_key_view, transcript));
  EXPECT_NE(mac, HmacSha256(token, transcript)) << "the raw token keyed the MAC";
  const std::array<uint8_t, 32> ps_key = DeriveProtocolKey(token, kPsKeyLabel);
  EXPECT_NE(mac, HmacSha256(absl::string_view(reinterpret_cast<const char*>(ps_key.data()), 32), transcript));
}

// Issue 34: each step has its own deadline. A client that sends the start of a hello and stalls is dropped
// after the step's allowance, not after the overall deadline (10 s here).
TEST(HandshakeTest, AStalledStepEndsAfterItsOwnDeadline) {
  absl::StatusOr<Socket> listener = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::StatusOr<HandshakeHello> result = absl::UnknownError("not run");
  absl::Duration took;
  std::thread server([&] {
    absl::StatusOr<Socket> s = AcceptTcp(*listener, deadline);
    if (!s.ok()) return;
    ServerHandshakeSteps steps;
    steps.step_timeout = absl::Milliseconds(200);
    const absl::Time start = absl::Now();
    result = ServerHandshake(*s, AuthConfig{"s3cret", ""}, HandshakeHello{}, nullptr, deadline, nullptr, &steps);
    took = absl::Now() - start;
  });
  absl::StatusOr<Socket> c = ConnectTcp("127.0.0.1", *LocalPort(*listener), deadline);
  ASSERT_TRUE(c.ok());
  const uint32_t start_of_hello[3] = {0x50534155, 3, 1};  // magic, version, protocol: then silence
  ASSERT_TRUE(SendAll(*c, start_of_hello, sizeof(start_of_hello), deadline).ok());
  server.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded) << result.status();
  EXPECT_LT(took, absl::Seconds(5)) << "the step waited for the overall deadline";
}

// Issue 22: the keys for common/integrity.h's tags. Both ends get the same ones, one per direction, new for
// every connection; none without a token or with --data_integrity=off; ends that disagree are refused.
TEST(SessionKeysTest, BothEndsGetTheSameKeysOnePerDirectionNewPerConnection) {
  const AuthConfig auth{"integrity-token", "job"};
  Outcome one = Handshake(auth, auth);
  ASSERT_TRUE(one.client.ok()) << one.client.status();
  ASSERT_TRUE(one.server.ok()) << one.server.status();
  ASSERT_TRUE(one.client_keys.enabled);
  ASSERT_TRUE(one.server_keys.enabled);
  EXPECT_EQ(one.client_keys.client_to_server, one.server_keys.client_to_server);
  EXPECT_EQ(one.client_keys.server_to_client, one.server_keys.server_to_client);
  EXPECT_NE(one.client_keys.client_to_server, one.client_keys.server_to_client);
  Outcome two = Handshake(auth, auth);
  ASSERT_TRUE(two.client.ok()) << two.client.status();
  EXPECT_NE(two.client_keys.client_to_server, one.client_keys.client_to_server);
}

TEST(SessionKeysTest, NoKeysWithoutATokenOrWithIntegrityOff) {
  Outcome none = Handshake(AuthConfig{"", "job"}, AuthConfig{"", "job"});
  ASSERT_TRUE(none.client.ok()) << none.client.status();
  EXPECT_FALSE(none.client_keys.enabled);
  EXPECT_FALSE(none.server_keys.enabled);
  AuthConfig off{"integrity-token", "job"};
  off.data_integrity = false;
  Outcome both_off = Handshake(off, off);
  ASSERT_TRUE(both_off.client.ok()) << both_off.client.status();
  EXPECT_FALSE(both_off.client_keys.enabled);
  EXPECT_FALSE(both_off.server_keys.enabled);
}

TEST(SessionKeysTest, EndsThatDisagreeOnIntegrityAreRefusedNamingTheFlag) {
  AuthConfig off{"integrity-token", "job"};
  off.data_integrity = false;
  Outcome mixed = Handshake(AuthConfig{"integrity-token", "job"}, off);
  ASSERT_FALSE(mixed.client.ok());
  EXPECT_TRUE(absl::StrContains(mixed.client.status().message(), "--data_integrity=off")) << mixed.client.status();
  EXPECT_FALSE(mixed.server.ok());
}

// A client that means to reach rank 2 and reaches rank 0 (a stale or forged address) stops before it sends
// its proof; one that means rank 0 gets through, and the server sees whom it meant.
TEST(PeerBindingTest, TheClientChecksTheServersRankBeforeProvingItself) {
  const AuthConfig auth{"integrity-token", "job"};
  Outcome wrong = Handshake(auth, auth, nullptr, /*peer_rank=*/2);
  ASSERT_FALSE(wrong.client.ok());
  EXPECT_EQ(wrong.client.status().code(), absl::StatusCode::kInvalidArgument) << wrong.client.status();
  EXPECT_TRUE(absl::StrContains(wrong.client.status().message(), "not rank 2")) << wrong.client.status();
  EXPECT_FALSE(wrong.server.ok()) << "the server accepted a client that never proved the token";
  Outcome right = Handshake(auth, auth, nullptr, /*peer_rank=*/0);
  EXPECT_TRUE(right.client.ok()) << right.client.status();
  ASSERT_TRUE(right.server.ok()) << right.server.status();
  EXPECT_EQ(right.server->peer_rank, 0);
}

}  // namespace
}  // namespace psring
