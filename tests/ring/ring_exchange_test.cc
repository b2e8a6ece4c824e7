// RingExchange beyond the contract every exchange shares (tests/exchange/conformance_test.cc): connecting
// through the TCP rendezvous store as ring_worker does, and a bucket moving while backward is still running.
#include "ring/ring_exchange.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster_env.h"
#include "common/socket.h"
#include "gtest/gtest.h"
#include "ring/thread_ranks.h"
#include "trainer/exchange.h"
#include "trainer/timeline.h"

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

// Issue 25: ranks started without a local rank (--rank/--world_size only) all picked GPU 0. Connect now
// derives it from the ranks that share a host before anyone selects a GPU: here every rank is on this host.
TEST(RingExchangeTest, DerivesTheLocalRankFromTheRanksSharingAHost) {
  constexpr int kRanks = 3;
  absl::StatusOr<int> free_port = FreeLoopbackPort();
  ASSERT_TRUE(free_port.ok()) << free_port.status();
  std::vector<absl::Status> status(kRanks);
  std::vector<int> local(kRanks, -1);
  std::vector<std::string> source(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      ClusterEnv env;  // local_rank 0, local_rank_source "": nobody said
      env.rank = r;
      env.world_size = kRanks;
      env.master_port = *free_port;
      RingExchangeOptions o;
      o.group = LoopbackOptions();
      o.select_gpu = [&, r](int local_rank, const std::string& from) -> absl::StatusOr<std::string> {
        local[r] = local_rank;
        source[r] = from;
        return std::string();  // no GPU: the TCP ring
      };
      absl::StatusOr<std::unique_ptr<RingExchange>> ex = RingExchange::Connect(env, o);
      status[r] = ex.ok() ? (*ex)->Barrier() : ex.status();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    EXPECT_EQ(local[r], r) << "rank " << r;
    EXPECT_NE(source[r].find("through the store"), std::string::npos) << source[r];
  }
}

// The overlap itself: once the last layer's bucket is reported, it is allreduced on the communication
// thread without waiting for the rest of backward (here, the rest is reported only after the bucket's
// allgather shows in the timeline; a flat exchange would never get there, and the wait is bounded).
TEST(RingExchangeTest, BucketMovesBeforeBackwardReportsTheRest) {
  constexpr int kRanks = 2;
  const std::vector<size_t> layers = {300, 1, 500, 200};
  constexpr size_t kCount = 1001;
  absl::StatusOr<trainer::BucketPlan> plan =
      trainer::BucketPlan::Create(layers, 200.0 * sizeof(float) / trainer::kBytesPerMb);  // the last layer alone
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buckets()[0], (trainer::FloatRange{801, 200}));
  const std::vector<absl::Status> status = RunRanksOwning(
      kRanks, LoopbackOptions(), [&](int rank, std::unique_ptr<ProcessGroup> group) -> absl::Status {
        RingExchange exchange(std::move(group));
        trainer::Timeline timeline(rank);
        exchange.set_timeline(&timeline);
        // Rank r sends r + 1 everywhere: the mean is 1.5, exactly.
        std::vector<float> grads(kCount, static_cast<float>(rank + 1)), params(kCount, 0.0f);
        const trainer::FloatBuffer g{grads.data(), kCount}, p{params.data(), kCount};
        if (absl::Status s = exchange.BeginStep(0, g, p, *plan); !s.ok()) return s;
        exchange.GradientReady(801, 200);
        auto bucket0_moved = [&] {
          for (const trainer::SpanRecord& span : timeline.spans()) {
            if (span.name == "allgather" && span.args.size() >= 2 && span.args[1].second == 0) return true;
          }
          return false;
        };
        const absl::Time give_up = absl::Now() + absl::Seconds(20);
        while (!bucket0_moved() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
        const bool moved = bucket0_moved();
        exchange.GradientReady(0, 801);
        absl::StatusOr<trainer::ExchangeOutcome> outcome = exchange.FinishStep();
        if (!outcome.ok()) return outcome.status();
        if (!moved) return absl::InternalError("bucket 0 did not move before the other layers were reported");
        for (float v : grads) {
          if (v != 1.5f) return absl::InternalError(absl::StrCat("gradient ", v, ", expected the mean 1.5"));
        }
        return absl::OkStatus();
      });
  for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
}

}  // namespace
}  // namespace psring::ring
