// The rendezvous store under hostile clients, on loopback: without the token (or with a wrong one, or
// another job's id) nothing can be read or written; unexpected ranks are refused; an announced 64 MiB key or
// value is refused before it is read or allocated; idle connections are bounded in number and time; and a
// few hundred random hostile connections from a fixed seed leave the server serving and its keys unchanged.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/auth.h"
#include "common/integrity.h"
#include "common/socket.h"
#include "common/tcp_store.h"
#include "common/tcp_store_wire.h"
#include "gtest/gtest.h"
#include "tests/testing/store_server.h"
#include "tests/testing/tamper_relay.h"

namespace psring {
namespace {

constexpr char kToken[] = "correct horse battery staple";

TcpStoreOptions ServerOptions(int world_size) { return testing::LoopbackStoreServer(world_size, kToken); }

absl::StatusOr<std::unique_ptr<TcpStore>> Client(int port, int rank, const AuthConfig& auth,
                                                 absl::Duration timeout = absl::Seconds(5)) {
  TcpStoreOptions o;
  o.master_port = port;
  o.rank = rank;
  o.auth = auth;
  o.timeout = timeout;
  return TcpStore::Create(o);
}

// Waits (bounded) until `pred` holds; false when it never did.
template <typename Pred>
bool Eventually(Pred pred, absl::Duration limit = absl::Seconds(10)) {
  const absl::Time end = absl::Now() + limit;
  while (!pred()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

int ThreadCount() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

TEST(StoreAuthTest, OnlyRanksWithTheTokenAndTheJobIdReadOrWrite) {
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(ServerOptions(4));
  ASSERT_TRUE(server.ok()) << server.status();
  TcpStore& s = **server;
  ASSERT_TRUE(s.Set("ring/addr/0", "127.0.0.1:1111 4").ok());
  const int port = s.port();

  absl::StatusOr<std::unique_ptr<TcpStore>> rank1 = Client(port, 1, AuthConfig{kToken, "job-a"});
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  EXPECT_EQ(*(*rank1)->Get("ring/addr/0", absl::Seconds(1)), "127.0.0.1:1111 4");

  struct Forger {
    std::string what;
    int rank;
    AuthConfig auth;
    absl::StatusCode code;
  };
  for (const Forger& f : {Forger{"no token", 2, {"", "job-a"}, absl::StatusCode::kUnauthenticated},
                          Forger{"wrong token", 2, {"guess", "job-a"}, absl::StatusCode::kUnauthenticated},
                          Forger{"another job", 2, {kToken, "job-b"}, absl::StatusCode::kPermissionDenied},
                          Forger{"rank that joined", 1, {kToken, "job-a"}, absl::StatusCode::kAlreadyExists},
                          Forger{"rank 0", 0, {kToken, "job-a"}, absl::StatusCode::kInvalidArgument},
                          Forger{"rank >= world", 4, {kToken, "job-a"}, absl::StatusCode::kInvalidArgument},
                          Forger{"no rank", -1, {kToken, "job-a"}, absl::StatusCode::kInvalidArgument}}) {
    SCOPED_TRACE(f.what);
    const absl::Time start = absl::Now();
    absl::StatusOr<std::unique_ptr<TcpStore>> forged = Client(port, f.rank, f.auth);
    EXPECT_EQ(forged.status().code(), f.code) << forged.status();
    const absl::Duration took = absl::Now() - start;
    EXPECT_LT(took, absl::Seconds(3)) << "refused only after a timeout";
    std::printf("%s: refused in %.1f ms\n", f.what.c_str(), absl::ToDoubleMilliseconds(took));
    EXPECT_FALSE(absl::StrContains(forged.status().message(), kToken));
  }
  // Nothing a refused client sent reached the table, and the real rank still works.
  EXPECT_EQ(*s.Get("ring/addr/0", absl::Seconds(1)), "127.0.0.1:1111 4");
  EXPECT_EQ(s.Get("ring/addr/2", absl::Milliseconds(1)).status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE((*rank1)->Set("ring/addr/1", "127.0.0.1:2222 4").ok());
  EXPECT_EQ(*s.Get("ring/addr/1", absl::Seconds(1)), "127.0.0.1:2222 4");
  EXPECT_GE(s.refused_connections(), 7);
}

// Issue 24: a rank with another token made rank 0 time out with "a rank is missing or slow (check
// --world_size)" and the store printed nothing. Now the store prints the refusal and rank 0's error names it.
TEST(StoreAuthTest, RankZeroNamesTheRefusedTokenNotTheWorldSize) {
  auto server = TcpStore::Create(ServerOptions(2));
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::string> plain = (*server)->Get("ring/fingerprint/1", absl::Milliseconds(50));
  EXPECT_TRUE(absl::StrContains(plain.status().message(), "check --world_size")) << plain.status();

  ::testing::internal::CaptureStderr();
  auto client = Client((*server)->port(), 1, AuthConfig{"another token", "job-a"});
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnauthenticated) << client.status();
  const bool counted = Eventually([&] { return (*server)->refused_connections() >= 1; });
  const std::string printed = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(counted);
  EXPECT_TRUE(absl::StrContains(printed, "rendezvous store: refused a connection: rank 1 hung up after this side "
                                         "proved the auth token"))
      << printed;

  absl::StatusOr<std::string> got = (*server)->Get("ring/fingerprint/1", absl::Milliseconds(50));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_TRUE(absl::StrContains(got.status().message(), "the store refused 1 connection")) << got.status();
  EXPECT_TRUE(absl::StrContains(got.status().message(), "another --auth_token")) << got.status();
  EXPECT_FALSE(absl::StrContains(got.status().message(), "check --world_size")) << got.status();
  EXPECT_FALSE(absl::StrContains(got.status().message(), kToken)) << got.status();
}

TEST(StoreAuthTest, RequestsWithoutAHandshakeAreNotServed) {
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(ServerOptions(0));
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<Socket> raw = ConnectTcp("127.0.0.1", (*server)->port(), absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(raw.ok());
  const std::string key = "victim", value = "evil";
  store_wire::RequestHeader req{};
  req.op = store_wire::kSet;
  req.key_len = key.size();
  req.value_len = value.size();
  req.magic = store_wire::kMagic;
  const std::string frame = std::string(reinterpret_cast<const char*>(&req), sizeof(req)) + key + value;
  (void)SendAll(*raw, frame.data(), frame.size(), absl::Now() + absl::Seconds(5));
  char byte;
  EXPECT_FALSE(RecvAll(*raw, &byte, 1, absl::Now() + absl::Seconds(5)).ok()) << "the server answered";
  EXPECT_EQ((*server)->Get("victim", absl::Milliseconds(1)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// An authenticated raw connection (the store's client refuses such sizes itself) that announces a huge key
// or value: the server answers RESOURCE_EXHAUSTED and closes without reading the payload, so eight of them
// do not grow this process by anything like 8 x 64 MiB.
TEST(StoreAuthTest, HugeKeysAndValuesAreRefusedBeforeAllocation) {
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(ServerOptions(0));
  ASSERT_TRUE(server.ok()) << server.status();
  const int64_t rss_before = ResidentBytes();
  for (int i = 0; i < 8; ++i) {
    SCOPED_TRACE(i);
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    absl::StatusOr<Socket> raw = ConnectTcp("127.0.0.1", (*server)->port(), deadline);
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(ClientHandshake(*raw, AuthConfig{kToken, "job-a"}, HandshakeHello{}, deadline).ok());
    store_wire::RequestHeader req{};
    req.op = store_wire::kSet;
    req.key_len = i % 2 == 0 ? 3 : 64u << 20;
    req.value_len = i % 2 == 0 ? 64u << 20 : 3;
    req.magic = store_wire::kMagic;
    ASSERT_TRUE(SendAll(*raw, &req, sizeof(req), deadline).ok());
    store_wire::ResponseHeader resp{};
    ASSERT_TRUE(RecvAll(*raw, &resp, sizeof(resp), deadline).ok());
    EXPECT_EQ(resp.code, static_cast<uint8_t>(absl::StatusCode::kResourceExhausted));
    std::string message(resp.len, '\0');
    ASSERT_TRUE(RecvAll(*raw, message.data(), message.size(), deadline).ok());
    EXPECT_TRUE(absl::StrContains(message, "refused")) << message;
    MacTag tag;  // the reply is tagged like every reply after the handshake
    ASSERT_TRUE(RecvAll(*raw, tag.data(), tag.size(), deadline).ok());
    char byte;
    EXPECT_EQ(RecvAll(*raw, &byte, 1, deadline).code(), absl::StatusCode::kUnavailable)
        << "the connection stays open for the payload";
  }
  EXPECT_LT(ResidentBytes() - rss_before, 32 << 20);
  // The limits are options: a small value limit refuses a value the default would take.
  TcpStoreOptions small = ServerOptions(0);
  small.max_value_bytes = 8;
  absl::StatusOr<std::unique_ptr<TcpStore>> strict = TcpStore::Create(small);
  ASSERT_TRUE(strict.ok());
  TcpStoreOptions co;
  co.master_port = (*strict)->port();
  co.auth = AuthConfig{kToken, "job-a"};
  co.max_value_bytes = 1 << 20;  // the client's own limit lets it through to the server
  absl::StatusOr<std::unique_ptr<TcpStore>> client = TcpStore::Create(co);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->Set("k", std::string(9, 'v')).code(), absl::StatusCode::kResourceExhausted);
}

// 300 connections that never say hello (issue 13: they made 307 threads): at most max_connections are served
// (threads) at once (each newer one closes an older one, issue 34), and all are closed after the first-bytes
// timeout, after which a real rank gets in.
TEST(StoreAuthTest, IdleConnectionsAreBoundedInNumberAndTime) {
  TcpStoreOptions o = ServerOptions(2);  // 4 * 2 + 16 = 24 connections by default
  o.handshake_timeout = absl::Milliseconds(500);
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const int threads_before = ThreadCount();
  std::vector<Socket> idle;
  for (int i = 0; i < 300; ++i) {
    absl::StatusOr<Socket> s = ConnectTcp("127.0.0.1", (*server)->port(), absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(s.ok()) << s.status();
    idle.push_back(std::move(*s));
  }
  ASSERT_TRUE(Eventually([&] { return (*server)->refused_connections() >= 300 - 24; }))
      << (*server)->refused_connections();
  EXPECT_LE((*server)->open_connections(), 24);
  const int extra_threads = ThreadCount() - threads_before;
  EXPECT_LE(extra_threads, 24);
  // The handshake timeout closes the rest.
  EXPECT_TRUE(Eventually([&] { return (*server)->refused_connections() == 300; }))
      << (*server)->refused_connections();
  EXPECT_TRUE(Eventually([&] { return (*server)->open_connections() == 0; }));
  std::printf("300 idle connections open: %d threads more than before them\n", extra_threads);
  absl::StatusOr<std::unique_ptr<TcpStore>> rank1 = Client((*server)->port(), 1, AuthConfig{kToken, "job-a"});
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  EXPECT_TRUE((*rank1)->Set("k", "v").ok());
}

// A few hundred hostile connections from a fixed seed: random bytes, truncated and oversized hellos, hellos
// with a wrong proof, store requests without a handshake. The server survives every one, refuses every one,
// and its keys stay as they were; a real rank is served after them.
TEST(StoreAuthTest, RandomHostileConnectionsChangeNothing) {
  TcpStoreOptions o = ServerOptions(0);
  o.handshake_timeout = absl::Milliseconds(200);  // a truncated hello is dropped after it
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  TcpStore& s = **server;
  const std::map<std::string, std::string> keys = {{"ring/addr/0", "127.0.0.1:1111 2"}, {"victim", "good"}};
  for (const auto& [k, v] : keys) ASSERT_TRUE(s.Set(k, v).ok());

  // A genuine hello (no token) to cut, corrupt and extend.
  std::string hello;
  {
    absl::StatusOr<Socket> l = ListenTcp("127.0.0.1", 0);
    ASSERT_TRUE(l.ok());
    absl::StatusOr<Socket> c = ConnectTcp("127.0.0.1", *LocalPort(*l), absl::Now() + absl::Seconds(5));
    absl::StatusOr<Socket> a = AcceptTcp(*l, absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(c.ok() && a.ok());
    std::thread client([&] {
      (void)ClientHandshake(*c, AuthConfig{"", "job-a"}, HandshakeHello{}, absl::Now() + absl::Seconds(1));
    });
    hello.resize(64 + 5);  // HelloWire + "job-a"
    ASSERT_TRUE(RecvAll(*a, hello.data(), hello.size(), absl::Now() + absl::Seconds(5)).ok());
    a = absl::UnknownError("closed");
    client.join();
  }
  store_wire::RequestHeader set{};
  set.op = store_wire::kSet;
  set.key_len = 6;
  set.value_len = 4;
  set.magic = store_wire::kMagic;
  const std::string set_frame = std::string(reinterpret_cast<const char*>(&set), sizeof(set)) + "victimevil";

  std::mt19937 rng(20261123);
  constexpr int kCases = 300;
  int kinds[6] = {};
  const absl::Time start = absl::Now();
  for (int i = 0; i < kCases; ++i) {
    const int kind = static_cast<int>(rng() % 6);
    ++kinds[kind];
    std::string bytes;
    switch (kind) {
      case 0:  // random bytes
        bytes.resize(rng() % 300);
        for (char& b : bytes) b = static_cast<char>(rng());
        break;
      case 1:  // a truncated hello
        bytes = hello.substr(0, rng() % hello.size());
        break;
      case 2: {  // a hello announcing a huge job id
        bytes = hello;
        const uint32_t huge = 0x80000000u + static_cast<uint32_t>(rng() % 1000);
        std::memcpy(bytes.data() + 24, &huge, sizeof(huge));
        break;
      }
      case 3: {  // a complete hello and a random "proof", then a store request
        bytes = hello + std::string(32, '\0');
        for (size_t j = hello.size(); j < bytes.size(); ++j) bytes[j] = static_cast<char>(rng());
        bytes += set_frame;
        break;
      }
      case 4:  // a store request without any handshake
        bytes = set_frame;
        break;
      case 5: {  // a hello with one random byte flipped
        bytes = hello;
        bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
        bytes += std::string(32, '\0') + set_frame;
        break;
      }
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    absl::StatusOr<Socket> c = ConnectTcp("127.0.0.1", s.port(), deadline);
    ASSERT_TRUE(c.ok()) << "case " << i << ": the server stopped accepting: " << c.status();
    (void)SendAll(*c, bytes.data(), bytes.size(), deadline);
    // Close at once (the server must cope with a half-sent frame), or read until the server hangs up.
    if (rng() % 2 == 0) {
      char sink[256];
      while (RecvAll(*c, sink, 1, deadline).ok()) {
      }
    }
  }
  ASSERT_TRUE(Eventually([&] { return s.refused_connections() == kCases; }))
      << s.refused_connections() << " of " << kCases << " refused";
  std::printf("%d hostile connections (kinds: %d %d %d %d %d %d) refused in %.2f s\n", kCases, kinds[0],
              kinds[1], kinds[2], kinds[3], kinds[4], kinds[5], absl::ToDoubleSeconds(absl::Now() - start));
  for (const auto& [k, v] : keys) EXPECT_EQ(*s.Get(k, absl::Seconds(1)), v) << k;
  absl::StatusOr<std::unique_ptr<TcpStore>> rank = Client(s.port(), -1, AuthConfig{kToken, "job-a"});
  ASSERT_TRUE(rank.ok()) << rank.status();
  EXPECT_EQ(*(*rank)->Get("victim", absl::Seconds(1)), "good");
}

// An authenticated rank that keeps setting new keys (issue 13: the table was unbounded) is refused once the
// table would exceed max_total_bytes; the refused Set changes nothing, the connection keeps working, and a
// key may still be overwritten with a value that fits.
TEST(StoreAuthTest, TheTableIsBoundedInTotalSize) {
  TcpStoreOptions o = ServerOptions(0);
  o.max_total_bytes = 10000;
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<TcpStore>> rank = Client((*server)->port(), -1, AuthConfig{kToken, "job-a"});
  ASSERT_TRUE(rank.ok()) << rank.status();
  const std::string value(3000, 'v');
  int stored = 0;
  absl::Status refused;
  for (int i = 0; i < 10 && refused.ok(); ++i) {
    refused = (*rank)->Set(absl::StrCat("key", i), value);
    if (refused.ok()) ++stored;
  }
  EXPECT_EQ(stored, 3);  // 3 x (4 + 3000) bytes fit in 10000, a fourth does not
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "max_total_bytes")) << refused;
  // Nothing of the refused Set was stored, and the connection still serves.
  EXPECT_EQ((*rank)->Get("key3", absl::Milliseconds(50)).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(*(*rank)->Get("key0", absl::Seconds(1)), value);
  EXPECT_TRUE((*rank)->Set("key0", std::string(3000, 'w')).ok()) << "an overwrite that fits was refused";
  EXPECT_EQ((*rank)->Add("key0", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*rank)->Add("counter", 5).ok());
  EXPECT_EQ(*(*server)->Get("key0", absl::Seconds(1)), std::string(3000, 'w'));
  // The server's own calls are bounded by the same table.
  EXPECT_EQ((*server)->Set("big", value).code(), absl::StatusCode::kResourceExhausted);
}

// Without a token and without a bind address the store listens on loopback only.
TEST(StoreAuthTest, WithoutATokenTheStoreListensOnLoopbackOnly) {
  TcpStoreOptions o;
  o.is_server = true;
  o.master_port = 0;
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::string> outward = LocalAddressToward("192.0.2.1", 9);  // TEST-NET-1: never sent to
  if (!outward.ok() || IsLoopbackHost(*outward)) GTEST_SKIP() << "no non-loopback address on this host";
  absl::StatusOr<Socket> c = ConnectTcp(*outward, (*server)->port(), absl::Now() + absl::Milliseconds(300));
  EXPECT_FALSE(c.ok()) << "reachable on " << *outward;
  absl::StatusOr<std::unique_ptr<TcpStore>> local = Client((*server)->port(), -1, AuthConfig{});
  EXPECT_TRUE(local.ok()) << local.status();
}

// Issue 22: the bytes after the handshake. On the wire, client -> server: hello (72 bytes + job id), MAC_c
// (32); server -> client: hello, MAC_s, verdict (16 bytes, no message). Then requests and replies.
constexpr int64_t kClientHandshakeBytes = 72 + 5 + 32;       // job id "job-a"
constexpr int64_t kServerHandshakeBytes = 72 + 5 + 32 + 16;
constexpr int64_t kHeaderBytes = sizeof(store_wire::RequestHeader);
static_assert(sizeof(store_wire::ResponseHeader) == kHeaderBytes, "both headers are 24 bytes");

// A byte of a request's key flipped on the way: the server refuses the request (its client learns why,
// kDataLoss), and the key it would have written is not there. Before issue 22 the server wrote "kez".
TEST(StoreIntegrityTest, AChangedRequestIsRefused) {
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(ServerOptions(0));
  ASSERT_TRUE(server.ok()) << server.status();
  testing::TamperRelay relay("127.0.0.1", (*server)->port(),
                             {kClientHandshakeBytes + kHeaderBytes + 2, /*client_to_server=*/true});
  absl::StatusOr<std::unique_ptr<TcpStore>> client = Client(relay.port(), -1, AuthConfig{kToken, "job-a"});
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::Status set = (*client)->Set("key", "value");
  EXPECT_EQ(relay.flipped(), 1);
  EXPECT_EQ(set.code(), absl::StatusCode::kDataLoss) << set;
  EXPECT_TRUE(absl::StrContains(set.message(), "integrity check")) << set;
  EXPECT_EQ((*server)->Get("key", absl::Milliseconds(50)).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ((*server)->Get("kez", absl::Milliseconds(50)).status().code(), absl::StatusCode::kDeadlineExceeded);
}

// A byte of a reply flipped on the way (the address a rank reads, say): the client's call fails with
// kDataLoss instead of returning the changed value. Before issue 22 the Get returned "vamue".
TEST(StoreIntegrityTest, AChangedReplyFailsTheCall) {
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(ServerOptions(0));
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Set("key", "value").ok());
  testing::TamperRelay relay("127.0.0.1", (*server)->port(),
                             {kServerHandshakeBytes + kHeaderBytes + 2, /*client_to_server=*/false});
  absl::StatusOr<std::unique_ptr<TcpStore>> client = Client(relay.port(), -1, AuthConfig{kToken, "job-a"});
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::string> got = (*client)->Get("key", absl::Seconds(1));
  EXPECT_EQ(relay.flipped(), 1);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << (got.ok() ? *got : got.status().ToString());
}

// With --data_integrity=off at both ends the store works as before (and a flip would go through).
TEST(StoreIntegrityTest, IntegrityOffAtBothEndsStillServes) {
  TcpStoreOptions so = ServerOptions(0);
  so.auth.data_integrity = false;
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(so);
  ASSERT_TRUE(server.ok()) << server.status();
  AuthConfig off{kToken, "job-a"};
  off.data_integrity = false;
  absl::StatusOr<std::unique_ptr<TcpStore>> client = Client((*server)->port(), -1, off);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Set("k", "v").ok());
  EXPECT_EQ(*(*client)->Get("k", absl::Seconds(1)), "v");
  // One end on, the other off: refused at the handshake, naming the flag.
  absl::StatusOr<std::unique_ptr<TcpStore>> mixed = Client((*server)->port(), -1, AuthConfig{kToken, "job-a"});
  ASSERT_FALSE(mixed.ok());
  EXPECT_TRUE(absl::StrContains(mixed.status().message(), "--data_integrity")) << mixed.status();
}

// A rank whose connection drops joins again on its next call (with the token), while a second process with
// the same rank is still refused as long as the first is connected. Before issue 22 every later call failed.
TEST(StoreIntegrityTest, ARankWhoseConnectionDropsJoinsAgain) {
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(ServerOptions(3));
  ASSERT_TRUE(server.ok()) << server.status();
  testing::TamperRelay relay("127.0.0.1", (*server)->port(), {});
  absl::StatusOr<std::unique_ptr<TcpStore>> rank1 = Client(relay.port(), 1, AuthConfig{kToken, "job-a"});
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  ASSERT_TRUE((*rank1)->Set("before", "1").ok());
  absl::StatusOr<std::unique_ptr<TcpStore>> twin = Client((*server)->port(), 1, AuthConfig{kToken, "job-a"});
  ASSERT_FALSE(twin.ok());
  EXPECT_EQ(twin.status().code(), absl::StatusCode::kAlreadyExists) << twin.status();

  relay.CutAll();
  // The call that finds the connection gone fails (it cannot know whether the server acted on it); the next
  // one joins again.
  absl::Status first = absl::OkStatus();
  for (int i = 0; i < 20 && first.ok(); ++i) {
    first = (*rank1)->Set("during", "2");
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(first.code(), absl::StatusCode::kUnavailable) << first;
  EXPECT_TRUE((*rank1)->Set("after", "3").ok());
  EXPECT_EQ(*(*rank1)->Get("before", absl::Seconds(1)), "1");
  EXPECT_EQ(relay.connections(), 2);
}

// Add on a key holding a 1 MiB non-integer: the error names the key and the size without echoing the value,
// and the client reports it (before issue 22 the 1 MiB echo made the client report "not a psring rendezvous
// store").
TEST(StoreIntegrityTest, AddOnALargeValueReportsTheRealErrorBriefly) {
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(ServerOptions(0));
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<TcpStore>> client = Client((*server)->port(), -1, AuthConfig{kToken, "job-a"});
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("big", std::string(1 << 20, 'x')).ok());
  absl::StatusOr<int64_t> added = (*client)->Add("big", 1);
  EXPECT_EQ(added.status().code(), absl::StatusCode::kInvalidArgument) << added.status().ToString().substr(0, 200);
  EXPECT_TRUE(absl::StrContains(added.status().message(), "not an integer"));
  EXPECT_TRUE(absl::StrContains(added.status().message(), "1048576 bytes"));
  EXPECT_LT(added.status().message().size(), 512u);
  EXPECT_TRUE((*client)->Set("still", "served").ok());
}

// A socket to 127.0.0.1:port from the source address `from` (another loopback address: another host as
// far as the server's per-source cap is concerned).
absl::StatusOr<Socket> ConnectFrom(const char* from, int port) {
  Socket s(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in local{};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, from, &local.sin_addr);
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot bind ", from));
  }
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr);
  if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) != 0) {
    return absl::UnavailableError("connect failed");
  }
  return s;
}

// 64 silent connections refreshed continuously, half of them from another source address: the store holds
// at most max_connections_per_source of those handshaking at once, and three ranks still join within a 2 s
// timeout each (counted: no rank fails).
TEST(StoreIntegrityTest, ASilentFloodDoesNotKeepRanksOut) {
  TcpStoreOptions o = ServerOptions(4);
  o.refusals_logged = 0;
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  std::atomic<bool> stop{false};
  std::atomic<int> opened{0};
  std::vector<std::thread> flood;
  for (int f = 0; f < 4; ++f) {
    flood.emplace_back([&, f] {
      const char* from = f % 2 == 0 ? "127.0.0.1" : "127.0.0.2";
      std::vector<Socket> mine(16);
      uint32_t seed = 777u + f;
      while (!stop) {
        for (Socket& s : mine) {
          seed = seed * 1103515245u + 12345u;
          if (s.valid() && seed % 8 != 0) continue;
          s.Close();
          absl::StatusOr<Socket> c = ConnectFrom(from, port);
          if (c.ok()) {
            s = std::move(*c);
            ++opened;
          }
        }
        absl::SleepFor(absl::Milliseconds(25));
      }
    });
  }
  ASSERT_TRUE(Eventually([&] { return opened >= 64; }));
  absl::SleepFor(absl::Milliseconds(200));
  std::vector<absl::StatusOr<std::unique_ptr<TcpStore>>> ranks;
  for (int r = 1; r < 4; ++r) ranks.push_back(Client(port, r, AuthConfig{kToken, "job-a"}, absl::Seconds(2)));
  const int open = (*server)->open_connections();
  stop = true;
  for (auto& t : flood) t.join();
  int failed = 0;
  for (auto& r : ranks) {
    if (!r.ok()) {
      ++failed;
      ADD_FAILURE() << r.status();
    }
  }
  EXPECT_EQ(failed, 0);
  // Two sources of handshaking strangers at 8 each, and the three ranks.
  EXPECT_LE(open, 2 * 8 + 3);
}

}  // namespace
}  // namespace psring
