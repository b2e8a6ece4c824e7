// bench/model/uncertainty.h: intervals from the fit's covariance and scatter mean what they say on fresh runs,
// collapse when the data has no scatter, and decide a winner only when they do not overlap.
#include "bench/model/uncertainty.h"

#include <cmath>
#include <map>

#include "bench/model/fit.h"
#include "gtest/gtest.h"
#include "tests/bench/model/synthetic_runs.h"

namespace psring::bench::model {
namespace {

Predictor CollectiveAt(Topology topology, const Conditions& at) {
  return [topology, at](const ExchangeParams& p) -> absl::StatusOr<double> {
    return PredictCollectiveUnchecked(topology, p, at).seconds;
  };
}

// The fit of NoisyRuns(0.05, seed), once per seed (each fit measures its extrapolation too: seconds).
absl::StatusOr<proto::CostModelFile> NoisyFit(int seed) {
  static auto* fits = new std::map<int, absl::StatusOr<proto::CostModelFile>>();
  auto it = fits->find(seed);
  if (it == fits->end())
    it = fits->emplace(seed, FitModel(NoisyRuns(0.05, seed), {"host", "2026-12-01", ""})).first;
  return it->second;
}

TEST(Uncertainty, NinetyPercentIntervalsCoverFreshRunsAboutNinetyPercentOfTheTime) {
  absl::StatusOr<proto::CostModelFile> file = NoisyFit(3);
  ASSERT_TRUE(file.ok()) << file.status();
  int inside = 0, total = 0;
  for (const MeasuredRun& run : NoisyRuns(0.05, 99)) {  // same truth, fresh scatter
    if (run.topology == Topology::kRing && run.conditions.nodes == 1) continue;
    absl::StatusOr<PredictionInterval> pi =
        IntervalOf(*file, run.topology, CollectiveAt(run.topology, run.conditions), run.conditions,
                   run.conditions.bytes);
    ASSERT_TRUE(pi.ok()) << pi.status();
    EXPECT_LE(pi->lo, pi->value);
    EXPECT_LE(pi->value, pi->hi);
    inside += run.seconds >= pi->lo && run.seconds <= pi->hi;
    ++total;
  }
  // Uniform +-5 % scatter (sd 2.9 %): a 90 % normal interval of +-4.8 % holds about 95 % of it. The bound
  // leaves room for the fit's own error but fails an interval that means nothing (a point, or everything).
  const double coverage = static_cast<double>(inside) / total;
  EXPECT_GT(coverage, 0.80) << inside << " of " << total;
  EXPECT_LT(coverage, 0.995) << inside << " of " << total;
}

TEST(Uncertainty, ExactDataGivesNarrowIntervals) {
  absl::StatusOr<proto::CostModelFile> file = FitModel(SyntheticRuns(), {"host", "2026-12-01", ""});
  ASSERT_TRUE(file.ok()) << file.status();
  const Conditions at{16, 2, 8e6, 50e6, 2e-3};  // not a calibration condition
  absl::StatusOr<PredictionInterval> pi =
      IntervalOf(*file, Topology::kPsOne, CollectiveAt(Topology::kPsOne, at), at, at.bytes);
  ASSERT_TRUE(pi.ok()) << pi.status();
  EXPECT_LT(pi->rel_sd, 1e-3);
  EXPECT_NEAR(pi->hi / pi->lo, 1, 1e-2);
}

TEST(Uncertainty, TheIntervalAddsTheParametersErrorToTheScatter) {
  absl::StatusOr<proto::CostModelFile> file = NoisyFit(5);
  ASSERT_TRUE(file.ok()) << file.status();
  const proto::ExchangeModel& ring = file->exchanges(0);
  ASSERT_EQ(ring.exchange(), "ring");
  const Conditions at{6, 2, 4e6, 12.5e6, 2e-3};
  absl::StatusOr<PredictionInterval> pi =
      IntervalOf(*file, Topology::kRing, CollectiveAt(Topology::kRing, at), at, at.bytes);
  ASSERT_TRUE(pi.ok()) << pi.status();
  EXPECT_GT(pi->parameter_rel_sd, 0);
  EXPECT_NEAR(pi->rel_sd * pi->rel_sd,
              pi->parameter_rel_sd * pi->parameter_rel_sd + ring.residual_rel_sd() * ring.residual_rel_sd(), 1e-12);
  EXPECT_NEAR(pi->hi, pi->value * std::exp(kIntervalZ * pi->rel_sd), 1e-12 * pi->value);
}

// A file with both regimes' scatter: a prediction over an unlimited link (loopback) takes the loopback runs'
// scatter, one over a shaped link the shaped runs'.
TEST(Uncertainty, PredictionsOverAnUnlimitedLinkUseTheLoopbackScatter) {
  absl::StatusOr<proto::CostModelFile> file = NoisyFit(5);
  ASSERT_TRUE(file.ok()) << file.status();
  proto::ExchangeModel& ring = *file->mutable_exchanges(0);
  ring.set_residual_rel_sd(0.02);
  ring.set_loopback_residual_rel_sd(0.3);
  const Conditions loopback{4, 2, 64e6, 0, 0};
  absl::StatusOr<PredictionInterval> pi =
      IntervalOf(*file, Topology::kRing, CollectiveAt(Topology::kRing, loopback), loopback, loopback.bytes);
  ASSERT_TRUE(pi.ok()) << pi.status();
  EXPECT_NEAR(pi->rel_sd * pi->rel_sd, pi->parameter_rel_sd * pi->parameter_rel_sd + 0.3 * 0.3, 1e-12);
  const Conditions shaped{6, 2, 4e6, 12.5e6, 2e-3};
  pi = IntervalOf(*file, Topology::kRing, CollectiveAt(Topology::kRing, shaped), shaped, shaped.bytes);
  ASSERT_TRUE(pi.ok()) << pi.status();
  EXPECT_NEAR(pi->rel_sd * pi->rel_sd, pi->parameter_rel_sd * pi->parameter_rel_sd + 0.02 * 0.02, 1e-12);
  // Without the field (one regime, older files) the one scatter serves both.
  ring.clear_loopback_residual_rel_sd();
  pi = IntervalOf(*file, Topology::kRing, CollectiveAt(Topology::kRing, loopback), loopback, loopback.bytes);
  ASSERT_TRUE(pi.ok()) << pi.status();
  EXPECT_NEAR(pi->rel_sd * pi->rel_sd, pi->parameter_rel_sd * pi->parameter_rel_sd + 0.02 * 0.02, 1e-12);
}

// Beyond the calibrated coverage the interval adds the extrapolation error the calibration measured on
// itself, per dimension outside it: (log_sd_per_log_factor * log(factor))^2; inside it, or in a dimension
// without an entry, nothing.
TEST(Uncertainty, BeyondTheCoverageTheIntervalAddsTheMeasuredExtrapolationError) {
  absl::StatusOr<proto::CostModelFile> file = NoisyFit(5);
  ASSERT_TRUE(file.ok()) << file.status();
  proto::ExchangeModel& ring = *file->mutable_exchanges(0);
  ASSERT_EQ(ring.exchange(), "ring");
  ring.clear_extrapolation();
  proto::ExtrapolationScatter* n = ring.add_extrapolation();
  n->set_dimension("N");
  n->set_log_sd_per_log_factor(0.1);
  proto::ExtrapolationScatter* latency = ring.add_extrapolation();
  latency->set_dimension("latency");
  latency->set_log_sd_per_log_factor(0.05);

  const Conditions inside{6, 2, 4e6, 12.5e6, 2e-3};
  EXPECT_EQ(ExtrapolationLogVariance(*file, Topology::kRing, inside, inside.bytes), 0);
  // N = 32 against the calibrated 8 (x4), latency 80 ms against 20 ms (x4), link 10x above: no link entry.
  const Conditions beyond{32, 2, 4e6, 1250e6, 80e-3};
  const double var = ExtrapolationLogVariance(*file, Topology::kRing, beyond, beyond.bytes);
  const double expected = std::pow(0.1 * std::log(4.0), 2) + std::pow(0.05 * std::log(4.0), 2);
  EXPECT_NEAR(var, expected, 1e-12);
  proto::CostModelFile without = *file;  // the same fit, no extrapolation entries
  without.mutable_exchanges(0)->clear_extrapolation();
  absl::StatusOr<PredictionInterval> plain =
      IntervalOf(without, Topology::kRing, CollectiveAt(Topology::kRing, beyond), beyond, beyond.bytes);
  absl::StatusOr<PredictionInterval> wide =
      IntervalOf(*file, Topology::kRing, CollectiveAt(Topology::kRing, beyond), beyond, beyond.bytes);
  ASSERT_TRUE(plain.ok() && wide.ok());
  EXPECT_EQ(plain->extrapolation_rel_sd, 0);
  EXPECT_NEAR(wide->extrapolation_rel_sd, std::sqrt(expected), 1e-12);
  EXPECT_NEAR(wide->rel_sd * wide->rel_sd, plain->rel_sd * plain->rel_sd + expected, 1e-12);
  EXPECT_GT(wide->hi, plain->hi);
  EXPECT_LT(wide->lo, plain->lo);
  // Another exchange without entries widens nothing.
  EXPECT_EQ(ExtrapolationLogVariance(*file, Topology::kPsOne, beyond, beyond.bytes) > 0,
            file->exchanges(1).extrapolation_size() > 0);
}

TEST(Uncertainty, OlderFilesUseTheStandardErrorsAlone) {
  absl::StatusOr<proto::CostModelFile> file = NoisyFit(3);
  ASSERT_TRUE(file.ok()) << file.status();
  proto::CostModelFile old = *file;
  for (proto::ExchangeModel& e : *old.mutable_exchanges()) {
    e.clear_covariance_terms();
    e.clear_log_covariance();
    e.clear_residual_rel_sd();
  }
  const Conditions at{8, 2, 16e6, 12.5e6, 5e-3};
  absl::StatusOr<PredictionInterval> pi =
      IntervalOf(old, Topology::kPsDedicated, CollectiveAt(Topology::kPsDedicated, at), at, at.bytes);
  ASSERT_TRUE(pi.ok()) << pi.status();
  EXPECT_GT(pi->rel_sd, 0);  // the median residual as scatter
  EXPECT_LT(pi->lo, pi->value);
}

TEST(Uncertainty, AWinnerOnlyWhereItsIntervalClearsTheOthers) {
  auto at = [](double value, double half) { return PredictionInterval{value, value - half, value + half, 0, 0}; };
  EXPECT_EQ(ClearWinner({at(2, 0.1), at(1, 0.1), at(3, 0.1)}), 1);
  EXPECT_EQ(ClearWinner({at(2, 0.6), at(1, 0.6), at(3, 0.1)}), -1);  // 1 +- 0.6 overlaps 2 +- 0.6
  EXPECT_EQ(ClearWinner({at(1, 0.5)}), 0);
  EXPECT_EQ(ClearWinner({}), -1);
}

TEST(Uncertainty, FormatsValueAndBounds) {
  EXPECT_EQ(FormatInterval({0.0123, 0.0110, 0.0138, 0, 0}, 1e-3, 1), "12.3 [11.0, 13.8]");
}

}  // namespace
}  // namespace psring::bench::model
