// Training the MLP with a bucketed, overlapped exchange (--bucket_mb > 0) gives the same parameters as the
// flat exchange after backward: ring within 1e-5 (each bucket's ring sums in its own order), parameter
// server bit for bit with 1, 2 and 3 shards (the servers' optimizer is element-wise, so the bucketed element
// layout, each bucket sliced over all shards, changes nothing).
// Ranks are threads over the real TCP ring on loopback, or PS clients against in-process servers.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "ps/client.h"
#include "ring/ring_exchange.h"
#include "ring/thread_ranks.h"
#include "tests/ps/ps_cluster.h"
#include "trainer/exchange.h"
#include "trainer/timeline.h"
#include "trainer/train.h"

namespace psring {
namespace {

constexpr int kWorld = 2;
constexpr int kSteps = 6;
constexpr int kWarmup = 2;
// Layers of 50240, 2080 and 330 floats: a 0.001 MiB (262-float) cap, below the smallest layer, makes three
// buckets, one per layer (each layer fills its bucket at once: DDP's rule closes a bucket once it is >= the cap).
constexpr double kBucketMb = 0.001;

trainer::TrainOptions Options(double bucket_mb) {
  trainer::TrainOptions o;
  o.hidden = {64, 32};
  o.batch_size = 16;
  o.max_steps = kSteps;
  o.warmup_steps = kWarmup;
  o.dataset = "synthetic";
  o.synthetic_samples = 2048;
  o.device = "cpu";
  o.log_every = 0;
  o.evaluate = false;
  o.seed = 11;
  o.bucket_mb = bucket_mb;
  return o;
}

using Results = std::vector<trainer::TrainResult>;

// `timelines` (when set) gets one recorder per rank, which the rank's exchange and trainer record into.
using Timelines = std::vector<std::unique_ptr<trainer::Timeline>>;

Results TrainOnRing(double bucket_mb, Timelines* timelines = nullptr) {
  Results results(kWorld);
  const std::vector<absl::Status> status = ring::RunRanksOwning(
      kWorld, ring::LoopbackOptions(), [&](int rank, std::unique_ptr<ring::ProcessGroup> group) {
        ring::RingExchange exchange(std::move(group));
        if (timelines != nullptr) exchange.set_timeline((*timelines)[rank].get());
        absl::StatusOr<trainer::TrainResult> r = trainer::Train(Options(bucket_mb), &exchange);
        if (!r.ok()) return r.status();
        results[rank] = std::move(*r);
        return absl::OkStatus();
      });
  for (int r = 0; r < kWorld; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
  return results;
}

struct PsSetup {
  int shards = 1;
  ps::Mode mode = ps::Mode::kSync;
  int staleness = 0;
};

Results TrainOnPs(const PsSetup& setup, double bucket_mb, Timelines* timelines = nullptr) {
  Results results(kWorld);
  ps::ServiceOptions service;
  service.workers = kWorld;
  service.mode = setup.mode;
  service.staleness = setup.staleness;
  service.step_timeout = absl::Seconds(20);
  service.chunk_bytes = 4096;
  absl::StatusOr<ps::testing::LocalCluster> cluster = ps::testing::StartCluster(setup.shards, service);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok()) return results;
  const trainer::TrainOptions options = Options(bucket_mb);
  const std::vector<absl::Status> status = ps::testing::RunRanks(kWorld, [&](int rank) -> absl::Status {
    ps::PsClientOptions client = ps::testing::ClientOptionsFor(*cluster, rank, kWorld);
    client.hyperparameters = {options.lr, options.momentum, options.weight_decay};
    client.chunk_bytes = 4096;  // several chunks per bucket: pushes interleave with backward
    absl::StatusOr<std::unique_ptr<ps::PsExchange>> exchange = ps::PsExchange::Create(client);
    if (!exchange.ok()) return exchange.status();
    if (timelines != nullptr) (*exchange)->set_timeline((*timelines)[rank].get());
    absl::StatusOr<trainer::TrainResult> r = trainer::Train(options, exchange->get());
    if (!r.ok()) return r.status();
    results[rank] = std::move(*r);
    return absl::OkStatus();
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
  return results;
}

// What every run must report: the steps, the warm-up left out of the measured figures, the buckets.
void ExpectTimingContract(const Results& results, int buckets) {
  for (const trainer::TrainResult& r : results) {
    EXPECT_EQ(r.steps, kSteps);
    EXPECT_EQ(r.measured_steps, kSteps - kWarmup);
    EXPECT_EQ(r.buckets, buckets);
    EXPECT_GT(r.loop_seconds, 0);
    EXPECT_LE(r.loop_seconds, r.wall_seconds);
    EXPECT_LE(r.compute_seconds + r.exchange_seconds, r.loop_seconds * 1.001);
    EXPECT_GT(r.forward_seconds, 0);
    EXPECT_GT(r.backward_seconds, 0);
    EXPECT_GT(r.samples_per_second, 0);
  }
}

TEST(BucketedTrainingTest, RingTcpMatchesTheFlatExchangeWithin1e5) {
  const Results flat = TrainOnRing(0);
  const Results bucketed = TrainOnRing(kBucketMb);
  ASSERT_FALSE(HasFailure());
  ExpectTimingContract(flat, 1);
  ExpectTimingContract(bucketed, 3);
  const std::vector<float>& want = flat[0].params;
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(bucketed[r].params.size(), want.size());
    EXPECT_EQ(bucketed[r].params, bucketed[0].params) << "rank " << r << " diverged from rank 0";
    float worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::fabs(bucketed[r].params[i] - want[i]));
    }
    EXPECT_LE(worst, 1e-5f * scale) << "rank " << r << ": max |difference| " << worst;
  }
}

class PsBucketedTrainingTest : public ::testing::TestWithParam<PsSetup> {};

TEST_P(PsBucketedTrainingTest, MatchesTheFlatExchangeBitForBit) {
  const Results flat = TrainOnPs(GetParam(), 0);
  const Results bucketed = TrainOnPs(GetParam(), kBucketMb);
  ASSERT_FALSE(HasFailure());
  ExpectTimingContract(flat, 1);
  ExpectTimingContract(bucketed, 3);
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(bucketed[r].params.size(), flat[r].params.size());
    EXPECT_TRUE(bucketed[r].params == flat[r].params) << "rank " << r << " differs from the flat exchange";
  }
}

INSTANTIATE_TEST_SUITE_P(Setups, PsBucketedTrainingTest,
                         ::testing::Values(PsSetup{1, ps::Mode::kSync}, PsSetup{2, ps::Mode::kSync},
                                           PsSetup{3, ps::Mode::kSync}, PsSetup{1, ps::Mode::kAsync}),
                         [](const ::testing::TestParamInfo<PsSetup>& info) {
                           return absl::StrCat(info.param.mode == ps::Mode::kSync ? "Sync" : "AsyncStaleness0",
                                               "Shards", info.param.shards);
                         });

Timelines MakeTimelines() {
  Timelines timelines;
  for (int r = 0; r < kWorld; ++r) timelines.push_back(std::make_unique<trainer::Timeline>(r));
  return timelines;
}

// How many spans of each name a rank recorded.
std::map<std::string, int> CountSpans(const trainer::Timeline& timeline) {
  std::map<std::string, int> count;
  for (const trainer::SpanRecord& span : timeline.spans()) ++count[span.name];
  return count;
}

// Bounded staleness applies each push on arrival, in arrival order, so runs differ; bucketed steps must
// still train: the servers' update rule is the async one and the loss is finite.
TEST(BucketedTrainingTest, PsAsyncWithStalenessTrains) {
  const Results bucketed = TrainOnPs(PsSetup{2, ps::Mode::kAsync, 2}, kBucketMb);
  ASSERT_FALSE(HasFailure());
  ExpectTimingContract(bucketed, 3);
  for (const trainer::TrainResult& r : bucketed) {
    EXPECT_TRUE(std::isfinite(r.final_loss));
    for (float v : r.params) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(BucketedTrainingTest, RingTimelineHasEveryPhaseOfEveryStep) {
  Timelines timelines = MakeTimelines();
  TrainOnRing(kBucketMb, &timelines);
  ASSERT_FALSE(HasFailure());
  for (int r = 0; r < kWorld; ++r) {
    std::map<std::string, int> count = CountSpans(*timelines[r]);
    EXPECT_EQ(count["forward"], kSteps);
    for (int layer = 0; layer < 3; ++layer) EXPECT_EQ(count[absl::StrCat("backward/layer ", layer)], kSteps);
    EXPECT_EQ(count["reduce-scatter"], 3 * kSteps);  // one per bucket
    EXPECT_EQ(count["allgather"], 3 * kSteps);
    EXPECT_EQ(count["wait for exchange"], kSteps);
    EXPECT_EQ(count["optimizer"], kSteps);
  }
}

TEST(BucketedTrainingTest, PsTimelineHasPushAndPullPerShard) {
  Timelines timelines = MakeTimelines();
  const Results results = TrainOnPs(PsSetup{2, ps::Mode::kSync}, kBucketMb, &timelines);
  ASSERT_FALSE(HasFailure());
  for (int r = 0; r < kWorld; ++r) {
    const int buckets = results[r].buckets;
    ASSERT_GT(buckets, 1);
    std::map<std::string, int> count = CountSpans(*timelines[r]);
    // Every bucket is sliced over both shards (each layer has more than two elements): one push span per
    // bucket and shard, one pull per shard.
    EXPECT_EQ(count["push"], 2 * buckets * kSteps);
    EXPECT_EQ(count["pull"], 2 * kSteps);
    EXPECT_EQ(count["wait for exchange"], kSteps);
    EXPECT_EQ(count["optimizer"], 0);  // the servers own it
    std::set<std::pair<int, int>> pushes;  // (track, bucket)
    for (const trainer::SpanRecord& span : timelines[r]->spans()) {
      if (span.name == "push") pushes.insert({span.track, static_cast<int>(span.args[2].second)});
    }
    std::set<std::pair<int, int>> want;
    for (int shard = 0; shard < 2; ++shard) {
      for (int bucket = 0; bucket < buckets; ++bucket) want.insert({trainer::CommTrack(shard), bucket});
    }
    EXPECT_EQ(pushes, want);
  }
}

// The PS side of the overlap: once the last layer's bucket is reported, it is pushed without waiting for
// the rest of backward (the rest is reported only after the bucket's push span shows; bounded wait).
TEST(BucketedTrainingTest, PsPushesABucketBeforeBackwardReportsTheRest) {
  ps::ServiceOptions service;
  service.workers = 1;
  absl::StatusOr<ps::testing::LocalCluster> cluster = ps::testing::StartCluster(1, service);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ps::PsClientOptions client = ps::testing::ClientOptionsFor(*cluster, 0, 1);
  client.hyperparameters = {0.5f, 0.0f, 0.0f};
  absl::StatusOr<std::unique_ptr<ps::PsExchange>> exchange = ps::PsExchange::Create(client);
  ASSERT_TRUE(exchange.ok()) << exchange.status();
  trainer::Timeline timeline(0);
  (*exchange)->set_timeline(&timeline);
  absl::StatusOr<trainer::BucketPlan> plan =
      // A 200-float cap: the last layer (200 floats) fills bucket 0 on its own.
      trainer::BucketPlan::Create({300, 1, 500, 200}, 200.0 * sizeof(float) / trainer::kBytesPerMb);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<float> params(1001, 1.0f), grads(1001, 0.5f);
  const trainer::FloatBuffer p{params.data(), params.size()}, g{grads.data(), grads.size()};
  ASSERT_TRUE((*exchange)->SetBucketPlan(*plan, "test").ok());
  ASSERT_TRUE((*exchange)->SyncInitialParameters(p).ok());
  ASSERT_TRUE((*exchange)->BeginStep(0, g, p, *plan).ok());
  (*exchange)->GradientReady(801, 200);
  auto bucket0_pushed = [&] {
    for (const trainer::SpanRecord& span : timeline.spans()) {
      if (span.name == "push" && span.args[2].second == 0) return true;
    }
    return false;
  };
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (!bucket0_pushed() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_TRUE(bucket0_pushed()) << "bucket 0 was not pushed before the other layers were reported";
  (*exchange)->GradientReady(0, 801);
  absl::StatusOr<trainer::ExchangeOutcome> outcome = (*exchange)->FinishStep();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  // Plain SGD, lr 0.5: 1 - 0.5 * 0.5, exactly, everywhere (in trainer order again).
  EXPECT_EQ(params, std::vector<float>(1001, 0.75f));
}

}  // namespace
}  // namespace psring
