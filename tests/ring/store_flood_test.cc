// Issue 34, item 3: connections from the job's own address (127.0.0.1) that each send one byte and then stay
// silent, reopened as fast as the rendezvous store drops them, must not stall a 2-rank ring job. The landed
// store never evicted a connection that had sent a byte and gave each handshake 10 s, so eight such
// connections (its per-address cap) kept every rank out: measured 1.0 s -> 10.7 s. Now the oldest
// unauthenticated connection is evicted whatever it sent (those that made the least progress first), and each
// handshake step has its own short deadline.
//
// The job (RingExchange::Connect on two threads, an average and a barrier) runs without the flood, then with
// 8 and 64 flooding connections, side by side in one process; the test bounds the extra time at 2 s, the
// issue's acceptance figure (the job itself takes well under a second on loopback).
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/auth.h"
#include "common/cluster_env.h"
#include "common/socket.h"
#include "gtest/gtest.h"
#include "ring/ring_exchange.h"
#include "ring/thread_ranks.h"

namespace psring::ring {
namespace {

constexpr char kToken[] = "store-flood-test-token-0123456789";

// `connections` sockets to 127.0.0.1:port that each send one byte and stay silent; a socket the server
// closes (or that could not connect yet) is opened again at once, on one thread.
class Flood {
 public:
  Flood(int port, int connections) : port_(port), sockets_(connections) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Flood() {
    stop_ = true;
    thread_.join();
  }
  int64_t opened() const { return opened_; }

 private:
  void Open(Socket& s) {
    Socket fresh(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fresh.valid()) return;
    const timeval limit{0, 100 * 1000};  // a full backlog must not stall the refreshing of the others
    (void)::setsockopt(fresh.fd(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port_));
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (::connect(fresh.fd(), reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0) return;
    const char byte = 'U';  // the first byte of a hello's magic
    if (::send(fresh.fd(), &byte, 1, MSG_NOSIGNAL) != 1) return;
    s = std::move(fresh);
    ++opened_;
  }

  void Run() {
    std::vector<pollfd> fds(sockets_.size());
    while (!stop_) {
      for (Socket& s : sockets_) {
        if (!s.valid()) Open(s);
      }
      for (size_t i = 0; i < sockets_.size(); ++i) fds[i] = {sockets_[i].fd(), POLLIN, 0};
      if (::poll(fds.data(), fds.size(), 5) <= 0) continue;
      for (size_t i = 0; i < sockets_.size(); ++i) {
        if (fds[i].fd >= 0 && fds[i].revents != 0) sockets_[i].Close();  // dropped (EOF or reset): reopen
      }
    }
  }

  const int port_;
  std::vector<Socket> sockets_;  // only the flood's thread touches them
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> opened_{0};
  std::thread thread_;
};

struct JobRun {
  absl::Status status[2];
  absl::Duration took;
};

constexpr absl::Duration kRank1After = absl::Milliseconds(300);

// Two ranks as threads with a token: the store, the ring, an average and a barrier, then teardown.
JobRun RunJob(int port) {
  JobRun run;
  const absl::Time start = absl::Now();
  auto rank = [&](int r) {
    ClusterEnv env;
    env.rank = r;
    env.world_size = 2;
    env.master_port = port;
    RingExchangeOptions o;
    o.group = LoopbackOptions(512 << 10, absl::Seconds(30));
    o.group.tcp.auth = AuthConfig{kToken, "flood-job"};
    absl::StatusOr<std::unique_ptr<RingExchange>> ex = RingExchange::Connect(env, o);
    if (!ex.ok()) {
      run.status[r] = ex.status();
      return;
    }
    std::vector<double> v = {1.0 + r};
    absl::Status s = (*ex)->AverageMetrics(absl::MakeSpan(v));
    if (s.ok() && v[0] != 1.5) s = absl::InternalError(absl::StrCat("average ", v[0], ", expected 1.5"));
    if (s.ok()) s = (*ex)->Barrier();
    run.status[r] = s;
  };
  // Rank 1 comes after the store has listened for a while, so a flood has taken every slot it can first.
  std::thread r0(rank, 0);
  absl::SleepFor(kRank1After);
  std::thread r1(rank, 1);
  r0.join();
  r1.join();
  run.took = absl::Now() - start;
  return run;
}

TEST(StoreFloodTest, OneByteFloodsFromTheJobsAddressDelayTheJobByLessThanTwoSeconds) {
  const JobRun quiet = RunJob(FreeLoopbackPort().value());
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(quiet.status[r].ok()) << "rank " << r << ": " << quiet.status[r];
  for (int connections : {8, 64}) {
    SCOPED_TRACE(absl::StrCat(connections, " flooding connections"));
    const int port = FreeLoopbackPort().value();
    JobRun flooded;
    int64_t opened = 0;
    {
      Flood flood(port, connections);  // knocking before the store listens
      flooded = RunJob(port);
      opened = flood.opened();
    }
    for (int r = 0; r < 2; ++r) EXPECT_TRUE(flooded.status[r].ok()) << "rank " << r << ": " << flooded.status[r];
    std::printf("2-rank ring job: %.2f s without a flood, %.2f s under %d one-byte connections (%lld opened)\n",
                absl::ToDoubleSeconds(quiet.took), absl::ToDoubleSeconds(flooded.took), connections,
                static_cast<long long>(opened));
    EXPECT_GE(opened, connections) << "the flood never reached the store";
    EXPECT_LT(flooded.took - quiet.took, absl::Seconds(2));
  }
}

}  // namespace
}  // namespace psring::ring
