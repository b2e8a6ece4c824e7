#include "common/store.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/exit_codes.h"
#include "common/socket.h"
#include "common/tcp_store.h"
#include "gtest/gtest.h"

namespace psring {
namespace {

TEST(InMemoryStoreTest, SetGetAdd) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set("a", "1").ok());
  EXPECT_EQ(*store.Get("a", absl::Seconds(1)), "1");
  EXPECT_EQ(*store.Add("n", 2), 2);
  EXPECT_EQ(*store.Add("n", 3), 5);
  EXPECT_EQ(store.Add("a", 1).value(), 2);  // "1" is an integer
  ASSERT_TRUE(store.Set("s", "text").ok());
  EXPECT_EQ(store.Add("s", 1).status().code(), absl::StatusCode::kInvalidArgument);
  // A client's delta cannot overflow the counter (undefined behaviour in C++).
  EXPECT_EQ(store.Add("n", INT64_MAX).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*store.Add("n", 0), 5);
}

TEST(InMemoryStoreTest, GetWaitsForAWriterAndTimesOut) {
  InMemoryStore store;
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    ASSERT_TRUE(store.Set("late", "v").ok());
  });
  EXPECT_EQ(*store.Get("late", absl::Seconds(10)), "v");
  writer.join();
  absl::StatusOr<std::string> missing = store.Get("never", absl::Milliseconds(30));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(missing.status().message().find("never"), std::string::npos);
  EXPECT_EQ(store.Wait({"late", "never"}, absl::Milliseconds(30)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(store.Wait({"late"}, absl::Milliseconds(30)).ok());
}

TEST(InMemoryStoreTest, CloseWakesWaiters) {
  InMemoryStore store;
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(30));
    store.Close();
  });
  EXPECT_EQ(store.Get("k", absl::Seconds(30)).status().code(), absl::StatusCode::kUnavailable);
  closer.join();
}

std::unique_ptr<TcpStore> MakeStore(int port, bool server, absl::Duration timeout = absl::Seconds(10)) {
  TcpStoreOptions o;
  o.master_addr = "127.0.0.1";
  o.master_port = port;
  o.is_server = server;
  o.bind_addr = "127.0.0.1";
  o.timeout = timeout;
  absl::StatusOr<std::unique_ptr<TcpStore>> s = TcpStore::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(TcpStoreTest, ClientsAndServerShareKeys) {
  std::unique_ptr<TcpStore> server = MakeStore(0, true);
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  std::unique_ptr<TcpStore> a = MakeStore(port, false);
  std::unique_ptr<TcpStore> b = MakeStore(port, false);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(a->Set("from_a", std::string("bin\0ary", 7)).ok());
  EXPECT_EQ(*b->Get("from_a", absl::Seconds(5)), std::string("bin\0ary", 7));
  EXPECT_EQ(*server->Get("from_a", absl::Seconds(5)), std::string("bin\0ary", 7));
  ASSERT_TRUE(server->Set("from_0", "x").ok());
  EXPECT_EQ(*a->Get("from_0", absl::Seconds(5)), "x");
  EXPECT_EQ(*a->Add("count", 1), 1);
  EXPECT_EQ(*b->Add("count", 1), 2);
  EXPECT_EQ(*server->Add("count", 1), 3);
  // A Get blocks on the server until another client sets the key.
  std::thread late([&] {
    absl::SleepFor(absl::Milliseconds(50));
    ASSERT_TRUE(b->Set("late", "v").ok());
  });
  EXPECT_EQ(*a->Get("late", absl::Seconds(5)), "v");
  late.join();
  absl::StatusOr<std::string> missing = a->Get("never", absl::Milliseconds(50));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  // The connection still works after a timed-out Get.
  EXPECT_EQ(*a->Get("from_0", absl::Seconds(5)), "x");
}

TEST(TcpStoreTest, ClientStartedBeforeServerRetriesUntilItListens) {
  absl::StatusOr<int> free_port = FreeLoopbackPort();
  ASSERT_TRUE(free_port.ok()) << free_port.status();
  const int port = *free_port;
  std::unique_ptr<TcpStore> client;
  std::thread t([&] { client = MakeStore(port, false); });
  absl::SleepFor(absl::Milliseconds(200));
  std::unique_ptr<TcpStore> server = MakeStore(port, true);
  t.join();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(server->Set("k", "v").ok());
  EXPECT_EQ(*client->Get("k", absl::Seconds(5)), "v");
  client.reset();  // hang up first, so the server need not wait out its shutdown grace
}

TEST(TcpStoreTest, NoServerTimesOutWithAClearError) {
  TcpStoreOptions o;
  absl::StatusOr<int> free_port = FreeLoopbackPort();
  ASSERT_TRUE(free_port.ok()) << free_port.status();
  o.master_port = *free_port;
  o.timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<TcpStore>> s = TcpStore::Create(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.status().message().find("--master_addr"), std::string::npos) << s.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));  // bounded, not a hang
}

TEST(TcpStoreTest, PortInUseIsMarked) {
  absl::StatusOr<Socket> taken = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(taken.ok());
  TcpStoreOptions o;
  o.master_port = *LocalPort(*taken);
  o.is_server = true;
  o.bind_addr = "127.0.0.1";
  absl::StatusOr<std::unique_ptr<TcpStore>> s = TcpStore::Create(o);
  EXPECT_TRUE(IsPortInUse(s.status())) << s.status();
  EXPECT_NE(s.status().message().find("--master_port"), std::string::npos) << s.status();
}

TEST(TcpStoreTest, ServerGoneMakesClientsFailNotHang) {
  TcpStoreOptions o;
  o.master_port = 0;
  o.is_server = true;
  o.bind_addr = "127.0.0.1";
  o.shutdown_grace = absl::Milliseconds(100);
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<TcpStore> client = MakeStore((*server)->port(), false);
  ASSERT_NE(client, nullptr);
  std::thread stop([&] {
    absl::SleepFor(absl::Milliseconds(50));
    server->reset();
  });
  // The client waits on a key that never comes; after its grace period the server closes the connection and
  // the Get fails long before its own 60 s timeout.
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> got = client->Get("never", absl::Seconds(60));
  EXPECT_FALSE(got.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  stop.join();
}

// Something other than a psring store on the master port (an HTTP server, a stale service) answers with
// bytes that are no handshake reply: the client says so instead of reporting a corrupt stream.
TEST(TcpStoreTest, ForeignServiceOnThePortIsAClearError) {
  absl::StatusOr<Socket> listener = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  std::thread foreign([&] {
    absl::StatusOr<Socket> c = AcceptTcp(*listener, absl::Now() + absl::Seconds(20));
    if (!c.ok()) return;
    const std::string reply(64, 'H');
    (void)SendAll(*c, reply.data(), reply.size(), absl::Now() + absl::Seconds(20));
    char sink[64];
    (void)RecvAll(*c, sink, sizeof(sink), absl::Now() + absl::Seconds(5));  // until the client hangs up
  });
  TcpStoreOptions o;
  o.master_port = *LocalPort(*listener);
  o.timeout = absl::Seconds(10);
  absl::Status s = TcpStore::Create(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("not a psring rendezvous store"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--master_port"), std::string::npos) << s;
  foreign.join();
}

// After a failed job, rank 0 does not wait out the shutdown grace for a client that stays connected (a
// stalled rank): destroying the abandoned server returns although the grace is an hour.
TEST(TcpStoreTest, AbandonedServerSkipsTheShutdownGrace) {
  TcpStoreOptions o;
  o.master_port = 0;
  o.is_server = true;
  o.bind_addr = "127.0.0.1";
  o.shutdown_grace = absl::Hours(1);
  absl::StatusOr<std::unique_ptr<TcpStore>> server = TcpStore::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<TcpStore> client = MakeStore((*server)->port(), false);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Set("k", "v").ok());  // the server has a live client now
  const absl::Time start = absl::Now();
  (*server)->Abandon();
  server->reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));  // bounded, not the hour
  EXPECT_FALSE(client->Get("k", absl::Seconds(1)).ok());  // the connection is gone
}

TEST(StoreBarrierTest, AllThreadsLeaveTogether) {
  InMemoryStore store;
  constexpr int kRanks = 5;
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] { results[r] = StoreBarrier(&store, "b", kRanks, absl::Seconds(10)); });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(StoreBarrier(&store, "lonely", 2, absl::Milliseconds(30)).code(),
            absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace psring
