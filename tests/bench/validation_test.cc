// //bench:validate's pure parts: the held-out selection (no condition calibration ran), predictions, the
// statistics and the report on fixed data, the scatter plot.
#include <string>
#include <vector>

#include "bench/core/links.h"
#include "bench/model/calibration_plan.h"
#include "bench/model/collective.h"
#include "bench/model/held_out.h"
#include "bench/model/incast_fit.h"
#include "bench/model/model_file.h"
#include "bench/report/validation_report.h"
#include "gtest/gtest.h"
#include "tests/bench/model/synthetic_runs.h"
#include "tests/bench/svg_checks.h"

namespace psring::bench {
namespace {

constexpr size_t kMiB = 1u << 20;

// A model file whose coverage is what `plan` runs (as FitModel records it: the union of the runs' values).
proto::CostModelFile ModelCovering(const CalibrationPlan& plan) {
  std::vector<model::ExchangeParams> params;
  for (model::Topology t : model::AllTopologies()) params.push_back(model::TruthFor(t));
  proto::CostModelFile file = model::ModelFileOf(params);
  for (proto::ExchangeModel& e : *file.mutable_exchanges()) {
    proto::Coverage* cov = e.mutable_coverage();
    for (const CalibrationCondition& c : plan.conditions) {
      cov->add_link_bytes_per_second(c.loopback ? 0 : *ParseLinkRate(c.link) / 8);
      cov->add_latency_s(c.loopback ? 0 : *ParseLatency(c.latency));
      for (int n : c.nodes) cov->add_nodes(n);
      for (size_t s : c.sizes) cov->add_bytes(static_cast<double>(s));
    }
  }
  return file;
}

CalibrationPlan SmallCalibration() {
  CalibrationPlan plan;
  plan.conditions = {{"100mbit", "1ms", false, {1 * kMiB, 4 * kMiB}, {2, 4, 8}},
                     {"100mbit", "5ms", false, {1 * kMiB, 4 * kMiB}, {2, 4, 8}},
                     {"", "", true, {16 * kMiB}, {2, 4}}};
  return plan;
}

std::vector<HeldOutCondition> Conditions(const ValidationPlan& plan) {
  std::vector<HeldOutCondition> all;
  for (const HeldOutSweep& s : plan.sweeps) {
    absl::StatusOr<std::vector<HeldOutCondition>> c = ExpandSweep(s);
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) all.insert(all.end(), c->begin(), c->end());
  }
  return all;
}

TEST(SelectHeldOutTest, DropsExactlyTheConditionsCalibrationCovers) {
  const proto::CostModelFile model = ModelCovering(SmallCalibration());
  ValidationPlan plan;
  plan.sweeps = {
      {"100mbit", "5ms", {4, 12}, {4 * kMiB}, {}, 1, {}},   // N = 4 was calibrated there, N = 12 not
      {"150mbit", "2ms", {4}, {4 * kMiB}, {}, 1, {}},       // another link rate: held out
      {"100mbit", "1ms", {2, 8}, {1 * kMiB}, {}, 1, {}},    // all calibrated: dropped whole
      {"100mbit", "5ms", {8}, {}, {"resnet50"}, 64, {0, 25}},  // replay: never a calibration run
      // 16 MiB ran only on loopback, but every value is in the coverage (the union over conditions), so
      // calibration may have run it: the check is on each value, conservatively.
      {"100mbit", "5ms", {4}, {16 * kMiB}, {}, 1, {}},
  };
  plan.noise_sweep = 3;
  absl::StatusOr<HeldOutSelection> selected = SelectHeldOut(plan, model);
  ASSERT_TRUE(selected.ok()) << selected.status();
  ASSERT_EQ(selected->plan.sweeps.size(), 3u);
  EXPECT_EQ(selected->plan.sweeps[0].nodes, std::vector<int>({12}));
  EXPECT_EQ(selected->plan.sweeps[1].link, "150mbit");
  EXPECT_EQ(selected->plan.sweeps[2].workloads, std::vector<std::string>({"resnet50"}));
  EXPECT_EQ(selected->plan.noise_sweep, 2);  // follows its sweep past the dropped one
  // 100mbit 5ms N=4 4MiB, 100mbit 1ms N=2 and N=8 1MiB, 100mbit 5ms N=4 16MiB.
  EXPECT_EQ(selected->rejected.size(), 4u);
  for (const HeldOutCondition& c : Conditions(selected->plan)) {
    EXPECT_FALSE(CalibrationCovers(model, c)) << c.Name();
  }
}

TEST(SelectHeldOutTest, RefusesAPlanWithNothingHeldOut) {
  const proto::CostModelFile model = ModelCovering(SmallCalibration());
  ValidationPlan plan;
  plan.sweeps = {{"100mbit", "1ms", {2, 4}, {1 * kMiB, 4 * kMiB}, {}, 1, {}}};
  const absl::StatusOr<HeldOutSelection> selected = SelectHeldOut(plan, model);
  EXPECT_EQ(selected.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(selected.status().message().find("choose other link rates"), std::string::npos);
}

// The presets are built to hold out everything: no validation condition is one a calibration preset runs.
TEST(SelectHeldOutTest, ValidationPresetsReuseNoCalibrationPresetCondition) {
  for (const CalibrationPlan& calibration : {QuickCalibrationPlan(), DefaultCalibrationPlan()}) {
    const proto::CostModelFile model = ModelCovering(calibration);
    for (const ValidationPlan& plan : {QuickValidationPlan(), FullValidationPlan()}) {
      absl::StatusOr<HeldOutSelection> selected = SelectHeldOut(plan, model);
      ASSERT_TRUE(selected.ok()) << selected.status();
      EXPECT_TRUE(selected->rejected.empty()) << selected->rejected.front();
      EXPECT_EQ(Conditions(selected->plan).size(), Conditions(plan).size());
    }
  }
}

TEST(ValidationPlanTest, PresetsAreWithinTheirBudgetsByTheModelsOwnEstimate) {
  std::vector<model::ExchangeParams> params;
  for (model::Topology t : model::AllTopologies()) params.push_back(model::TruthFor(t));
  const proto::CostModelFile model = model::ModelFileOf(params);
  absl::StatusOr<double> quick = EstimateValidationSeconds(QuickValidationPlan(), model);
  absl::StatusOr<double> full = EstimateValidationSeconds(FullValidationPlan(), model);
  ASSERT_TRUE(quick.ok()) << quick.status();
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_LE(*quick, 12 * 60);
  EXPECT_LE(*full, 40 * 60);
  EXPECT_LT(*quick, *full);
}

TEST(PredictConditionTest, GradientConditionIsOneCollectiveAllExposed) {
  std::vector<model::ExchangeParams> params;
  for (model::Topology t : model::AllTopologies()) params.push_back(model::TruthFor(t));
  const proto::CostModelFile model = model::ModelFileOf(params);
  absl::StatusOr<std::vector<HeldOutCondition>> conditions =
      ExpandSweep({"150mbit", "2ms", {12}, {4 * kMiB}, {}, 1, {}});
  ASSERT_TRUE(conditions.ok()) << conditions.status();
  ASSERT_EQ(conditions->size(), 1u);
  const HeldOutCondition& c = conditions->front();
  EXPECT_EQ(c.Name(), "150mbit 2ms N=12 4MiB");
  EXPECT_DOUBLE_EQ(c.link_bytes_per_second, 150e6 / 8);
  EXPECT_DOUBLE_EQ(c.latency_s, 2e-3);
  absl::StatusOr<model::StepShape> shape = ShapeOf(c);
  ASSERT_TRUE(shape.ok()) << shape.status();
  absl::StatusOr<std::vector<ValidationRow>> rows = PredictCondition(model, c, *shape, AllExchanges(), 2);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 4u);
  for (size_t i = 0; i < rows->size(); ++i) {
    const ValidationRow& r = (*rows)[i];
    const model::Conditions at{12, 2, 4.0 * kMiB, 150e6 / 8, 2e-3, 1};
    const double expected =
        model::PredictCollectiveUnchecked(model::AllTopologies()[i], params[i], at).seconds;
    EXPECT_NEAR(r.predicted_step_s, expected, 1e-12) << ExchangeName(r.exchange);
    EXPECT_EQ(r.predicted_exposed_s, r.predicted_step_s);
    EXPECT_EQ(r.measured_step_s, -1);
  }
  const std::string line = FormatPrediction(*rows);
  EXPECT_EQ(line.rfind("# PREDICTED before running 150mbit 2ms N=12 4MiB (90 % intervals): ring ", 0), 0u) << line;
  // No coverage recorded: nothing to be beyond. Calibrated at N = 2-8: N = 12 lies 1.5x beyond.
  for (const ValidationRow& r : *rows) EXPECT_FALSE(r.beyond_coverage()) << ExchangeName(r.exchange);
  proto::CostModelFile covered = model;
  for (proto::ExchangeModel& e : *covered.mutable_exchanges()) {
    e.mutable_coverage()->add_nodes(2);
    e.mutable_coverage()->add_nodes(8);
  }
  absl::StatusOr<std::vector<ValidationRow>> beyond = PredictCondition(covered, c, *shape, AllExchanges(), 2);
  ASSERT_TRUE(beyond.ok()) << beyond.status();
  for (const ValidationRow& r : *beyond) EXPECT_DOUBLE_EQ(r.extrapolation, 1.5) << ExchangeName(r.exchange);
}

// The synthetic truth's exchanges, each with a 64 KiB window (so the PS bursts a window into a server's
// port).
proto::CostModelFile TruthWithWindows() {
  std::vector<model::ExchangeParams> params;
  for (model::Topology t : model::AllTopologies()) {
    params.push_back(model::TruthFor(t));
    params.back().window_bytes = 64 << 10;
  }
  return model::ModelFileOf(params);
}

// The incast mark from the prediction: the sweep's queue (tbf's limit: rate x queue + burst) against the PS's
// window burst; the ring never, a condition whose queue is not known never. Summarize then counts the usable
// PS runs marked and not, and which of them dropped packets; the report prints both and the mark per row.
TEST(PredictConditionTest, MarksIncastWhereTheWindowBurstExceedsThePortsQueue) {
  const proto::CostModelFile model = TruthWithWindows();
  HeldOutSweep sweep{"60mbit", "48ms", {4, 13}, {kMiB}, {}, 1, {}};
  sweep.queue = "50ms";
  absl::StatusOr<std::vector<HeldOutCondition>> conditions = ExpandSweep(sweep);
  ASSERT_TRUE(conditions.ok()) << conditions.status();
  ASSERT_EQ(conditions->size(), 2u);
  std::vector<ValidationRow> rows;
  for (HeldOutCondition c : *conditions) {
    EXPECT_DOUBLE_EQ(c.queue_s, 0.05);
    c.link_burst_bytes = 75000;
    EXPECT_DOUBLE_EQ(c.port_buffer_bytes(), 450000);
    absl::StatusOr<model::StepShape> shape = ShapeOf(c);
    ASSERT_TRUE(shape.ok()) << shape.status();
    absl::StatusOr<std::vector<ValidationRow>> predicted =
        PredictCondition(model, c, *shape, {Exchange::kRing, Exchange::kPsOne}, 2);
    ASSERT_TRUE(predicted.ok()) << predicted.status();
    rows.insert(rows.end(), predicted->begin(), predicted->end());
  }
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].incast, 0);                                 // ring N = 4
  EXPECT_DOUBLE_EQ(rows[1].incast, 3.0 * (64 << 10) / 450000);  // ps-1 N = 4: 0.44
  EXPECT_FALSE(rows[1].incast_marked());
  EXPECT_DOUBLE_EQ(rows[3].incast, 12.0 * (64 << 10) / 450000);  // ps-1 N = 13: 1.75
  EXPECT_TRUE(rows[3].incast_marked());
  EXPECT_NE(FormatPrediction({rows[2], rows[3]}).find("ps-1 "), std::string::npos);
  EXPECT_NE(FormatPrediction({rows[2], rows[3]}).find("INCAST x1.7)"), std::string::npos)
      << FormatPrediction({rows[2], rows[3]});
  EXPECT_EQ(FormatPrediction({rows[0], rows[1]}).find("INCAST"), std::string::npos);
  // Measured: N = 13's ps-1 dropped, N = 4's did not; the ring's drops are not the mark's.
  for (ValidationRow& r : rows) {
    r.measured_step_s = r.predicted_step_s * 1.02;
    r.measured_exposed_s = r.measured_step_s;
    r.drop_share = 0;
  }
  rows[3].measured_step_s = rows[3].predicted_step_s / 0.8;  // -20 %
  rows[3].drop_share = 0.002;
  rows[2].drop_share = 0.003;
  Validation v;
  v.rows = rows;
  absl::StatusOr<ValidationSummary> s = Summarize(v.rows, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->incast_marked, 1);
  EXPECT_EQ(s->incast_marked_lossy, 1);
  EXPECT_EQ(s->incast_unmarked, 1);
  EXPECT_EQ(s->incast_unmarked_lossy, 0);
  EXPECT_NEAR(s->step_incast_marked.median_abs, 0.2, 1e-12);
  EXPECT_NEAR(s->step_incast_unmarked.median_abs, 0.02 / 1.02, 1e-12);
  v.summary = *s;
  const std::string text = FormatValidationReport(v);
  EXPECT_NE(text.find("1 of 1 marked usable PS runs dropped >= 0.1 % of their packets, 0 of 1 unmarked ones"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# step time, usable PS runs marked INCAST: median |error| 20.0 %"), std::string::npos)
      << text;
  EXPECT_NE(text.find("INCAST x1.7"), std::string::npos) << text;
  // Without PS runs whose port buffer is known there is no such line.
  for (ValidationRow& r : v.rows) r.incast = 0;
  v.summary = *Summarize(v.rows, {});
  EXPECT_EQ(FormatValidationReport(v).find("incast mark"), std::string::npos);
}

TEST(PredictConditionTest, AddsTheIncastCostAndWidensTheIntervalWhereTheModelHasTheTerm) {
  const proto::CostModelFile lossless = TruthWithWindows();
  proto::CostModelFile model = lossless;
  model.mutable_incast()->mutable_round_trips_per_cut()->set_value(1.5);
  model.mutable_incast()->mutable_round_trips_per_cut()->set_std_error(0.05);
  model.mutable_incast()->set_multiplicative_decrease(0.7);
  model.mutable_incast()->set_residual_rel_sd(0.27);
  ASSERT_TRUE(model::ValidateModelFile(model).ok()) << model::ValidateModelFile(model);
  HeldOutSweep sweep{"60mbit", "48ms", {4, 13}, {kMiB}, {}, 1, {}};
  sweep.queue = "50ms";
  absl::StatusOr<std::vector<HeldOutCondition>> conditions = ExpandSweep(sweep);
  ASSERT_TRUE(conditions.ok()) << conditions.status();
  std::vector<ValidationRow> with, without;
  for (HeldOutCondition c : *conditions) {
    c.link_burst_bytes = 75000;  // a 450 kB port, as above
    absl::StatusOr<model::StepShape> shape = ShapeOf(c);
    ASSERT_TRUE(shape.ok()) << shape.status();
    for (auto [file, out] :
         {std::pair<const proto::CostModelFile*, std::vector<ValidationRow>*>{&model, &with},
          std::pair<const proto::CostModelFile*, std::vector<ValidationRow>*>{&lossless, &without}}) {
      absl::StatusOr<std::vector<ValidationRow>> predicted =
          PredictCondition(*file, c, *shape, {Exchange::kRing, Exchange::kPsOne}, 2);
      ASSERT_TRUE(predicted.ok()) << predicted.status();
      out->insert(out->end(), predicted->begin(), predicted->end());
    }
  }
  ASSERT_EQ(with.size(), 4u);
  // The ring and ps-1 at N = 4 (R = 0.44) are untouched; ps-1 at N = 13 (R = 1.75, a 156 ms round trip)
  // pays 1.5 x ln(1.748) / ln(1 / 0.7) x 0.156 s = 0.366 s, and its interval widens by the term's scatter.
  for (int i : {0, 1, 2}) {
    EXPECT_EQ(with[i].incast_s, 0) << i;
    EXPECT_DOUBLE_EQ(with[i].predicted_step_s, without[i].predicted_step_s) << i;
  }
  EXPECT_NEAR(with[3].incast_s, 0.36625, 1e-5);
  EXPECT_NEAR(with[3].predicted_step_s - without[3].predicted_step_s, 0.36625, 1e-5);
  for (int i : {0, 1, 2, 3}) {
    EXPECT_DOUBLE_EQ(with[i].predicted_lossless_step_s, without[i].predicted_step_s) << i;
  }
  EXPECT_GT(with[3].predicted_hi_s / with[3].predicted_lo_s,
            without[3].predicted_hi_s / without[3].predicted_lo_s * 1.05);
  // The report prints the cost beside the mark, and the incast fit reads it back from the text.
  for (ValidationRow& r : with) {
    r.measured_step_s = r.predicted_step_s;
    r.measured_exposed_s = r.measured_step_s;
  }
  Validation v;
  v.rows = with;
  v.summary = *Summarize(v.rows, {});
  const std::string text = FormatValidationReport(v);
  EXPECT_NE(text.find("INCAST x1.7 +0.366 s"), std::string::npos) << text;
  // Judged with and without the term, side by side: measured at the prediction, the lossless model was
  // 0.366 s short.
  EXPECT_EQ(v.summary.step_incast_costed.count, 1);
  EXPECT_NEAR(v.summary.step_incast_costed.median_abs, 0, 1e-12);
  EXPECT_NEAR(v.summary.step_incast_costed_lossless.median_abs, 0.36625 / with[3].predicted_step_s, 1e-4);
  EXPECT_EQ(v.summary.incast_costed_interval_rows, 1);
  EXPECT_EQ(v.summary.incast_costed_interval_inside, 1);
  EXPECT_NE(text.find("the same runs without the incast term (the lossless model): median |error|"),
            std::string::npos)
      << text;
  absl::StatusOr<std::vector<model::ReportRow>> parsed = model::ParseValidationReport(text, "v.txt");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 4u);
  EXPECT_EQ((*parsed)[3].condition, "60mbit 48ms queue 50ms N=13 1MiB");
  EXPECT_EQ((*parsed)[3].topology, model::Topology::kPsOne);
  EXPECT_NEAR((*parsed)[3].predicted_s, with[3].predicted_step_s, 5e-4);
  EXPECT_DOUBLE_EQ((*parsed)[3].incast_s, 0.366);
  EXPECT_EQ((*parsed)[1].incast_s, 0);
}

TEST(ShapeOfTest, ReplayUsesTheScaledProfileAndScaledCap) {
  absl::StatusOr<std::vector<HeldOutCondition>> conditions =
      ExpandSweep({"150mbit", "2ms", {8}, {}, {"resnet50"}, 64, {0, 25}});
  ASSERT_TRUE(conditions.ok()) << conditions.status();
  ASSERT_EQ(conditions->size(), 2u);
  EXPECT_EQ((*conditions)[1].Name(), "150mbit 2ms N=8 resnet50/64 bucketed 25MB");
  absl::StatusOr<model::StepShape> flat = ShapeOf((*conditions)[0]);
  absl::StatusOr<model::StepShape> bucketed = ShapeOf((*conditions)[1]);
  ASSERT_TRUE(flat.ok()) << flat.status();
  ASSERT_TRUE(bucketed.ok()) << bucketed.status();
  ASSERT_EQ(flat->buckets.size(), 1u);
  EXPECT_GT(bucketed->buckets.size(), 2u);
  double total = 0;
  for (const model::BucketRelease& b : bucketed->buckets) total += b.bytes;
  EXPECT_NEAR(total, flat->buckets[0].bytes, 1e-6);
  // ResNet-50 has 25.6 M parameters: / 64 x 4 bytes is about 1.6 MB.
  EXPECT_NEAR(flat->buckets[0].bytes, 25.6e6 / 64 * 4, 0.05e6);
  EXPECT_GT(flat->backward_s, 0);
}

// Fixed rows: two conditions, one EMULATOR-BOUND run, one failed, one bucketed run whose exchange hid.
std::vector<ValidationRow> FixedRows() {
  auto row = [](const std::string& condition, Exchange e, double pred, double meas, double pred_exp,
                double meas_exp) {
    ValidationRow r;
    r.condition = condition;
    r.exchange = e;
    r.nodes = 8;
    r.predicted_step_s = pred;
    r.measured_step_s = meas;
    r.predicted_exposed_s = pred_exp;
    r.measured_exposed_s = meas_exp;
    r.bound = "link";
    return r;
  };
  std::vector<ValidationRow> rows = {
      row("A", Exchange::kRing, 1.00, 1.00, 1.00, 0.95),        // step 0 %, exposed +5.3 %
      row("A", Exchange::kPsOne, 2.20, 2.00, 2.20, 2.00),       // +10 %, +10 %: measured ring wins by 100 %
      row("A", Exchange::kPsColocated, 0.90, 1.02, 0.9, 1.0),  // -11.8 %: predicted winner, wrong (margin 2 %)
      row("B", Exchange::kRing, 0.30, 0.32, 0.001, 0.004),      // -6.25 %; exposed hidden (< 5 % of the step)
      row("B", Exchange::kPsOne, 0.60, 0.50, 0.30, 0.20),       // +20 %, +50 %
      row("B", Exchange::kPsDedicated, 0.40, 0.90, 0.1, 0.6),   // EMULATOR-BOUND below
      row("B", Exchange::kPsColocated, 0.40, -1, 0.1, -1),      // failed below
  };
  rows[5].emulator_bound = true;
  rows[5].note = "box CPU 96% busy";
  rows[6].note = "failed: timed out";
  return rows;
}

TEST(SummarizeTest, StatisticsTieBandAndWinnersOnFixedData) {
  // One condition measured three times: (0.55 - 0.50) / 0.52 = 9.6 % noise, above the 5 % floor.
  absl::StatusOr<ValidationSummary> s = Summarize(FixedRows(), {{0.50, 0.52, 0.55}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->rows, 7);
  EXPECT_EQ(s->usable, 5);
  EXPECT_EQ(s->emulator_bound, 1);
  EXPECT_EQ(s->failed, 1);
  // |step errors| sorted: 0, 0.0625, 0.1, 0.1176, 0.2: median 0.1, p90 at position 3.6.
  EXPECT_EQ(s->step.count, 5);
  EXPECT_NEAR(s->step.median_abs, 0.1, 1e-12);
  EXPECT_NEAR(s->step.p90_abs, 0.1176470588 + 0.6 * (0.2 - 0.1176470588), 1e-9);
  // Exposed: ring A +5.26 %, ps-1 A +10 %, ps-col A -10 %, ps-1 B +50 % (ring B hid).
  EXPECT_EQ(s->exposed.count, 4);
  EXPECT_NEAR(s->exposed.median_abs, 0.1, 1e-12);
  EXPECT_TRUE(s->band.from_noise);
  EXPECT_NEAR(s->band.band, 0.05 / 0.52, 1e-12);
  // A: measured ring 1.00 vs ps-colocated 1.02 (2 %): a tie. B: ring 0.32 vs ps-1 0.50: counted, right.
  EXPECT_EQ(s->winners.ties, 1);
  EXPECT_EQ(s->winners.counted, 1);
  EXPECT_EQ(s->winners.correct, 1);
  EXPECT_EQ(s->winners.unjudged, 0);
  // Beside the usable runs, every measured one: the EMULATOR-BOUND ps-dedicated B (0.40 against 0.90, -55.6 %)
  // joins the five.
  EXPECT_EQ(s->step_all.count, 6);
  EXPECT_NEAR(s->step_all.max_abs, 0.5 / 0.9, 1e-12);
}

// B's printed winner (ring, 0.30 s) excluded: B is unjudged, not "right", and the reports say so.
TEST(SummarizeTest, AConditionWhosePrintedWinnerWasExcludedIsUnjudged) {
  std::vector<ValidationRow> rows = FixedRows();
  rows[3].emulator_bound = true;
  rows[3].note = "box CPU 97% busy";
  absl::StatusOr<ValidationSummary> s = Summarize(rows, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->winners.unjudged, 1);
  EXPECT_EQ(s->winners.counted, 0);
  EXPECT_EQ(s->winners.ties, 1);
  Validation v;
  v.rows = rows;
  v.summary = *s;
  const std::string report = FormatValidationReport(v);
  EXPECT_NE(report.find("B                                      predicted ring          UNJUDGED: the predicted "
                        "winner ring was excluded"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("(1 ties, 1 unjudged, 0 undetermined)"), std::string::npos) << report;
  EXPECT_EQ(report.find("right"), std::string::npos) << report;
  const std::string checks = FormatHeldOutChecks(*s);
  EXPECT_NE(checks.find("# info held-out winner: no condition outside the tie band"), std::string::npos)
      << checks;
  EXPECT_NE(checks.find("1 unjudged"), std::string::npos) << checks;
}

// A sweep the time limit left unrun (RunValidation's time_limit): its rows are neither usable nor excluded
// nor failed, counted apart, and their condition is not scored, not even as unjudged; the report and the
// checks say how many were not run. Here condition B (4 rows) did not run: A alone is left, a tie.
TEST(SummarizeTest, RunsTheTimeLimitLeftOutAreCountedApartAndNotScored) {
  std::vector<ValidationRow> rows = FixedRows();
  for (size_t i = 3; i < rows.size(); ++i) {
    rows[i].measured_step_s = -1;
    rows[i].measured_exposed_s = -1;
    rows[i].emulator_bound = false;
    rows[i].out_of_time = true;
    rows[i].note = "not run (time limit)";
  }
  absl::StatusOr<ValidationSummary> s = Summarize(rows, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->rows, 7);
  EXPECT_EQ(s->usable, 3);
  EXPECT_EQ(s->emulator_bound, 0);
  EXPECT_EQ(s->failed, 0);
  EXPECT_EQ(s->out_of_time, 4);
  EXPECT_EQ(s->step.count, 3);
  EXPECT_EQ(s->winners.ties, 1);
  EXPECT_EQ(s->winners.counted, 0);
  EXPECT_EQ(s->winners.unjudged, 0);
  Validation v;
  v.rows = rows;
  v.summary = *s;
  const std::string report = FormatValidationReport(v);
  EXPECT_NE(report.find("7 runs, 3 usable, 0 EMULATOR-BOUND (excluded), 0 failed (excluded), 4 not run (time "
                        "limit: counted in neither, their conditions not scored)"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("UNJUDGED"), std::string::npos) << report;
  EXPECT_NE(FormatHeldOutChecks(*s).find("0 EMULATOR-BOUND, 0 failed, 4 not run (time limit) (of 7)"),
            std::string::npos)
      << FormatHeldOutChecks(*s);
  // Without such rows the header reads as before.
  v.rows = FixedRows();
  v.summary = *Summarize(v.rows, {});
  EXPECT_EQ(FormatValidationReport(v).find("not run"), std::string::npos);
}

// Intervals: A's predicted winner ps-colocated (0.90 [0.80, 1.05]) overlaps ring (1.00 [0.95, 1.10]): the model
// named no winner, so A is undetermined (not right, not wrong); B keeps its verdict. Coverage counts the usable
// runs inside their interval.
TEST(SummarizeTest, OverlappingIntervalsLeaveTheWinnerUndetermined) {
  std::vector<ValidationRow> rows = FixedRows();
  const double bounds[][2] = {{0.95, 1.10}, {2.0, 2.4}, {0.80, 1.05}, {0.28, 0.33}, {0.55, 0.65}, {0.35, 0.45},
                              {0.35, 0.45}};
  for (size_t i = 0; i < rows.size(); ++i) rows[i].predicted_lo_s = bounds[i][0], rows[i].predicted_hi_s = bounds[i][1];
  absl::StatusOr<ValidationSummary> s = Summarize(rows, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->winners.undetermined, 1);
  EXPECT_EQ(s->winners.undetermined_point_right, 0);  // ps-colocated was the point prediction, ring won
  EXPECT_EQ(s->winners.counted, 1);  // B: ring's [0.28, 0.33] clears the others' lower ends (0.35 and up)
  EXPECT_EQ(s->winners.correct, 1);
  // Usable: ring A 1.00 in, ps-1 A 2.00 in, ps-col A 1.02 in, ring B 0.32 in, ps-1 B 0.50 out.
  EXPECT_EQ(s->interval_rows, 5);
  EXPECT_EQ(s->interval_inside, 4);
  Validation v;
  v.rows = rows;
  v.summary = *s;
  const std::string report = FormatValidationReport(v);
  EXPECT_NE(report.find("predicted UNDETERMINED (undetermined: the predicted intervals of ps-colocated and ring "
                        "overlap; point prediction ps-colocated)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("# 90 % prediction intervals: 4 of 5 usable runs inside (80 %)"), std::string::npos)
      << report;
  EXPECT_NE(report.find("outside interval"), std::string::npos) << report;
  EXPECT_NE(FormatHeldOutChecks(*s).find("4 of 5 usable runs inside"), std::string::npos);
  // No run beyond the calibrated coverage: no split.
  EXPECT_EQ(report.find("beyond it"), std::string::npos) << report;

  // Coverage split: ps-1 B (out) and ring B (in) beyond the calibrated coverage, the other three inside it.
  for (ValidationRow& r : rows) r.extrapolation = r.condition == "B" ? 1.5 : 1;
  absl::StatusOr<ValidationSummary> split = Summarize(rows, {});
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->interval_rows_beyond, 2);
  EXPECT_EQ(split->interval_inside_beyond, 1);
  v.summary = *split;
  const std::string with_split = FormatValidationReport(v);
  EXPECT_NE(
      with_split.find("4 of 5 usable runs inside (80 %); inside the calibrated coverage 3 of 3 (100 %), "
                      "beyond it 1 of 2 (50 %)"),
      std::string::npos)
      << with_split;
  EXPECT_NE(FormatHeldOutChecks(*split).find("beyond it 1 of 2 (50 %)"), std::string::npos);
}

TEST(FormatValidationReportTest, ReportsEveryRunAndTheFigures) {
  Validation v;
  v.rows = FixedRows();
  v.model_host = "box";
  v.model_date = "2026-12-01";
  absl::StatusOr<ValidationSummary> s = Summarize(v.rows, {});
  ASSERT_TRUE(s.ok()) << s.status();
  v.summary = *s;
  const std::string text = FormatValidationReport(v);
  EXPECT_NE(text.find("model of box, 2026-12-01"), std::string::npos) << text;
  EXPECT_NE(text.find("7 runs, 5 usable, 1 EMULATOR-BOUND (excluded), 1 failed (excluded)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("EMULATOR-BOUND (box CPU 96% busy)"), std::string::npos) << text;
  EXPECT_NE(text.find("failed: timed out"), std::string::npos) << text;
  EXPECT_NE(text.find("+10.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("-11.8%"), std::string::npos) << text;
  EXPECT_NE(text.find("hidden"), std::string::npos) << text;
  EXPECT_NE(text.find("# step time: median |error| 10.0 %, p90 16.7 %, max 20.0 % over 5 runs"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# tie band: 5.0 %"), std::string::npos) << text;
  EXPECT_NE(text.find("tie (within the band)"), std::string::npos) << text;
  EXPECT_NE(text.find("# winner accuracy: 1 of 1 = 100 %"), std::string::npos) << text;
  EXPECT_EQ(text.find("TCP"), std::string::npos) << "neither TCP known: no line";
}

// A remark (a kept run's reason, the links' loss) is shown and excludes nothing; runs whose links dropped
// >= 0.1 % of their packets are summarized apart from the others (loss is not in the model).
TEST(FormatValidationReportTest, RemarksExcludeNothingAndLossyRunsAreSummarizedApart) {
  Validation v;
  v.rows = FixedRows();
  v.rows[1].remark = "box waits cannot explain the shortfall: judged";  // ps-1 A, +10 %
  v.rows[4].drop_share = 0.0025;                                        // ps-1 B, +20 %
  v.rows[4].remark = "links dropped 0.25% of packets (loss, not in the model)";
  v.rows[0].drop_share = 0.0005;  // ring A: below the share, not lossy
  absl::StatusOr<ValidationSummary> s = Summarize(v.rows, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->usable, 5);  // as without the remarks
  EXPECT_EQ(s->step.count, 5);
  EXPECT_EQ(s->step_lossy.count, 1);
  EXPECT_NEAR(s->step_lossy.max_abs, 0.2, 1e-12);
  EXPECT_EQ(s->step_lossless.count, 4);
  EXPECT_NEAR(s->step_lossless.max_abs, 0.12 / 1.02, 1e-12);
  v.summary = *s;
  const std::string text = FormatValidationReport(v);
  EXPECT_NE(text.find("box waits cannot explain the shortfall: judged"), std::string::npos) << text;
  EXPECT_NE(text.find("links dropped 0.25% of packets (loss, not in the model)"), std::string::npos) << text;
  EXPECT_NE(
      text.find("# step time, usable runs whose links dropped >= 0.1 % of their packets (loss: not in the "
                "model): median |error| 20.0 %"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("# step time, the other usable runs: median |error| 8.1 %"), std::string::npos) << text;
  // Without a lossy run, no split.
  v.rows[4].drop_share = -1;
  v.summary = *Summarize(v.rows, {});
  EXPECT_EQ(FormatValidationReport(v).find("the other usable runs"), std::string::npos);
}

// Usable runs whose busiest host waited for a core >= 10 % of the exchange time are summarized apart from
// those whose hosts waited less; runs of unknown waits are in neither, and every one stays in the step total.
TEST(FormatValidationReportTest, RunsWhoseHostsWaitedAreSummarizedApart) {
  Validation v;
  v.rows = FixedRows();
  v.rows[1].host_stall = 0.13;   // ps-1 A, +10 %: waited
  v.rows[4].host_stall = 0.10;   // ps-1 B, +20 %: at the share, waited
  v.rows[0].host_stall = 0.02;   // ring A: quiet
  v.rows[3].host_stall = 0.099;  // ring B: quiet, just below
  absl::StatusOr<ValidationSummary> s = Summarize(v.rows, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->step.count, 5);  // nothing excluded
  EXPECT_EQ(s->step_box_waited.count, 2);
  EXPECT_NEAR(s->step_box_waited.max_abs, 0.2, 1e-12);
  EXPECT_EQ(s->step_box_quiet.count, 2);  // ps-colocated A's waits are unknown: in neither
  v.summary = *s;
  const std::string text = FormatValidationReport(v);
  EXPECT_NE(text.find("# step time, usable runs whose busiest host waited for a core >= 10 % of the exchange "
                      "time (kept: "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# step time, usable runs whose hosts waited less: median |error| "), std::string::npos)
      << text;
  // Without a run that waited, no split.
  v.rows[1].host_stall = v.rows[4].host_stall = -1;
  v.summary = *Summarize(v.rows, {});
  EXPECT_EQ(FormatValidationReport(v).find("hosts waited less"), std::string::npos);
}

// The lossy runs' label says in how many of them the model costs the loss.
TEST(FormatValidationReportTest, TheLossLabelCountsTheCostedRuns) {
  Validation v;
  v.rows = FixedRows();
  v.rows[1].drop_share = v.rows[4].drop_share = 0.0025;  // two lossy ps-1 runs
  v.rows[4].incast = 2;
  v.rows[4].incast_s = 0.01;  // one costed
  v.summary = *Summarize(v.rows, {});
  EXPECT_EQ(v.summary.lossy_costed, 1);
  EXPECT_NE(FormatValidationReport(v).find("(loss: the model's incast term in 1 of them)"),
            std::string::npos);
  v.rows[1].incast = 2;
  v.rows[1].incast_s = 0.01;
  v.summary = *Summarize(v.rows, {});
  EXPECT_NE(FormatValidationReport(v).find("(loss: the model's incast term in each)"), std::string::npos);
  v.rows[1].incast_s = v.rows[4].incast_s = 0;
  v.summary = *Summarize(v.rows, {});
  EXPECT_NE(FormatValidationReport(v).find("(loss: not in the model)"), std::string::npos);
}

// The hosts' TCP beside the model's: said when they agree, a WARNING when the model was fitted under another.
TEST(FormatValidationReportTest, SaysWhetherTheHostsRanTheModelsTcp) {
  Validation v;
  v.rows = FixedRows();
  absl::StatusOr<ValidationSummary> s = Summarize(v.rows, {});
  ASSERT_TRUE(s.ok()) << s.status();
  v.summary = *s;
  v.hosts_tcp = "cubic, slow start after idle off";
  v.model_hosts_tcp = v.hosts_tcp;
  std::string text = FormatValidationReport(v);
  EXPECT_NE(text.find("# the hosts' TCP: cubic, slow start after idle off (as the model's calibration)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("WARNING"), std::string::npos) << text;
  v.model_hosts_tcp = "bbr, slow start after idle on";
  text = FormatValidationReport(v);
  EXPECT_NE(
      text.find("# WARNING: the hosts ran TCP cubic, slow start after idle off, the model was fitted with "
                "bbr, slow start after idle on"),
      std::string::npos)
      << text;
  v.model_hosts_tcp.clear();  // an older model file
  text = FormatValidationReport(v);
  EXPECT_NE(text.find("the model file does not say which it was fitted with"), std::string::npos) << text;
}

TEST(FormatHeldOutChecksTest, WinnerIsACheckErrorsAreReportedAgainstTheTargets) {
  absl::StatusOr<ValidationSummary> s = Summarize(FixedRows(), {});
  ASSERT_TRUE(s.ok()) << s.status();
  std::string text = FormatHeldOutChecks(*s);
  EXPECT_NE(text.find("# check held-out winner: 1 of 1 conditions outside the tie band 5.0 %"), std::string::npos)
      << text;
  EXPECT_NE(text.find(": PASS\n"), std::string::npos) << text;
  // Median 10 % misses the 5 % target; p90 16.7 % misses 10 %; exposed median 10 % meets 10 %.
  EXPECT_NE(text.find("|error| median 10.0 % (target 5 %: missed), p90 16.7 % (target 10 %: missed) over 5 runs"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("exposed exchange time: |error| median 10.0 % (target 10 %: met) over 4 runs"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1 EMULATOR-BOUND, 1 failed (of 7)"), std::string::npos) << text;
  EXPECT_EQ(text.find("FAIL"), std::string::npos) << text;

  // The model names ps-1 fastest in B where the ring measured faster by 56 %: the check fails.
  std::vector<ValidationRow> rows = FixedRows();
  rows[4].predicted_step_s = 0.2;
  s = Summarize(rows, {});
  ASSERT_TRUE(s.ok()) << s.status();
  text = FormatHeldOutChecks(*s);
  EXPECT_NE(text.find("# check held-out winner: 0 of 1 conditions"), std::string::npos) << text;
  EXPECT_NE(text.find(": FAIL\n"), std::string::npos) << text;

  // Nothing outside the band: information, not a check.
  s = Summarize({FixedRows()[0], FixedRows()[2]}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  text = FormatHeldOutChecks(*s);
  EXPECT_NE(text.find("# info held-out winner: no condition outside the tie band"), std::string::npos) << text;
  EXPECT_EQ(text.find("# check"), std::string::npos) << text;
}

TEST(ValidationScatterSvgTest, OneSeriesPerExchangeUsableRowsOnly) {
  const std::string svg = ValidationScatterSvg(FixedRows(), "model of box");
  std::string why;
  EXPECT_TRUE(WellFormed(svg, &why)) << why;
  for (const char* name : {"ring", "ps-1", "ps-colocated", "ps-dedicated", "measured = predicted"}) {
    EXPECT_GE(Count(svg, name), 1) << name;
  }
  EXPECT_GE(Count(svg, "predicted vs measured"), 1);
}

}  // namespace
}  // namespace psring::bench
