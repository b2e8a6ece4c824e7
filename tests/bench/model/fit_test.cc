#include "bench/model/fit.h"

#include <algorithm>
#include <cmath>

#include "gtest/gtest.h"
#include "tests/bench/model/synthetic_runs.h"

namespace psring::bench::model {
namespace {

TEST(FitTest, RecoversKnownParametersOfEveryExchange) {
  const std::vector<MeasuredRun> runs = SyntheticRuns();
  for (Topology topology : AllTopologies()) {
    SCOPED_TRACE(TopologyName(topology));
    absl::StatusOr<ExchangeFit> fit = FitExchange(topology, runs);
    ASSERT_TRUE(fit.ok()) << fit.status();
    const ExchangeParams truth = TruthFor(topology);
    EXPECT_NEAR(fit->params.software_s / truth.software_s, 1, 1e-3);
    EXPECT_NEAR(fit->params.efficiency / truth.efficiency, 1, 1e-4);
    EXPECT_NEAR(fit->params.window_bytes / truth.window_bytes, 1, 1e-3);
    EXPECT_NEAR(fit->params.cpu_bytes_per_second / truth.cpu_bytes_per_second, 1, 1e-3);
    EXPECT_NEAR(fit->params.window_round_s, truth.window_round_s, 2e-6);
    EXPECT_EQ(fit->window_round_s.at_bound, topology == Topology::kRing);
    EXPECT_EQ(fit->params.window_update_share, 0);
    EXPECT_LT(fit->max_abs_rel_error, 1e-4);
    EXPECT_FALSE(fit->efficiency.at_bound);
    EXPECT_GE(fit->efficiency.std_error, 0);
    EXPECT_LT(fit->efficiency.std_error, 1e-3);
    EXPECT_EQ(fit->runs, 76);  // 3 N x 3 S x 2 links x 4 latencies + 4 loopback
  }
}

// MeasureExtrapolation: on exact runs every dimension's held-out runs are predicted by the fit of the rest,
// so nothing widens; where the largest N runs 20 % slower than the model, the N dimension measures that error
// per unit of log(factor), ln(1.2) / ln(8 / 4).
TEST(FitTest, MeasuresTheExtrapolationErrorOnTheCalibrationItself) {
  for (Topology topology : AllTopologies()) {
    SCOPED_TRACE(TopologyName(topology));
    const std::vector<ExtrapolationScatter> x = MeasureExtrapolation(topology, SyntheticRuns());
    ASSERT_EQ(x.size(), 4u);
    const std::pair<const char*, double> expected[] = {
        {"N", 8.0 / 4}, {"latency", 20.0 / 5}, {"size", 16.0 / 4}, {"link", 10}};
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(x[i].dimension, expected[i].first);
      EXPECT_NEAR(x[i].factor, expected[i].second, 1e-9);
      EXPECT_GT(x[i].held_out_runs, 0);
      EXPECT_LT(x[i].log_sd_per_log_factor, 2e-3) << x[i].dimension;
    }
  }
  std::vector<MeasuredRun> runs = SyntheticRuns();
  for (MeasuredRun& run : runs) {
    if (run.topology == Topology::kRing && run.conditions.nodes == 8 &&
        run.conditions.link_bytes_per_second > 0) {
      run.seconds *= 1.2;
    }
  }
  const std::vector<ExtrapolationScatter> x = MeasureExtrapolation(Topology::kRing, runs);
  ASSERT_FALSE(x.empty());
  ASSERT_EQ(x[0].dimension, "N");
  EXPECT_EQ(x[0].held_out_runs, 24);  // 3 S x 2 links x 4 latencies at N = 8 (the loopback runs stay in)
  EXPECT_NEAR(x[0].rms_log_error, std::log(1.2), 2e-3);
  EXPECT_NEAR(x[0].log_sd_per_log_factor, std::log(1.2) / std::log(2.0), 5e-3);
}

TEST(FitTest, ALimitThatNeverBindsIsNone) {
  // Without latency no window binds, without loopback runs no CPU ceiling: both are fitted as none (0).
  std::vector<MeasuredRun> runs;
  for (const MeasuredRun& run : SyntheticRuns()) {
    if (run.conditions.latency_s == 0 && run.conditions.link_bytes_per_second > 0) runs.push_back(run);
  }
  absl::StatusOr<ExchangeFit> fit = FitExchange(Topology::kRing, runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->params.window_bytes, 0);
  EXPECT_TRUE(fit->window_bytes.at_bound);
  EXPECT_LT(fit->window_bytes.std_error, 0);  // not determined
  EXPECT_EQ(fit->params.cpu_bytes_per_second, 0);
  EXPECT_TRUE(fit->cpu_bytes_per_second.at_bound);
  EXPECT_NEAR(fit->params.efficiency, 0.95, 1e-4);
}

TEST(FitTest, RecoversTheBurstShareWhereRunsHaveABurst) {
  // The ring on emulated links with a 10 ms bucket, latencies 1 .. 50 ms, chunks near the bucket: times from
  // a known share 0.4 of the credit, the other terms as TruthFor. The fit gives the share back; without a
  // burst in any run it is none.
  ExchangeParams truth = TruthFor(Topology::kRing);
  truth.window_bytes = 0;
  truth.burst_share = 0.4;
  std::vector<MeasuredRun> runs;
  for (int nodes : {2, 4, 8}) {
    for (double bytes : {0.5e6, 1e6, 4e6}) {
      for (double link : {12.5e6, 25e6}) {
        for (double latency : {1e-3, 5e-3, 20e-3, 50e-3}) {
          Conditions c{nodes, 0, bytes, link, latency};
          c.link_burst_bytes = 10e-3 * link;
          runs.push_back({Topology::kRing, c, PredictCollectiveUnchecked(Topology::kRing, truth, c).seconds});
        }
      }
    }
  }
  for (double bytes : {16e6, 64e6}) {
    const Conditions c{4, 0, bytes, 0, 0};
    runs.push_back({Topology::kRing, c, PredictCollectiveUnchecked(Topology::kRing, truth, c).seconds});
  }
  absl::StatusOr<ExchangeFit> fit = FitExchange(Topology::kRing, runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->params.burst_share, 0.4, 1e-3);
  EXPECT_FALSE(fit->burst_share.at_bound);
  EXPECT_FALSE(fit->burst_share.dropped);
  EXPECT_GE(fit->burst_share.std_error, 0);
  EXPECT_LT(fit->max_abs_rel_error, 1e-4);
  bool named = false;
  for (const std::string& term : fit->covariance_terms) named = named || term == "burst_share";
  EXPECT_TRUE(named);

  // The whole credit realized: the share is held at its bound 1.
  truth.burst_share = 1;
  for (MeasuredRun& run : runs) {
    run.seconds = PredictCollectiveUnchecked(Topology::kRing, truth, run.conditions).seconds;
  }
  fit = FitExchange(Topology::kRing, runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->params.burst_share, 1);
  EXPECT_TRUE(fit->burst_share.at_bound);

  fit = FitExchange(Topology::kRing, SyntheticRuns());  // no burst anywhere
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->params.burst_share, 0);
  EXPECT_TRUE(fit->burst_share.at_bound);
}

// SyntheticRuns' runs of `topology` with the times `truth` gives.
std::vector<MeasuredRun> ExactRuns(Topology topology, const ExchangeParams& truth) {
  std::vector<MeasuredRun> runs;
  for (const MeasuredRun& run : SyntheticRuns()) {
    if (run.topology != topology) continue;
    runs.push_back(
        {run.topology, run.conditions, PredictCollectiveUnchecked(topology, truth, run.conditions).seconds});
  }
  return runs;
}

TEST(FitTest, RecoversTheWindowQueueingOfThePs) {
  // ps-1 with a window that binds at 20 ms and a known queueing share 0.3: the fit gives it back.
  ExchangeParams truth = TruthFor(Topology::kPsOne);
  truth.window_queueing = 0.3;
  absl::StatusOr<ExchangeFit> fit = FitExchange(Topology::kPsOne, ExactRuns(Topology::kPsOne, truth));
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->params.window_queueing, 0.3, 1e-3);
  EXPECT_FALSE(fit->window_queueing.at_bound);
  EXPECT_GE(fit->window_queueing.std_error, 0);
  EXPECT_LT(fit->max_abs_rel_error, 1e-4);
}

TEST(FitTest, RecoversTheStreamContentionOfThePs) {
  // ps-1 with a window that binds at 20 ms, queueing 0.1 and a known stream contention 0.03: the fit gives
  // both back.
  ExchangeParams truth = TruthFor(Topology::kPsOne);
  truth.window_queueing = 0.1;
  truth.stream_contention = 0.03;
  absl::StatusOr<ExchangeFit> fit = FitExchange(Topology::kPsOne, ExactRuns(Topology::kPsOne, truth));
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->params.stream_contention, 0.03, 1e-4);
  EXPECT_NEAR(fit->params.window_queueing, 0.1, 1e-3);
  EXPECT_FALSE(fit->stream_contention.at_bound);
  EXPECT_GE(fit->stream_contention.std_error, 0);
  EXPECT_LT(fit->max_abs_rel_error, 1e-4);
}

TEST(FitTest, RecoversTheDrainOfThePs) {
  // ps-1 and the dedicated PS whose link binds in part of the runs, with a known drain of 1.2 windows a
  // stream: the fit gives it back with a standard error, and leaves it none (at bound) in runs without it.
  for (Topology topology : {Topology::kPsOne, Topology::kPsDedicated}) {
    SCOPED_TRACE(TopologyName(topology));
    ExchangeParams truth = TruthFor(topology);
    truth.drain_windows = 1.2;
    absl::StatusOr<ExchangeFit> fit = FitExchange(topology, ExactRuns(topology, truth));
    ASSERT_TRUE(fit.ok()) << fit.status();
    EXPECT_NEAR(fit->params.drain_windows, 1.2, 1e-3);
    EXPECT_FALSE(fit->drain_windows.at_bound);
    EXPECT_GE(fit->drain_windows.std_error, 0);
    EXPECT_LT(fit->max_abs_rel_error, 1e-4);
    absl::StatusOr<ExchangeFit> without = FitExchange(topology, SyntheticRuns());
    ASSERT_TRUE(without.ok()) << without.status();
    EXPECT_EQ(without->params.drain_windows, 0);
    EXPECT_TRUE(without->drain_windows.at_bound);
  }
}

TEST(FitTest, ThePsSharesAreNoneInRunsWithoutThemAndTheRingHasNone) {
  for (Topology topology : {Topology::kPsOne, Topology::kRing}) {
    SCOPED_TRACE(TopologyName(topology));
    absl::StatusOr<ExchangeFit> fit = FitExchange(topology, SyntheticRuns());
    ASSERT_TRUE(fit.ok()) << fit.status();
    EXPECT_EQ(fit->params.window_queueing, 0);
    EXPECT_TRUE(fit->window_queueing.at_bound);
    EXPECT_EQ(fit->params.stream_contention, 0);
    EXPECT_TRUE(fit->stream_contention.at_bound);
  }
}

// Runs over shaped links scatter by a few per cent, loopback runs (CPU-bound on the shared cores) by tens:
// the fit weighs each regime by its own scatter and records both, so the loopback noise neither widens the
// shaped runs' scatter nor moves the network terms (PERFORMANCE.md 9.14).
TEST(FitTest, WeighsShapedAndLoopbackRunsByTheirOwnScatter) {
  std::vector<MeasuredRun> runs = SyntheticRuns();
  int shaped = 0, loopback = 0;
  for (MeasuredRun& run : runs) {
    if (run.conditions.link_bytes_per_second > 0) {
      run.seconds *= (shaped++ % 2 == 0) ? 1.02 : 0.98;
    } else {
      run.seconds *= (loopback++ % 2 == 0) ? 1.4 : 0.6;
    }
  }
  absl::StatusOr<ExchangeFit> fit = FitExchange(Topology::kPsOne, runs);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_GT(fit->residual_rel_sd, 0.01);
  EXPECT_LT(fit->residual_rel_sd, 0.04) << "the shaped runs' scatter, not the pooled one";
  EXPECT_GT(fit->loopback_residual_rel_sd, 0.2);
  EXPECT_NEAR(fit->params.efficiency, TruthFor(Topology::kPsOne).efficiency, 0.01);
  EXPECT_NEAR(fit->params.window_bytes / TruthFor(Topology::kPsOne).window_bytes, 1, 0.05);
  // Without loopback runs there is one regime: no loopback scatter.
  std::vector<MeasuredRun> shaped_only;
  for (const MeasuredRun& run : runs) {
    if (run.conditions.link_bytes_per_second > 0) shaped_only.push_back(run);
  }
  fit = FitExchange(Topology::kPsOne, shaped_only);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->loopback_residual_rel_sd, -1);
}

TEST(FitTest, NoFitIsFasterThanTheWire) {
  // Measured times 20 % under the model at efficiency 0.95: faster than the link could carry them.
  absl::StatusOr<ExchangeFit> fit = FitExchange(Topology::kPsOne, SyntheticRuns(0.8));
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->params.efficiency, 1);
  EXPECT_TRUE(fit->efficiency.at_bound);
  EXPECT_GT(fit->max_abs_rel_error, 0.05);  // and the error says the data did not fit
}

TEST(FitTest, RecordsTheCovarianceOfTheFreeParameters) {
  absl::StatusOr<ExchangeFit> fit = FitExchange(Topology::kRing, NoisyRuns(0.03, 7));
  ASSERT_TRUE(fit.ok()) << fit.status();
  const size_t n = fit->covariance_terms.size();
  ASSERT_GE(n, 1u);
  ASSERT_EQ(fit->log_covariance.size(), n * n);
  // The diagonal is the square of each term's relative standard error.
  for (size_t i = 0; i < n; ++i) {
    const std::string& term = fit->covariance_terms[i];
    const ParameterFit& p = term == "software_s"     ? fit->software_s
                            : term == "efficiency"   ? fit->efficiency
                            : term == "window_bytes" ? fit->window_bytes
                                                     : fit->cpu_bytes_per_second;
    ASSERT_GT(p.value, 0) << term;
    EXPECT_NEAR(std::sqrt(fit->log_covariance[i * n + i]), p.std_error / p.value, 1e-9) << term;
  }
  // Uniform +-3 % scatter has a standard deviation of 1.7 %: the residual's estimate is near it.
  EXPECT_GT(fit->residual_rel_sd, 0.010);
  EXPECT_LT(fit->residual_rel_sd, 0.025);
}

TEST(FitTest, KeepsOnlyIdentifiedTermsAndReportsTheDropped) {
  // +-8 % scatter hides a per-message cost of tens of microseconds behind transfers of milliseconds to seconds.
  const std::vector<MeasuredRun> runs = NoisyRuns(0.08, 11);
  absl::StatusOr<proto::CostModelFile> file = FitModel(runs, {"host", "2026-12-01", ""});
  ASSERT_TRUE(file.ok()) << file.status();
  int dropped = 0;
  for (const proto::ExchangeModel& e : file->exchanges()) {
    SCOPED_TRACE(e.exchange());
    for (const proto::ModelParameter* p :
         {&e.software_s(), &e.window_bytes(), &e.cpu_bytes_per_second(), &e.efficiency()}) {
      if (p->dropped()) {
        ++dropped;
        EXPECT_EQ(p->value(), 0);
        EXPECT_TRUE(p->at_bound());
        EXPECT_GT(p->dropped_value(), 0);
        continue;
      }
      if (p->at_bound() || p == &e.efficiency()) continue;
      // Every kept term is identified.
      ASSERT_TRUE(p->has_std_error());
      EXPECT_LE(p->std_error() / p->value(), kMaxRelativeStdError);
    }
  }
  EXPECT_GT(dropped, 0);
  // The file with dropped terms is valid and reads back.
  absl::StatusOr<std::string> json = ModelFileJson(*file);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_TRUE(ParseModelFile(*json, "fit").ok());
}

TEST(FitTest, Errors) {
  // Only loopback runs: no link efficiency to fit.
  std::vector<MeasuredRun> loopback;
  for (const MeasuredRun& run : SyntheticRuns()) {
    if (run.conditions.link_bytes_per_second == 0) loopback.push_back(run);
  }
  absl::StatusOr<ExchangeFit> fit = FitExchange(Topology::kRing, loopback);
  EXPECT_EQ(fit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(fit.status().message().find("--link"), std::string::npos) << fit.status();

  std::vector<MeasuredRun> runs = SyntheticRuns();
  runs[3].seconds = 0;
  fit = FitExchange(Topology::kRing, runs);
  EXPECT_NE(fit.status().message().find("calibration run 3"), std::string::npos) << fit.status();
  runs = SyntheticRuns();
  runs[0].conditions.cpu_speedup = 2;
  EXPECT_FALSE(FitExchange(Topology::kRing, runs).ok());
  // A model needs every exchange.
  runs.clear();
  for (const MeasuredRun& run : SyntheticRuns()) {
    if (run.topology != Topology::kPsDedicated) runs.push_back(run);
  }
  absl::StatusOr<proto::CostModelFile> file = FitModel(runs, {"host", "2026-12-01", ""});
  EXPECT_NE(file.status().message().find("ps-dedicated"), std::string::npos) << file.status();
}

TEST(FitTest, FileHoldsParametersErrorsAndCoverage) {
  absl::StatusOr<proto::CostModelFile> file = FitModel(SyntheticRuns(), {"box", "2026-12-01", "synthetic"});
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->exchanges_size(), 4);
  const proto::ExchangeModel& ring = file->exchanges(0);
  EXPECT_EQ(ring.exchange(), "ring");
  EXPECT_NEAR(ring.efficiency().value(), 0.95, 1e-4);
  EXPECT_TRUE(ring.efficiency().has_std_error());
  EXPECT_LT(ring.max_abs_rel_error(), 1e-4);
  EXPECT_EQ(ring.coverage().link_bytes_per_second_size(), 3);  // 0 (loopback), 100 Mbit/s, 1 Gbit/s
  EXPECT_EQ(ring.coverage().latency_s_size(), 4);
  EXPECT_EQ(ring.coverage().nodes_size(), 3);
  EXPECT_EQ(ring.coverage().bytes_size(), 4);
  EXPECT_EQ(file->exchanges(3).coverage().servers(0), 2);
  EXPECT_EQ(file->host(), "box");
  // The window round's cost is fitted on every PS exchange (value, standard error, a term of the covariance),
  // never on the ring; the window update share of earlier files is no longer set.
  EXPECT_FALSE(ring.has_window_round_s());
  EXPECT_FALSE(ring.has_window_update_share());
  for (int i = 1; i < 4; ++i) {
    const proto::ExchangeModel& e = file->exchanges(i);
    SCOPED_TRACE(e.exchange());
    const Topology topology = *ParseTopology(e.exchange());
    ASSERT_TRUE(e.has_window_round_s());
    EXPECT_NEAR(e.window_round_s().value(), TruthFor(topology).window_round_s, 2e-6);
    EXPECT_FALSE(e.window_round_s().at_bound());
    EXPECT_TRUE(e.window_round_s().has_std_error());
    EXPECT_EQ(ParamsOf(*file, topology)->window_round_s, e.window_round_s().value());
    EXPECT_FALSE(e.has_window_update_share());
    EXPECT_NE(std::find(e.covariance_terms().begin(), e.covariance_terms().end(), "window_round_s"),
              e.covariance_terms().end());
  }
}

}  // namespace
}  // namespace psring::bench::model
