// common/auth.h: HMAC-SHA256 against RFC 4231's vectors, and the handshake between two ends of a real
// loopback connection with every kind of mismatch (token, no token, job id, the server's own check).
#include "common/auth.h"

#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
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
  setenv(kAuthTokenEnv, "from-env", 1);
  setenv(kJobIdEnv, "job-env", 1);
  EXPECT_EQ(AuthConfigFrom("", "")->token, "from-env");
  EXPECT_EQ(AuthConfigFrom("", "")->job_id, "job-env");
  EXPECT_EQ(AuthConfigFrom("flag", "j")->token, "flag");
  EXPECT_EQ(AuthConfigFrom("flag", "j")->job_id, "j");
  unsetenv(kAuthTokenEnv);
  unsetenv(kJobIdEnv);
  EXPECT_EQ(AuthConfigFrom("", "")->token, "");
  EXPECT_EQ(AuthConfigFrom("", std::string(kMaxJobIdBytes + 1, 'j')).status().code(),
            absl::StatusCode::kInvalidArgument);
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
