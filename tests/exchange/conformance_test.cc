// One suite, every GradientExchange: the local exchange, the TCP ring and the parameter server go through
// the same cases (tests/testing/exchange_ranks.h runs their ranks as threads). What differs between them is
// only what they report through the interface (who owns the optimizer), never their names.
#include <algorithm>
#include <atomic>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "proto/results.pb.h"
#include "tests/testing/exchange_ranks.h"
#include "trainer/exchange.h"
#include "trainer/gradient_only.h"

namespace psring::testing {
namespace {

using trainer::GradientExchange;

absl::Status Check(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

template <typename Ranks>
class ExchangeConformanceTest : public ::testing::Test {
 protected:
  // N = 1 .. 4, as far as the exchange goes.
  static std::vector<int> WorldSizes() {
    std::vector<int> sizes;
    for (int n = 1; n <= std::min(4, Ranks::kMaxWorldSize); ++n) sizes.push_back(n);
    return sizes;
  }

  static void RunAndExpectOk(int world_size, size_t num_params, const RankBody& body) {
    SCOPED_TRACE(absl::StrCat("N=", world_size, " params=", num_params));
    const std::vector<absl::Status> statuses = Ranks::Run(world_size, num_params, body);
    ASSERT_EQ(statuses.size(), static_cast<size_t>(world_size));
    for (int r = 0; r < world_size; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  }
};

struct KindName {
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, LocalRanks>) return "Local";
    if (std::is_same_v<T, RingRanks>) return "RingTcp";
    if (std::is_same_v<T, PsThreeShardRanks>) return "ParameterServerThreeShards";
    return "ParameterServer";
  }
};

using ExchangeKinds = ::testing::Types<LocalRanks, RingRanks, PsRanks, PsThreeShardRanks>;
TYPED_TEST_SUITE(ExchangeConformanceTest, ExchangeKinds, KindName);

// Sizes not divisible by N (or by the two PS shards), a single float, and a few floats: fewer than the ring
// has ranks and far below one segment or chunk.
TYPED_TEST(ExchangeConformanceTest, GradientOnlyMatchesTheClosedFormExactly) {
  for (int n : TestFixture::WorldSizes()) {
    for (size_t count : {size_t{1}, size_t{3}, size_t{1001}}) {
      TestFixture::RunAndExpectOk(n, count, [&](int rank, GradientExchange* exchange) -> absl::Status {
        trainer::GradientOnlyOptions options;
        options.bytes = count * sizeof(float) + 3;  // a partial float is dropped
        options.warmup_steps = 1;
        options.steps = 3;
        absl::StatusOr<proto::WorkerResult> result = trainer::RunGradientOnly(options, exchange);
        if (!result.ok()) return result.status();
        RETURN_IF_ERROR(Check(result->wrong() == 0, absl::StrCat(result->wrong(), " wrong")));
        RETURN_IF_ERROR(Check(result->steps() == 3 && result->rank() == rank && result->world_size() == n &&
                                  result->exchange() == exchange->name(),
                              result->DebugString()));
        RETURN_IF_ERROR(Check(result->bytes() == count * sizeof(float), result->DebugString()));
        // A network exchange moves payload in every measured step once there is someone to talk to.
        const bool networked = n > 1 || exchange->optimizer().owner == trainer::OptimizerOwner::kServer;
        return Check((result->bytes_sent() > 0) == networked && (result->bytes_received() > 0) == networked,
                     result->DebugString());
      });
    }
  }
}

TYPED_TEST(ExchangeConformanceTest, ExchangeOutcomeFollowsTheOptimizerOwner) {
  for (int n : TestFixture::WorldSizes()) {
    TestFixture::RunAndExpectOk(n, 5, [&](int rank, GradientExchange* exchange) -> absl::Status {
      std::vector<float> params = {1, 2, 3, 4, 5}, grads = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
      const trainer::FloatBuffer p{params.data(), params.size()}, g{grads.data(), grads.size()};
      RETURN_IF_ERROR(exchange->SyncInitialParameters(p));
      absl::StatusOr<trainer::ExchangeOutcome> outcome = exchange->Exchange(0, g, p);
      if (!outcome.ok()) return outcome.status();
      const trainer::OptimizerInfo optimizer = exchange->optimizer();
      if (optimizer.owner == trainer::OptimizerOwner::kTrainer) {
        // Every rank sent 0.5: the mean is 0.5, the parameters are the trainer's to step.
        RETURN_IF_ERROR(
            Check(*outcome == trainer::ExchangeOutcome::kGradientsAveraged, "trainer-owned: averaged"));
        RETURN_IF_ERROR(
            Check(grads == std::vector<float>(5, 0.5f) && params == std::vector<float>({1, 2, 3, 4, 5}),
                  "mean gradient, untouched parameters"));
        return Check(absl::IsFailedPrecondition(exchange->PullParameters(p)), "no parameters to pull");
      }
      RETURN_IF_ERROR(
          Check(*outcome == trainer::ExchangeOutcome::kParametersUpdated, "server-owned: parameters"));
      // One step of the servers' SGD on the mean 0.5 from the synchronised values.
      std::vector<float> expected = {1, 2, 3, 4, 5}, velocity(5, 0.0f);
      trainer::SgdMomentumStep(optimizer.server_hyperparameters, grads.data(), expected.data(),
                               velocity.data(), 5);
      RETURN_IF_ERROR(Check(params == expected, "parameters after one server step"));
      std::vector<float> pulled(5);
      RETURN_IF_ERROR(exchange->Barrier());
      RETURN_IF_ERROR(exchange->PullParameters({pulled.data(), 5}));
      return Check(pulled == expected, absl::StrCat("rank ", rank, ": pulled parameters"));
    });
  }
}

// The bucketed step (BeginStep / GradientReady / FinishStep) leaves exactly what the flat Exchange leaves,
// over three steps: flat, bucketed with layers reported last first (as backward does), and bucketed with
// layers reported first to last (buckets then become ready all at the end). The values are the
// gradient-only ones, whose mean every exchange computes exactly, so the comparison is exact.
TYPED_TEST(ExchangeConformanceTest, BucketedStepMatchesTheFlatExchange) {
  // 1001 floats in four layers; a one-float cap (every layer fills its bucket at once) gives one bucket per
  // layer, the first of 200 floats, one of a single float.
  const std::vector<size_t> layers = {300, 1, 500, 200};
  constexpr size_t kCount = 1001;
  const double bucket_mb = sizeof(float) / trainer::kBytesPerMb;
  absl::StatusOr<trainer::BucketPlan> plan = trainer::BucketPlan::Create(layers, bucket_mb);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buckets().size(), 4u);
  for (int n : TestFixture::WorldSizes()) {
    TestFixture::RunAndExpectOk(n, kCount, [&](int rank, GradientExchange* exchange) -> absl::Status {
      std::vector<float> params(kCount), grads(kCount), expected(kCount), velocity(kCount, 0.0f), mean(kCount);
      for (size_t i = 0; i < kCount; ++i) {
        params[i] = 0.5f + 0.001f * static_cast<float>(i % 97);
        mean[i] = trainer::GradientOnlyMean(i);
      }
      const trainer::FloatBuffer p{params.data(), kCount}, g{grads.data(), kCount};
      RETURN_IF_ERROR(exchange->SetBucketPlan(*plan, "the test's plan"));
      RETURN_IF_ERROR(exchange->SyncInitialParameters(p));
      expected = params;
      for (int64_t step = 0; step < 3; ++step) {
        for (size_t i = 0; i < kCount; ++i) grads[i] = trainer::GradientOnlyValue(rank, n, i);
        absl::StatusOr<trainer::ExchangeOutcome> outcome;
        if (step == 0) {
          outcome = exchange->Exchange(step, g, p);
        } else {
          RETURN_IF_ERROR(exchange->BeginStep(step, g, p, *plan));
          std::vector<trainer::FloatRange> ranges;
          size_t offset = 0;
          for (size_t size : layers) {
            ranges.push_back({offset, size});
            offset += size;
          }
          if (step == 1) std::reverse(ranges.begin(), ranges.end());
          for (const trainer::FloatRange& r : ranges) exchange->GradientReady(r.offset, r.count);
          outcome = exchange->FinishStep();
        }
        if (!outcome.ok()) return outcome.status();
        const trainer::OptimizerInfo optimizer = exchange->optimizer();
        if (optimizer.owner == trainer::OptimizerOwner::kTrainer) {
          RETURN_IF_ERROR(Check(*outcome == trainer::ExchangeOutcome::kGradientsAveraged, "averaged"));
          RETURN_IF_ERROR(Check(grads == mean, absl::StrCat("step ", step, ": mean gradient")));
        } else {
          RETURN_IF_ERROR(Check(*outcome == trainer::ExchangeOutcome::kParametersUpdated, "parameters"));
          trainer::SgdMomentumStep(optimizer.server_hyperparameters, mean.data(), expected.data(),
                                   velocity.data(), kCount);
          RETURN_IF_ERROR(Check(params == expected, absl::StrCat("step ", step, ": server parameters")));
        }
      }
      if (exchange->optimizer().owner == trainer::OptimizerOwner::kServer) {
        std::vector<float> pulled(kCount);
        RETURN_IF_ERROR(exchange->Barrier());
        RETURN_IF_ERROR(exchange->PullParameters({pulled.data(), kCount}));
        RETURN_IF_ERROR(Check(pulled == expected, "pulled parameters in trainer order"));
      }
      return absl::OkStatus();
    });
  }
}

// A layer reported twice, or a backward that never reports one, fails the step with a clear error instead
// of hanging or exchanging a half-written gradient. World size 1, where no peer is left waiting.
TYPED_TEST(ExchangeConformanceTest, BucketedStepRejectsBadReports) {
  TestFixture::RunAndExpectOk(1, 10, [&](int, GradientExchange* exchange) -> absl::Status {
    if (!exchange->SupportsBuckets()) return absl::OkStatus();  // the flat fallback ignores the reports
    std::vector<float> params(10, 1.0f), grads(10, 0.5f);
    const trainer::FloatBuffer p{params.data(), 10}, g{grads.data(), 10};
    absl::StatusOr<trainer::BucketPlan> plan = trainer::BucketPlan::Create({4, 6}, 1e-6);
    if (!plan.ok()) return plan.status();
    RETURN_IF_ERROR(exchange->SetBucketPlan(*plan, "the test's plan"));
    RETURN_IF_ERROR(exchange->SyncInitialParameters(p));
    RETURN_IF_ERROR(exchange->BeginStep(0, g, p, *plan));
    exchange->GradientReady(4, 6);
    absl::StatusOr<trainer::ExchangeOutcome> missing = exchange->FinishStep();
    RETURN_IF_ERROR(Check(absl::IsFailedPrecondition(missing.status()) &&
                              absl::StrContains(missing.status().message(), "GradientReady"),
                          missing.status().ToString()));
    return absl::OkStatus();
  });
}

// Replay mode: a model's layers (sizes not divisible by N, one single float) replayed with buckets smaller
// than some layers, so several buckets and a layer bigger than the cap occur; every element checked. DDP's
// rule with an 800-float cap: [7, 1000] (the big layer closes the bucket it joins), then [1, 300, 5] left.
TYPED_TEST(ExchangeConformanceTest, ReplayWithBucketsMatchesTheClosedFormExactly) {
  const std::vector<size_t> sizes = {5, 300, 1, 1000, 7};
  for (int n : TestFixture::WorldSizes()) {
    size_t total = 0;
    for (size_t s : sizes) total += s;
    TestFixture::RunAndExpectOk(n, total, [&](int rank, GradientExchange* exchange) -> absl::Status {
      trainer::GradientOnlyOptions options;
      for (size_t l = 0; l < sizes.size(); ++l) {
        options.layers.push_back({absl::StrCat("layer", l), sizes[l], absl::Microseconds(100 * (l + 1)),
                                  absl::Microseconds(200 * (l + 1))});
      }
      options.bucket_mb = 800.0 * sizeof(float) / trainer::kBytesPerMb;
      options.warmup_steps = 1;
      options.steps = 3;
      absl::StatusOr<proto::WorkerResult> result = trainer::RunGradientOnly(options, exchange);
      if (!result.ok()) return result.status();
      RETURN_IF_ERROR(Check(result->wrong() == 0, absl::StrCat(result->wrong(), " wrong")));
      RETURN_IF_ERROR(Check(result->bytes() == total * sizeof(float), result->DebugString()));
      RETURN_IF_ERROR(Check(result->buckets() == 2 && result->bucket_mb() == options.bucket_mb,
                            result->DebugString()));
      // Three measured steps of 1.5 ms forward and 3 ms backward waits. The spans they are summed from end at
      // deadlines accumulated from the step's start, so the calls between them come off: under a sanitizer on
      // a loaded machine the spans shrink (4.35 ms of backward for 9 ms of waits was seen), so only that both
      // were counted holds.
      return Check(result->forward_s() > 0 && result->backward_s() > 0 &&
                       result->compute_s() == result->forward_s() + result->backward_s(),
                   result->DebugString());
    });
  }
}

TYPED_TEST(ExchangeConformanceTest, AverageMetricsGivesEveryRankTheMean) {
  for (int n : TestFixture::WorldSizes()) {
    TestFixture::RunAndExpectOk(n, 1, [&](int rank, GradientExchange* exchange) -> absl::Status {
      float param = 1;
      RETURN_IF_ERROR(exchange->SyncInitialParameters({&param, 1}));
      std::vector<double> values = {0.5 * rank, 10.0, -3.0 * rank};
      RETURN_IF_ERROR(exchange->AverageMetrics(absl::MakeSpan(values)));
      const double mean_rank = (n - 1) / 2.0;
      RETURN_IF_ERROR(
          Check(values[0] == 0.5 * mean_rank && values[1] == 10.0 && values[2] == -3.0 * mean_rank,
                absl::StrCat("means ", values[0], " ", values[1], " ", values[2])));
      std::vector<double> none;
      return exchange->AverageMetrics(absl::MakeSpan(none));
    });
  }
}

TYPED_TEST(ExchangeConformanceTest, BarrierWaitsForEveryRank) {
  for (int n : TestFixture::WorldSizes()) {
    std::atomic<int> arrived{0};
    TestFixture::RunAndExpectOk(n, 1, [&](int rank, GradientExchange* exchange) -> absl::Status {
      float param = 1;
      RETURN_IF_ERROR(exchange->SyncInitialParameters({&param, 1}));
      absl::SleepFor(absl::Milliseconds(30 * rank));  // the last rank comes late
      ++arrived;
      RETURN_IF_ERROR(exchange->Barrier());
      return Check(arrived == n, absl::StrCat("rank ", rank, " passed the barrier with ", arrived.load(),
                                              " of ", n, " ranks there"));
    });
  }
}

TYPED_TEST(ExchangeConformanceTest, SyncInitialParametersLeavesEveryRankWithTheSameValues) {
  constexpr size_t kCount = 333;
  for (int n : TestFixture::WorldSizes()) {
    std::vector<std::vector<float>> synced(n);
    TestFixture::RunAndExpectOk(n, kCount, [&](int rank, GradientExchange* exchange) -> absl::Status {
      std::vector<float> params(kCount);
      for (size_t i = 0; i < kCount; ++i) params[i] = static_cast<float>(i) + 1000.0f * rank;
      RETURN_IF_ERROR(exchange->SyncInitialParameters({params.data(), kCount}));
      synced[rank] = params;
      return absl::OkStatus();
    });
    // Every value is some rank's offer (the ring takes rank 0's, each PS shard the first rank to register
    // with it), and every rank holds the same ones.
    ASSERT_EQ(synced[0].size(), kCount);
    for (size_t i = 0; i < kCount; ++i) {
      const float offer = (synced[0][i] - static_cast<float>(i)) / 1000.0f;
      ASSERT_TRUE(offer == static_cast<int>(offer) && offer >= 0 && offer < n) << i << ": " << synced[0][i];
    }
    for (int r = 1; r < n; ++r) EXPECT_EQ(synced[r], synced[0]) << "rank " << r;
  }
}

}  // namespace
}  // namespace psring::testing
