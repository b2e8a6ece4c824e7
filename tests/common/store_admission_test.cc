// Issue 34, item 3: which handshaking connections the rendezvous store keeps under its caps. The landed store
// never evicted a connection that had sent a byte and gave a handshake 10 s, so eight one-byte connections
// from a rank's address kept that rank out for 10 s; it also capped the job's own hosts like strangers. Now,
// over a cap, the connection with the least progress goes (nothing sent, then part of a hello, then a whole
// hello), the oldest first; each handshake step has its own deadline; and the hosts ranks authenticated from
// are exempt from the per-address cap. (The 2-rank job under a refreshed flood: tests/ring/store_flood_test.)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/auth.h"
#include "common/socket.h"
#include "common/tcp_store.h"
#include "gtest/gtest.h"
#include "tests/testing/store_server.h"

namespace psring {
namespace {

constexpr char kToken[] = "store-admission-test-token";

TcpStoreOptions ServerOptions(int world_size) {
  TcpStoreOptions o = testing::LoopbackStoreServer(world_size, kToken);
  o.refusals_logged = 0;
  return o;
}

absl::StatusOr<std::unique_ptr<TcpStore>> Client(int port, int rank, absl::Duration timeout) {
  TcpStoreOptions o;
  o.master_port = port;
  o.rank = rank;
  o.auth = AuthConfig{kToken, "job-a"};
  o.timeout = timeout;
  return TcpStore::Create(o);
}

template <typename Pred>
bool Eventually(Pred pred, absl::Duration limit = absl::Seconds(10)) {
  const absl::Time end = absl::Now() + limit;
  while (!pred()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// A connection to 127.0.0.1:port from source address `from` (another loopback address is another host as far
// as the store's per-address cap goes) that sends `bytes` and then nothing.
Socket ConnectFrom(const char* from, int port, const std::string& bytes) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, from, &local.sin_addr);
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr);
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      ::connect(s.fd(), reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) != 0) {
    ADD_FAILURE() << "cannot connect from " << from << ": " << std::strerror(errno);
    return Socket();
  }
  if (!bytes.empty()) {
    EXPECT_TRUE(SendAll(s, bytes.data(), bytes.size(), absl::Now() + absl::Seconds(5)).ok());
  }
  return s;
}

// True when the store closed `s` (EOF or reset) within `wait`, draining what it sent before.
bool ClosedWithin(const Socket& s, absl::Duration wait) {
  const absl::Time end = absl::Now() + wait;
  char sink[512];
  while (absl::Now() < end) {
    pollfd p{s.fd(), POLLIN, 0};
    if (::poll(&p, 1, 10) <= 0) continue;
    if (::recv(s.fd(), sink, sizeof(sink), MSG_DONTWAIT) <= 0) return true;
  }
  return false;
}

// A whole client hello (auth.cc's HelloWire layout, version 3) for job "job-a": the store answers it and then
// waits for the client's proof, which never comes.
std::string WholeHello() {
  const uint32_t head[10] = {0x50534155, 3, 1, static_cast<uint32_t>(-1), 0, 1, 5, 0,
                             static_cast<uint32_t>(-1), 1};
  return std::string(reinterpret_cast<const char*>(head), sizeof(head)) + std::string(32, 'n') + "job-a";
}

// Eight connections from the rank's own address that sent a byte and stalled: the rank gets in at once
// (before: refused until their 10 s handshakes ran out).
TEST(StoreAdmissionTest, OneByteConnectionsDoNotKeepARankOut) {
  TcpStoreOptions o = ServerOptions(2);
  o.first_bytes_timeout = absl::Seconds(30);
  o.handshake_step_timeout = absl::Seconds(30);
  o.handshake_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<Socket> stalled;
  for (int i = 0; i < o.max_connections_per_source; ++i) {
    stalled.push_back(ConnectFrom("127.0.0.1", (*server)->port(), "U"));
  }
  ASSERT_TRUE(Eventually([&] { return (*server)->open_connections() == o.max_connections_per_source; }));
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<TcpStore>> rank1 = Client((*server)->port(), 1, absl::Seconds(5));
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_TRUE((*rank1)->Set("k", "v").ok());
  // The oldest stalled connection made room.
  EXPECT_TRUE(ClosedWithin(stalled.front(), absl::Seconds(5)));
}

// Over the per-address cap the least advanced connection goes: one that sent a whole hello outlives newer
// ones that sent a byte, which replace each other.
TEST(StoreAdmissionTest, ConnectionsThatSentLessAreClosedFirst) {
  TcpStoreOptions o = ServerOptions(2);
  o.max_connections_per_source = 2;
  o.first_bytes_timeout = absl::Seconds(30);
  o.handshake_step_timeout = absl::Seconds(30);
  o.handshake_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  Socket hello = ConnectFrom("127.0.0.2", port, WholeHello());
  // The store's answer (its hello and proof) says it has read the whole hello.
  std::string answer(kHelloWireBytes + 5 + 32, '\0');
  ASSERT_TRUE(RecvAll(hello, answer.data(), answer.size(), absl::Now() + absl::Seconds(5)).ok());
  std::vector<Socket> bytes;
  for (int i = 0; i < 4; ++i) {
    bytes.push_back(ConnectFrom("127.0.0.2", port, "U"));
    // The first fills the cap; each later one closes the previous one, never the one with the hello.
    ASSERT_TRUE(Eventually([&] { return (*server)->refused_connections() == i; })) << i;
  }
  EXPECT_FALSE(ClosedWithin(hello, absl::Milliseconds(300))) << "the connection with a whole hello was closed";
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(ClosedWithin(bytes[i], absl::Seconds(5))) << i;
  EXPECT_FALSE(ClosedWithin(bytes[3], absl::Milliseconds(100)));
}

// Each step has its own deadline: a connection that sent its whole hello and never proves the token is closed
// after handshake_step_timeout, well before handshake_timeout.
TEST(StoreAdmissionTest, AStalledStepIsClosedAfterTheStepTimeout) {
  TcpStoreOptions o = ServerOptions(2);
  o.handshake_step_timeout = absl::Milliseconds(300);
  o.handshake_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const absl::Time start = absl::Now();
  Socket hello = ConnectFrom("127.0.0.1", (*server)->port(), WholeHello());
  EXPECT_TRUE(ClosedWithin(hello, absl::Seconds(10)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(Eventually([&] { return (*server)->refused_connections() == 1; }));
}

// A host a rank authenticated from is exempt from the per-address cap (a job's other ranks connect from it);
// a stranger's address is still capped.
TEST(StoreAdmissionTest, KnownHostsAreExemptFromThePerAddressCap) {
  TcpStoreOptions o = ServerOptions(3);
  o.max_connections_per_source = 2;
  o.first_bytes_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  absl::StatusOr<std::unique_ptr<TcpStore>> rank1 = Client(port, 1, absl::Seconds(5));  // from 127.0.0.1
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  std::vector<Socket> silent;
  for (int i = 0; i < 4; ++i) silent.push_back(ConnectFrom("127.0.0.1", port, ""));
  ASSERT_TRUE(Eventually([&] { return (*server)->open_connections() == 1 + 4; }))
      << (*server)->open_connections();
  for (int i = 0; i < 4; ++i) silent.push_back(ConnectFrom("127.0.0.2", port, ""));
  ASSERT_TRUE(Eventually([&] { return (*server)->refused_connections() == 2; }));
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ((*server)->open_connections(), 1 + 4 + 2);
  EXPECT_TRUE((*rank1)->Set("still", "served").ok());
}

}  // namespace
}  // namespace psring
