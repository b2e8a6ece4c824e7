// RingExchange as the trainer sees it: the GradientExchange contract over the TCP ring (ranks as threads).
#include "ring/ring_exchange.h"

#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cluster_env.h"
#include "common/socket.h"
#include "gtest/gtest.h"
#include "ring/thread_ranks.h"
#include "trainer/exchange.h"

namespace psring::ring {
namespace {

absl::Status Expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

TEST(RingExchangeTest, ImplementsTheGradientExchangeContract) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 1001;
  std::vector<absl::Status> status =
      RunRanksOwning(kRanks, LoopbackOptions(64), [&](int rank, std::unique_ptr<ProcessGroup> group) {
        RingExchange ex(std::move(group));
        if (ex.name() != "ring-tcp" || ex.rank() != rank || ex.world_size() != kRanks ||
            ex.AcceptsDeviceMemory()) {
          return absl::InternalError("identity");
        }
        // Every rank starts from rank 0's parameters.
        std::vector<float> params(kCount), grads(kCount);
        for (size_t i = 0; i < kCount; ++i) params[i] = static_cast<float>(i) + 1000.0f * rank;
        absl::Status s = ex.SyncInitialParameters({params.data(), kCount});
        if (!s.ok()) return s;
        for (size_t i = 0; i < kCount; ++i) {
          if (params[i] != static_cast<float>(i)) return absl::InternalError(absl::StrCat("param ", i));
        }
        // Exchange leaves the mean gradient and asks the trainer to step.
        for (size_t i = 0; i < kCount; ++i) grads[i] = static_cast<float>(3 * i + rank);
        absl::StatusOr<trainer::ExchangeOutcome> out =
            ex.Exchange(0, {grads.data(), kCount}, {params.data(), kCount});
        if (!out.ok()) return out.status();
        s = Expect(*out == trainer::ExchangeOutcome::kGradientsAveraged, "outcome");
        if (!s.ok()) return s;
        for (size_t i = 0; i < kCount; ++i) {
          // (3i + 0 + 3i + 1 + 3i + 2) / 3 = 3i + 1, exact.
          if (grads[i] != static_cast<float>(9 * i + 3) * (1.0f / 3))
            return absl::InternalError(absl::StrCat("grad ", i));
        }
        std::vector<double> metrics = {0.5 * rank, 10.0};
        s = ex.AverageMetrics(absl::MakeSpan(metrics));
        if (!s.ok()) return s;
        s = Expect(metrics[0] == 0.5 && metrics[1] == 10.0, "metrics");
        if (!s.ok()) return s;
        return ex.Barrier();
      });
  for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
}

TEST(RingExchangeTest, ConnectsThroughTheTcpStore) {
  // What ring_worker does: rank 0 serves the store on master_addr:master_port, all ranks connect.
  constexpr int kRanks = 2;
  absl::StatusOr<Socket> probe = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(probe.ok());
  const int port = *LocalPort(*probe);
  probe->Close();
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
