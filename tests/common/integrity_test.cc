// common/integrity.h's tags and the keys common/auth.h's handshake derives for them (issue 22): a tag
// depends on every byte, the sequence number and the key; both ends of a connection get the same keys, one
// per direction, new for every connection, and none without a token or with --data_integrity=off; the
// handshake binds the rank a client means to reach.
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/auth.h"
#include "common/integrity.h"
#include "common/socket.h"
#include "gtest/gtest.h"

namespace psring {
namespace {

DirectionKey Key(uint8_t fill) {
  DirectionKey k;
  k.fill(fill);
  return k;
}

TEST(MessageMacTest, TheTagCoversEveryByteTheSequenceAndTheKey) {
  const std::string message(100000, 'm');
  MessageMac a(Key(1)), b(Key(1));
  const MacTag first = a.Next({message});
  // The same bytes cut into other parts give the same tag: only the concatenation counts.
  EXPECT_EQ(b.Next({absl::string_view(message).substr(0, 17), absl::string_view(message).substr(17)}), first);
  // The next message of the same bytes gets another tag (sequence 1): a replayed message fails.
  EXPECT_NE(a.Next({message}), first);
  EXPECT_EQ(a.sequence(), 2u);

  for (size_t at : {size_t{0}, size_t{15}, size_t{16}, message.size() - 1}) {
    std::string changed = message;
    changed[at] ^= 1;
    MessageMac c(Key(1));
    EXPECT_FALSE(c.Check({changed}, first)) << "a flip at byte " << at << " went unnoticed";
  }
  MessageMac other_key(Key(2));
  EXPECT_FALSE(other_key.Check({message}, first));
  MessageMac shorter(Key(1));
  EXPECT_FALSE(shorter.Check({absl::string_view(message).substr(1)}, first));
  MessageMac same(Key(1));
  EXPECT_TRUE(same.Check({message}, first));
  // Empty messages are tagged too (a ring segment of zero elements).
  MessageMac e1(Key(3)), e2(Key(3));
  EXPECT_TRUE(e2.Check({}, e1.Next({})));
}

struct Ends {
  absl::StatusOr<HandshakeHello> client = absl::UnknownError("not run");
  absl::StatusOr<HandshakeHello> server = absl::UnknownError("not run");
  SessionKeys client_keys, server_keys;
};

// One handshake on loopback: a server of rank 1 and a client of rank 0 that means to reach `peer_rank`.
Ends Shake(const AuthConfig& client_auth, const AuthConfig& server_auth, int peer_rank = -1) {
  Ends out;
  absl::StatusOr<Socket> listener = ListenTcp("127.0.0.1", 0);
  if (!listener.ok()) return out;
  absl::StatusOr<int> port = LocalPort(*listener);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  std::thread server([&] {
    absl::StatusOr<Socket> s = AcceptTcp(*listener, deadline);
    if (s.ok()) {
      out.server = ServerHandshake(*s, server_auth, HandshakeHello{HandshakeProtocol::kRing, 1, 2}, nullptr,
                                   deadline, &out.server_keys);
    }
  });
  absl::StatusOr<Socket> c = ConnectTcp("127.0.0.1", *port, deadline);
  if (c.ok()) {
    HandshakeHello mine{HandshakeProtocol::kRing, 0, 2};
    mine.peer_rank = peer_rank;
    out.client = ClientHandshake(*c, client_auth, mine, deadline, &out.client_keys);
  }
  c = absl::UnknownError("closed");  // the server sees a hang-up, not a stall, if the client refused
  server.join();
  return out;
}

TEST(SessionKeysTest, BothEndsGetTheSameKeysOnePerDirectionNewPerConnection) {
  const AuthConfig auth{"integrity-token", "job"};
  Ends one = Shake(auth, auth);
  ASSERT_TRUE(one.client.ok()) << one.client.status();
  ASSERT_TRUE(one.server.ok()) << one.server.status();
  ASSERT_TRUE(one.client_keys.enabled);
  ASSERT_TRUE(one.server_keys.enabled);
  EXPECT_EQ(one.client_keys.client_to_server, one.server_keys.client_to_server);
  EXPECT_EQ(one.client_keys.server_to_client, one.server_keys.server_to_client);
  EXPECT_NE(one.client_keys.client_to_server, one.client_keys.server_to_client);
  Ends two = Shake(auth, auth);
  ASSERT_TRUE(two.client.ok()) << two.client.status();
  EXPECT_NE(two.client_keys.client_to_server, one.client_keys.client_to_server);
}

TEST(SessionKeysTest, NoKeysWithoutATokenOrWithIntegrityOff) {
  Ends none = Shake(AuthConfig{"", "job"}, AuthConfig{"", "job"});
  ASSERT_TRUE(none.client.ok()) << none.client.status();
  EXPECT_FALSE(none.client_keys.enabled);
  EXPECT_FALSE(none.server_keys.enabled);
  AuthConfig off{"integrity-token", "job"};
  off.data_integrity = false;
  Ends both_off = Shake(off, off);
  ASSERT_TRUE(both_off.client.ok()) << both_off.client.status();
  EXPECT_FALSE(both_off.client_keys.enabled);
  EXPECT_FALSE(both_off.server_keys.enabled);
}

TEST(SessionKeysTest, EndsThatDisagreeOnIntegrityAreRefusedNamingTheFlag) {
  AuthConfig off{"integrity-token", "job"};
  off.data_integrity = false;
  Ends mixed = Shake(AuthConfig{"integrity-token", "job"}, off);
  ASSERT_FALSE(mixed.client.ok());
  EXPECT_TRUE(absl::StrContains(mixed.client.status().message(), "--data_integrity=off")) << mixed.client.status();
  EXPECT_FALSE(mixed.server.ok());
}

// A client that means to reach rank 2 and reaches rank 1 (a stale or forged address) stops before it sends
// its proof; one that means rank 1 gets through.
TEST(PeerBindingTest, TheClientChecksTheServersRankBeforeProvingItself) {
  const AuthConfig auth{"integrity-token", "job"};
  Ends wrong = Shake(auth, auth, /*peer_rank=*/2);
  ASSERT_FALSE(wrong.client.ok());
  EXPECT_EQ(wrong.client.status().code(), absl::StatusCode::kInvalidArgument) << wrong.client.status();
  EXPECT_TRUE(absl::StrContains(wrong.client.status().message(), "not rank 2")) << wrong.client.status();
  EXPECT_FALSE(wrong.server.ok()) << "the server accepted a client that never proved the token";
  Ends right = Shake(auth, auth, /*peer_rank=*/1);
  EXPECT_TRUE(right.client.ok()) << right.client.status();
  ASSERT_TRUE(right.server.ok()) << right.server.status();
  EXPECT_EQ(right.server->peer_rank, 1);
}

}  // namespace
}  // namespace psring
