// RingExchange beyond the contract every exchange shares (tests/exchange/conformance_test.cc): connecting
// through the TCP rendezvous store as ring_worker does.
#include "ring/ring_exchange.h"

#include <memory>
#include <thread>
#include <vector>

#include "common/cluster_env.h"
#include "common/socket.h"
#include "gtest/gtest.h"
#include "ring/thread_ranks.h"
#include "trainer/exchange.h"

namespace psring::ring {
namespace {

TEST(RingExchangeTest, ConnectsThroughTheTcpStore) {
  // What ring_worker does: rank 0 serves the store on master_addr:master_port, all ranks connect.
  constexpr int kRanks = 2;
  absl::StatusOr<int> free_port = FreeLoopbackPort();
  ASSERT_TRUE(free_port.ok()) << free_port.status();
  const int port = *free_port;
  std::vector<absl::Status> status(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      ClusterEnv env;
      env.rank = r;
      env.world_size = kRanks;
      env.master_port = port;
      RingExchangeOptions o;
      o.group = LoopbackOptions();
      absl::StatusOr<std::unique_ptr<RingExchange>> ex = RingExchange::Connect(env, o);
      if (!ex.ok()) {
        status[r] = ex.status();
        return;
      }
      if ((*ex)->name() != "ring-tcp" || (*ex)->AcceptsDeviceMemory() ||
          (*ex)->optimizer().owner != trainer::OptimizerOwner::kTrainer) {
        status[r] = absl::InternalError("identity");
        return;
      }
      std::vector<double> v = {1.0 + r};
      status[r] = (*ex)->AverageMetrics(absl::MakeSpan(v));
      if (status[r].ok() && v[0] != 1.5) status[r] = absl::InternalError("average");
      if (status[r].ok()) status[r] = (*ex)->Barrier();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
}

}  // namespace
}  // namespace psring::ring
