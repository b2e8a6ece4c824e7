// The straggler model (bench/model/straggler_model.h): order statistics against closed forms (uniform,
// exponential, the injected stretch), the sync step as E[T(max)], and the simulated backup workers and async
// PS in the cases where their answer is known exactly. No processes, no clocks.
#include "bench/model/straggler_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace psring::bench::model {
namespace {

constexpr int kFine = 8192;  // quadrature nodes for the closed-form checks

TEST(NormalTest, QuantileInvertsCdf) {
  EXPECT_NEAR(NormalQuantile(0.975), 1.959963984540054, 1e-9);
  EXPECT_NEAR(NormalQuantile(0.5), 0, 1e-12);
  for (double p : {1e-8, 0.01, 0.3, 0.7, 0.99, 1 - 1e-8})
    EXPECT_NEAR(NormalCdf(NormalQuantile(p)), p, 1e-12 + 1e-9 * p);
}

TEST(OrderStatisticTest, UniformCdfsAreClosedForms) {
  const std::vector<FactorDistribution> ranks(5, FactorDistribution::Uniform(0, 1));
  for (double x : {0.1, 0.5, 0.9}) {
    EXPECT_NEAR(OrderStatisticCdf(ranks, 5, x), std::pow(x, 5), 1e-12);          // max
    EXPECT_NEAR(OrderStatisticCdf(ranks, 1, x), 1 - std::pow(1 - x, 5), 1e-12);  // min
    // second largest: at most one of five above x
    EXPECT_NEAR(OrderStatisticCdf(ranks, 4, x), std::pow(x, 5) + 5 * (1 - x) * std::pow(x, 4), 1e-12);
  }
  EXPECT_EQ(OrderStatisticCdf(ranks, 0, 0.5), 0);
  EXPECT_EQ(OrderStatisticCdf(ranks, 6, 0.5), 0);
}

TEST(OrderStatisticTest, UniformMeansAreKOverNPlusOne) {
  for (int n : {1, 2, 4, 7}) {
    const std::vector<FactorDistribution> ranks(n, FactorDistribution::Uniform(0, 1));
    for (int k = 1; k <= n; ++k) {
      absl::StatusOr<double> e = ExpectedOrderStatistic(ranks, k, kFine);
      ASSERT_TRUE(e.ok()) << e.status();
      EXPECT_NEAR(*e, static_cast<double>(k) / (n + 1), 1e-5) << "k = " << k << " of " << n;
    }
  }
}

TEST(OrderStatisticTest, ExponentialMeansAreHarmonicSums) {
  const double rate = 2;
  for (int n : {1, 3, 8}) {
    const std::vector<FactorDistribution> ranks(n, FactorDistribution::Exponential(rate));
    for (int k = 1; k <= n; ++k) {
      double want = 0;  // E[X_(k)] = sum_{i = n-k+1}^{n} 1 / (i rate)
      for (int i = n - k + 1; i <= n; ++i) want += 1.0 / (i * rate);
      absl::StatusOr<double> e = ExpectedOrderStatistic(ranks, k, kFine);
      ASSERT_TRUE(e.ok()) << e.status();
      // The midpoint rule misses a little of the unbounded tail: (1 - ln 2) / (count * rate) at most.
      EXPECT_NEAR(*e, want, 1e-4) << "k = " << k << " of " << n;
    }
  }
}

TEST(OrderStatisticTest, DifferentRanksMaxOfTwoUniforms) {
  // max(U(0,1), U(0,2)): F = x^2 / 2 on [0, 1], x / 2 on [1, 2]; E = 13 / 12.
  const std::vector<FactorDistribution> ranks = {FactorDistribution::Uniform(0, 1),
                                                 FactorDistribution::Uniform(0, 2)};
  absl::StatusOr<double> e = ExpectedOrderStatistic(ranks, 2, kFine);
  ASSERT_TRUE(e.ok());
  EXPECT_NEAR(*e, 13.0 / 12, 1e-5);
}

TEST(OrderStatisticTest, StretchHasTheInjectedMean) {
  // E[f max(1, e^{sigma Z})] = f (1/2 + e^{sigma^2 / 2} Phi(sigma)).
  for (double sigma : {0.1, 0.3, 1.0}) {
    const double want = 1.5 * (0.5 + std::exp(sigma * sigma / 2) * NormalCdf(sigma));
    absl::StatusOr<double> e = ExpectedOrderStatistic({FactorDistribution::Stretch(1.5, sigma)}, 1, kFine);
    ASSERT_TRUE(e.ok());
    EXPECT_NEAR(*e, want, 2e-3 * want) << sigma;
  }
  // The closed-form moments against the quadrature of X and X^2.
  for (const FactorDistribution& d : {FactorDistribution::Stretch(2, 0.4), FactorDistribution::Uniform(1, 3),
                                      FactorDistribution::Exponential(0.5)}) {
    absl::StatusOr<std::vector<double>> nodes = OrderStatisticNodes({d}, 1, kFine);
    ASSERT_TRUE(nodes.ok());
    double sum = 0, sum_sq = 0;
    for (double x : *nodes) {
      sum += x;
      sum_sq += x * x;
    }
    const double mean = sum / nodes->size();
    EXPECT_NEAR(d.Mean(), mean, 2e-3 * mean);
    EXPECT_NEAR(d.Variance(), sum_sq / nodes->size() - mean * mean, 1e-2 * d.Variance());
  }
  // Half the mass at exactly the factor.
  EXPECT_EQ(FactorDistribution::Stretch(2, 0.3).Cdf(2), 0.5);
  EXPECT_EQ(FactorDistribution::Stretch(2, 0.3).Cdf(1.99), 0);
  EXPECT_EQ(FactorDistribution::Stretch(2, 0.3).Quantile(0.4), 2);
}

TEST(OrderStatisticTest, MaxOfStretchesWithASlowRank) {
  // Two ranks, no noise: the max is the slow rank's factor. With noise the max of N equal stretches has
  // CDF Phi(ln x / sigma)^N: check E against a direct integral, E = 1 + int_1^inf (1 - F(x)) dx.
  std::vector<FactorDistribution> ranks = {FactorDistribution::Stretch(1, 0),
                                           FactorDistribution::Stretch(3, 0)};
  absl::StatusOr<double> e = ExpectedOrderStatistic(ranks, 2);
  ASSERT_TRUE(e.ok());
  EXPECT_DOUBLE_EQ(*e, 3);
  const double sigma = 0.3;
  ranks.assign(4, FactorDistribution::Stretch(1, sigma));
  double integral = 1, dx = 1e-4;
  for (double x = 1 + dx / 2; x < 10; x += dx)
    integral += (1 - std::pow(NormalCdf(std::log(x) / sigma), 4)) * dx;
  e = ExpectedOrderStatistic(ranks, 4, kFine);
  ASSERT_TRUE(e.ok());
  EXPECT_NEAR(*e, integral, 1e-4);
}

TEST(OrderStatisticTest, RejectsBadInput) {
  EXPECT_EQ(ExpectedOrderStatistic({}, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpectedOrderStatistic({FactorDistribution::Uniform(0, 1)}, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpectedOrderStatistic({FactorDistribution::Uniform(1, 1)}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpectedOrderStatistic({FactorDistribution::Exponential(-1)}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OrderStatisticNodes({FactorDistribution::Uniform(0, 1)}, 1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A flat step: forward 10 ms, backward 20 ms, then one collective of 1 MB on 100 MB/s links with 1 ms
// latency.
class StragglerStepTest : public ::testing::Test {
 protected:
  const ExchangeParams params_{1e-4, 1, 0, 0};
  Conditions conditions_ = [] {
    Conditions c;
    c.nodes = 4;
    c.link_bytes_per_second = 1e8;
    c.latency_s = 1e-3;
    return c;
  }();
  const StepShape shape_ = FlatStep(0.010, 0.020, 1e6);

  double Collective(Topology t) const {
    Conditions c = conditions_;
    c.bytes = 1e6;
    return PredictCollective(t, params_, c)->seconds;
  }
  // x_in: half the collective's throughput time, what a PS takes in from early pushes.
  double PushHalf(Topology t) const {
    Conditions c = conditions_;
    c.bytes = 1e6;
    const CollectiveTime ct = *PredictCollective(t, params_, c);
    return std::max({ct.link_s, ct.window_s, ct.cpu_s}) / 2;
  }
};

TEST_F(StragglerStepTest, NoStragglerIsTheCalibratedStep) {
  absl::StatusOr<StragglerStep> t = PredictStragglerStep(Topology::kRing, params_, conditions_, shape_, {});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(t->step_s, 0.030 + Collective(Topology::kRing), 1e-12);
  EXPECT_NEAR(t->step_s, t->unperturbed_step_s, 1e-12);
  EXPECT_NEAR(t->sd_s, 0, 1e-12);
}

TEST_F(StragglerStepTest, SyncWaitsForTheSlowestDraw) {
  StragglerConditions s;
  s.injected.slow_rank = 2;
  s.injected.factor = 4;
  absl::StatusOr<StragglerStep> t = PredictStragglerStep(Topology::kRing, params_, conditions_, shape_, s);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(t->step_s, 4 * 0.030 + Collective(Topology::kRing), 1e-9);
  // The PS takes in the three early pushes while rank 2 computes: of the push half of its throughput time
  // only rank 2's quarter is left after it.
  t = PredictStragglerStep(Topology::kPsOne, params_, conditions_, shape_, s);
  ASSERT_TRUE(t.ok()) << t.status();
  const double x_in = PushHalf(Topology::kPsOne);
  EXPECT_GT(x_in, 0.001);
  EXPECT_NEAR(t->step_s, 4 * 0.030 + Collective(Topology::kPsOne) - 0.75 * x_in, 1e-9);
  // With noise on every rank: a flat step is E[max] x compute + the collective.
  s.injected.noise_sigma = 0.3;
  t = PredictStragglerStep(Topology::kRing, params_, conditions_, shape_, s);
  ASSERT_TRUE(t.ok());
  const double e_max = *ExpectedOrderStatistic(RankFactors(s.injected, 4), 4);
  EXPECT_GT(e_max, 4);
  EXPECT_NEAR(t->step_s, e_max * 0.030 + Collective(Topology::kRing), 1e-9);
  EXPECT_GT(t->sd_s, 0);
  // Pauses every 10 steps of 50 ms add 5 ms a step.
  s.injected.pause_every = 10;
  s.injected.pause_s = 0.05;
  absl::StatusOr<StragglerStep> paused =
      PredictStragglerStep(Topology::kRing, params_, conditions_, shape_, s);
  ASSERT_TRUE(paused.ok());
  EXPECT_NEAR(paused->step_s - t->step_s, 0.005, 1e-12);
}

TEST_F(StragglerStepTest, BucketedStepHidesPartOfTheWait) {
  // Two buckets; the straggler delays both releases, so the step is T(max) of the stretched shape, which is
  // never more than compute x factor + the flat exchange.
  const StepShape bucketed{0.010, 0.020, {{0.005, 5e5}, {0.020, 5e5}}};
  StragglerConditions s;
  s.injected.slow_rank = 0;
  s.injected.factor = 2;
  absl::StatusOr<StragglerStep> t = PredictStragglerStep(Topology::kRing, params_, conditions_, bucketed, s);
  ASSERT_TRUE(t.ok());
  absl::StatusOr<StepTime> stretched =
      PredictStep(Topology::kRing, params_, conditions_, StretchedShape(bucketed, 2));
  ASSERT_TRUE(stretched.ok());
  EXPECT_NEAR(t->step_s, stretched->step_s, 1e-12);
  EXPECT_LE(t->step_s, 0.060 + Collective(Topology::kRing) + 1e-12);
}

TEST_F(StragglerStepTest, BackupWorkersLeaveAPersistentStragglerBehind) {
  // Factor 4 without noise, B = 1: the three others close every step, the servers taking in their three
  // pushes (3/4 of x_in); the slow rank's pushes are all dropped and it runs at its own pace, its push alone
  // on the servers. The harness reports the slowest rank.
  StragglerConditions s;
  s.injected.slow_rank = 1;
  s.injected.factor = 4;
  s.rule = StepRule::kBackup;
  s.backup_workers = 1;
  s.runs = 3;
  absl::StatusOr<StragglerStep> t = PredictStragglerStep(Topology::kPsOne, params_, conditions_, shape_, s);
  ASSERT_TRUE(t.ok()) << t.status();
  const double x = Collective(Topology::kPsOne), x_in = PushHalf(Topology::kPsOne);
  const double t1 = 0.030 + x, t4 = 0.120 + x;
  // The slow rank's push may find the servers busy with the others' (waiting behind at most three), and
  // delays the next quorum by at most its own quarter when it comes first.
  EXPECT_GE(t->cluster_step_s, t1 - x_in / 4 - 1e-9);
  EXPECT_LE(t->cluster_step_s, t1 + 1e-9);
  EXPECT_NEAR(t->rank_step_s[0], t->cluster_step_s, 1e-9);
  EXPECT_GE(t->rank_step_s[1], t4 - 3 * x_in / 4 - 1e-9);
  EXPECT_LE(t->rank_step_s[1], t4 + 1e-9);
  EXPECT_NEAR(t->step_s, t->rank_step_s[1], 1e-12);
  // Equal ranks without noise: the quorum closes before the last push is in; that rank is answered at once.
  s.injected.slow_rank = -1;
  t = PredictStragglerStep(Topology::kPsOne, params_, conditions_, shape_, s);
  ASSERT_TRUE(t.ok());
  EXPECT_NEAR(t->cluster_step_s, t1 - x_in / 4, 1e-9);
  EXPECT_LE(t->step_s, t1 + 1e-9);
  EXPECT_GE(t->step_s, t1 - x_in / 4 - 1e-9);
}

TEST_F(StragglerStepTest, BackupQuorumWithNoiseIsFasterThanSync) {
  StragglerConditions s;
  s.injected.noise_sigma = 0.5;
  absl::StatusOr<StragglerStep> sync =
      PredictStragglerStep(Topology::kPsOne, params_, conditions_, shape_, s);
  s.rule = StepRule::kBackup;
  s.backup_workers = 1;
  absl::StatusOr<StragglerStep> backup =
      PredictStragglerStep(Topology::kPsOne, params_, conditions_, shape_, s);
  ASSERT_TRUE(sync.ok() && backup.ok());
  EXPECT_LT(backup->cluster_step_s, sync->step_s);
  EXPECT_GT(backup->cluster_step_s, sync->unperturbed_step_s - PushHalf(Topology::kPsOne));
  // Deterministic: the same call gives the same figures, bit for bit.
  absl::StatusOr<StragglerStep> again =
      PredictStragglerStep(Topology::kPsOne, params_, conditions_, shape_, s);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->step_s, backup->step_s);
  EXPECT_EQ(again->rank_step_s, backup->rank_step_s);
}

TEST_F(StragglerStepTest, AsyncRanksKeepTheirOwnPaceWithinTheStalenessBound) {
  StragglerConditions s;
  s.injected.slow_rank = 3;
  s.injected.factor = 4;
  s.rule = StepRule::kAsync;
  s.staleness = 1000;  // never binds
  s.steps = 20;
  s.runs = 2;
  absl::StatusOr<StragglerStep> t =
      PredictStragglerStep(Topology::kPsColocated, params_, conditions_, shape_, s);
  ASSERT_TRUE(t.ok()) << t.status();
  const double x = Collective(Topology::kPsColocated), x_in = PushHalf(Topology::kPsColocated);
  const double t1 = 0.030 + x, t4 = 0.120 + x;
  // Each rank's own step, less the part of x_in its push does not queue for.
  EXPECT_GE(t->rank_step_s[0], t1 - 0.75 * x_in - 1e-9);
  EXPECT_LE(t->rank_step_s[0], t1 + 1e-9);
  EXPECT_GE(t->rank_step_s[3], t4 - 0.75 * x_in - 1e-9);
  EXPECT_LE(t->rank_step_s[3], t4 + 1e-9);
  EXPECT_GT(t->rank_step_s[3], 3 * t->rank_step_s[0]);
  double rate = 0;
  for (double r : t->rank_step_s) rate += 1 / r;
  EXPECT_NEAR(t->cluster_step_s, 4 / rate, 1e-9);
  // Staleness 0: the fast ranks wait for the slow one at every step.
  s.staleness = 0;
  t = PredictStragglerStep(Topology::kPsColocated, params_, conditions_, shape_, s);
  ASSERT_TRUE(t.ok());
  EXPECT_GT(t->rank_step_s[0], 0.9 * t->rank_step_s[3]);
}

TEST_F(StragglerStepTest, RejectsWhatNoRunCanBe) {
  StragglerConditions s;
  s.injected.slow_rank = 4;  // N = 4
  s.injected.factor = 2;
  EXPECT_EQ(PredictStragglerStep(Topology::kRing, params_, conditions_, shape_, s).status().code(),
            absl::StatusCode::kInvalidArgument);
  s.injected.slow_rank = 0;
  s.rule = StepRule::kBackup;
  s.backup_workers = 1;
  EXPECT_EQ(PredictStragglerStep(Topology::kRing, params_, conditions_, shape_, s).status().code(),
            absl::StatusCode::kInvalidArgument);
  s.backup_workers = 4;
  EXPECT_EQ(PredictStragglerStep(Topology::kPsOne, params_, conditions_, shape_, s).status().code(),
            absl::StatusCode::kInvalidArgument);
  s.backup_workers = 1;
  s.injected.factor = 0.5;
  EXPECT_EQ(PredictStragglerStep(Topology::kPsOne, params_, conditions_, shape_, s).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psring::bench::model
