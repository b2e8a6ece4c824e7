#include "bench/model/incast_fit.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/model/model_file.h"
#include "gtest/gtest.h"
#include "tests/bench/model/synthetic_runs.h"

namespace psring::bench::model {
namespace {

// Every PS exchange with a 64 KiB window, the ring without one.
proto::CostModelFile Windowed() {
  std::vector<ExchangeParams> params;
  for (Topology t : AllTopologies()) {
    ExchangeParams p{0, 1, t == Topology::kRing ? 0.0 : 64 << 10, 0};
    params.push_back(p);
  }
  return ModelFileOf(params);
}

// A report row as //bench:validate prints it (bench/report/validation_report.cc).
std::string Row(const std::string& condition, const std::string& exchange, double predicted, double measured,
                const std::string& note) {
  return absl::StrFormat("  %-38s %-13s %9.3f %-19s %9.3f %7s %9.3f %9.3f %7s  %-8s %s\n", condition,
                         exchange, predicted,
                         absl::StrFormat("[%.3f, %.3f]", predicted * 0.9, predicted * 1.1), measured, "-1.0%",
                         predicted, measured, "-1.0%", "link", note);
}

TEST(ParseValidationReportTest, ReadsTheRowsAndWhatExcludedThem) {
  const std::string text = absl::StrCat(
      "# plan: x.json\n# condition  exchange  pred_s ...\n",
      Row("70mbit 40ms queue 10ms N=8 1MiB", "ring", 0.654, 0.647, ""),
      Row("70mbit 40ms queue 10ms N=8 1MiB", "ps-1", 1.834, 1.975,
          "links dropped 0.36% of packets (loss, the incast term's); INCAST x2.9 +0.366 s"),
      Row("70mbit 40ms queue 10ms N=8 1MiB", "ps-dedicated", 0.717, 0.833,
          "EMULATOR-BOUND (host 9's tasks waited); INCAST x1.4"),
      "  120mbit 12ms N=4 1MiB                  ps-colocated      0.128 [0.120, 0.136]              -       -"
      "     0.128         -       -  latency  failed: worker 3 exited 1\n",
      "# step time: median |error| 3.6 %\n",
      "#   70mbit 40ms queue 10ms N=4 1MiB        predicted ring          UNJUDGED: ...\n");
  absl::StatusOr<std::vector<ReportRow>> rows = ParseValidationReport(text, "r.txt");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_EQ((*rows)[0].condition, "70mbit 40ms queue 10ms N=8 1MiB");
  EXPECT_EQ((*rows)[0].topology, Topology::kRing);
  EXPECT_FALSE((*rows)[0].excluded);
  EXPECT_EQ((*rows)[1].topology, Topology::kPsOne);
  EXPECT_DOUBLE_EQ((*rows)[1].predicted_s, 1.834);
  EXPECT_DOUBLE_EQ((*rows)[1].measured_s, 1.975);
  EXPECT_DOUBLE_EQ((*rows)[1].incast_s, 0.366);
  EXPECT_FALSE((*rows)[1].excluded);
  EXPECT_TRUE((*rows)[2].excluded);   // EMULATOR-BOUND
  EXPECT_EQ((*rows)[2].incast_s, 0);  // marked, no cost printed
  EXPECT_TRUE((*rows)[3].excluded);   // failed, not measured
  EXPECT_EQ((*rows)[3].measured_s, -1);

  EXPECT_EQ((*rows)[0].model_date, "");  // no header in this text
  absl::StatusOr<std::vector<ReportRow>> dated = ParseValidationReport(
      absl::StrCat(
          "# VALIDATION on held-out conditions (model of vm, 2026-12-01, frozen; predicted before each "
          "run): 1 runs, 1 usable\n",
          Row("120mbit 12ms queue 5ms N=8 1MiB", "ps-1", 0.675, 0.766, "")),
      "dated.txt");
  ASSERT_TRUE(dated.ok()) << dated.status();
  EXPECT_EQ((*dated)[0].model_date, "2026-12-01");
  // Its predictions are that model's: another model file cannot take them as its lossless ones.
  EXPECT_TRUE(IncastPointsOf(Windowed(), *dated, ReportDefaults{}).ok());  // ModelFileOf's date
  proto::CostModelFile other = Windowed();
  other.set_date("2027-01-01");
  absl::StatusOr<std::vector<IncastPoint>> mismatched = IncastPointsOf(other, *dated, ReportDefaults{});
  EXPECT_EQ(mismatched.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mismatched.status().message().find("predicted by the model file of 2026-12-01"),
            std::string::npos)
      << mismatched.status();

  EXPECT_EQ(ParseValidationReport("# nothing\nhello\n", "empty.txt").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::vector<ReportRow>> bad =
      ParseValidationReport("  70mbit 40ms N=8 1MiB  ps-1  x.yz [1, 2] 1 2 3 4 5 6 7\n", "bad.txt");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bad.txt"), std::string::npos) << bad.status();
}

TEST(IncastPointsOfTest, TakesUsablePsRowsWhoseBurstOverflowsThePort) {
  const proto::CostModelFile model = Windowed();
  std::vector<ReportRow> rows;
  auto add = [&](const std::string& condition, Topology t, double predicted, double measured, bool excluded) {
    ReportRow r;
    r.condition = condition;
    r.topology = t;
    r.predicted_s = predicted;
    r.measured_s = measured;
    r.excluded = excluded;
    r.origin = "r.txt";
    rows.push_back(r);
  };
  add("120mbit 12ms queue 5ms N=8 1MiB", Topology::kPsOne, 0.675, 0.766, false);    // a point
  add("120mbit 12ms queue 5ms N=8 1MiB", Topology::kRing, 0.174, 0.178, false);     // the ring: none
  add("120mbit 12ms queue 5ms N=4 1MiB", Topology::kPsOne, 0.430, 0.428, false);    // R = 0.87
  add("120mbit 12ms queue 5ms N=12 1MiB", Topology::kPsOne, 1.0, 1.2, true);        // excluded
  add("120mbit 12ms N=16 1MiB", Topology::kPsOne, 1.335, 1.525, false);             // the default queue
  add("150mbit 2ms N=8 resnet50/64 bucketed 25MB", Topology::kPsOne, 1, 2, false);  // replay: skipped
  absl::StatusOr<std::vector<IncastPoint>> points = IncastPointsOf(model, rows, ReportDefaults{});
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 2u);
  // 15 MB/s: a 5 ms queue holds 75 kB and the 10 ms burst 150 kB; 7 windows of 64 KiB burst into 225 kB.
  const IncastPoint& p = (*points)[0];
  EXPECT_DOUBLE_EQ(p.conditions.port_buffer_bytes, 225000);
  EXPECT_NEAR(p.ratio, 7.0 * 65536 / 225000, 1e-12);
  EXPECT_NEAR(p.round_trip_s, 0.039, 1e-12);  // 2 x 12 ms + 225 kB / 15 MB/s
  EXPECT_NEAR(p.excess_s, 0.091, 1e-12);
  EXPECT_NEAR(p.x, std::log(7.0 * 65536 / 225000) / std::log(1 / 0.7) * 0.039, 1e-12);
  // The cluster's 50 ms queue where the name gives none: 750 kB + 150 kB; 15 windows burst (R = 1.09).
  EXPECT_DOUBLE_EQ((*points)[1].conditions.port_buffer_bytes, 900000);
  EXPECT_NEAR((*points)[1].ratio, 15.0 * 65536 / 900000, 1e-12);

  // A cost the report's model already included comes off the prediction.
  rows[0].predicted_s = 0.675 + 0.1;
  rows[0].incast_s = 0.1;
  points = IncastPointsOf(model, rows, ReportDefaults{});
  ASSERT_TRUE(points.ok()) << points.status();
  EXPECT_NEAR((*points)[0].excess_s, 0.091, 1e-12);

  add("fast 12ms N=8 1MiB", Topology::kPsOne, 1, 2, false);
  EXPECT_EQ(IncastPointsOf(model, rows, ReportDefaults{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Reports an earlier file predicted, fitted over a recalibrated model's lossless terms: each row's printed
// lossless prediction moves by the two files' difference at its conditions, and the dates are checked against
// the earlier file.
TEST(IncastPointsOfTest, ShiftsTheReportsPredictionsToARecalibratedModel) {
  // The reports' file: every PS window 16 KiB; the recalibrated one: 64 KiB (Windowed), dated later.
  std::vector<ExchangeParams> params;
  for (Topology t : AllTopologies())
    params.push_back(ExchangeParams{0, 1, t == Topology::kRing ? 0.0 : 16 << 10, 0});
  const proto::CostModelFile then = ModelFileOf(params);
  proto::CostModelFile now = Windowed();
  now.set_date("2027-01-01");
  // ps-1 at 120 Mbit/s 12 ms N = 8, 1 MiB as the reports' file predicted it: 64 windows of 16 KiB at a 24 ms
  // round trip (1.536 s) and the two hops (0.024 s).
  absl::StatusOr<std::vector<ReportRow>> rows =
      ParseValidationReport(absl::StrCat("# VALIDATION on held-out conditions (model of vm, ", then.date(),
                                         ", frozen; predicted before each run): 1 runs, 1 usable\n",
                                         Row("120mbit 12ms queue 5ms N=8 1MiB", "ps-1", 1.560, 0.700, "")),
                            "then.txt");
  ASSERT_TRUE(rows.ok()) << rows.status();
  // The recalibrated file alone did not predict these rows.
  EXPECT_EQ(IncastPointsOf(now, *rows, ReportDefaults{}).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::vector<IncastPoint>> points = IncastPointsOf(now, *rows, ReportDefaults{}, &then);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 1u);
  // With 64 KiB windows the link binds: 8 MiB at 15 MB/s (0.5592 s) and the two hops, 0.5832 s in all.
  EXPECT_NEAR((*points)[0].lossless_s, 8.0 * (1 << 20) / 15e6 + 0.024, 1e-9);
  EXPECT_NEAR((*points)[0].excess_s, 0.700 - 0.5832, 1e-4);
  // The burst is the recalibrated file's: 7 windows of 64 KiB into the 225 kB port.
  EXPECT_NEAR((*points)[0].ratio, 7.0 * 65536 / 225000, 1e-12);
  // A report the given file did not predict either is refused, naming it.
  proto::CostModelFile other = then;
  other.set_date("2026-01-01");
  absl::StatusOr<std::vector<IncastPoint>> wrong = IncastPointsOf(now, *rows, ReportDefaults{}, &other);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("the reports' model given"), std::string::npos) << wrong.status();
}

// Gradient-mode ps-1 and dedicated-PS rows (predicted 1 s, measured 1 s until a test sets it) at every
// link x N.
std::vector<ReportRow> SyntheticRows(const std::vector<std::string>& links, const std::vector<int>& nodes) {
  std::vector<ReportRow> rows;
  for (const std::string& link : links) {
    for (int n : nodes) {
      for (Topology t : {Topology::kPsOne, Topology::kPsDedicated}) {
        ReportRow r;
        r.condition = absl::StrCat(link, " N=", n, " 1MiB");
        r.topology = t;
        r.predicted_s = 1;
        r.measured_s = 1;
        r.origin = "synthetic";
        rows.push_back(r);
      }
    }
  }
  return rows;
}

TEST(FitIncastTest, RecoversTheRoundTripsPerCutFromNoisyRuns) {
  const proto::CostModelFile model = Windowed();
  // Runs at several shallow ports whose excess is 1.5 round trips per cut, +-10 % alternating.
  std::vector<ReportRow> rows = SyntheticRows(
      {"120mbit 12ms queue 5ms", "70mbit 40ms queue 10ms", "80mbit 25ms queue 5ms"}, {8, 12, 16});
  int i = 0;
  absl::StatusOr<std::vector<IncastPoint>> unit = IncastPointsOf(model, rows, ReportDefaults{});
  ASSERT_TRUE(unit.ok()) << unit.status();
  ASSERT_EQ(unit->size(), rows.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    rows[k].measured_s = 1 + 1.5 * (*unit)[k].x * (i++ % 2 == 0 ? 1.1 : 0.9);
  }
  absl::StatusOr<std::vector<IncastPoint>> points = IncastPointsOf(model, rows, ReportDefaults{});
  ASSERT_TRUE(points.ok()) << points.status();
  IncastFitOptions from_the_buffer;
  from_the_buffer.fit_onset = false;
  absl::StatusOr<proto::IncastCost> fit = FitIncast(*points, from_the_buffer);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_FALSE(fit->has_onset_ratio()) << "R0 = 1 is left unset";
  EXPECT_NEAR(fit->round_trips_per_cut().value(), 1.5, 0.05);
  EXPECT_GT(fit->round_trips_per_cut().std_error(), 0);
  EXPECT_LT(fit->round_trips_per_cut().std_error(), 0.05);
  EXPECT_NEAR(fit->residual_rel_sd(), 0.1, 0.03);  // the +-10 % scatter
  EXPECT_DOUBLE_EQ(fit->multiplicative_decrease(), 0.7);
  EXPECT_EQ(fit->runs(), static_cast<int>(rows.size()));
  EXPECT_NEAR(fit->min_round_trip_s(), 0.039, 1e-12);
  EXPECT_NEAR(fit->max_round_trip_s(), 0.080 + 0.010 + 0.010, 1e-12);  // 70 Mbit/s: 2 x 40 + 10 + 10 ms

  // The fitted file reads back, and its PS exchanges (not the ring) carry c.
  proto::CostModelFile with = model;
  *with.mutable_incast() = *fit;
  ASSERT_TRUE(ValidateModelFile(with).ok()) << ValidateModelFile(with);
  EXPECT_NEAR(ParamsOf(with, Topology::kPsOne)->incast_round_trips, 1.5, 0.05);
  EXPECT_NEAR(ParamsOf(with, Topology::kPsColocated)->incast_round_trips, 1.5, 0.05);
  EXPECT_EQ(ParamsOf(with, Topology::kRing)->incast_round_trips, 0);
  EXPECT_EQ(ParamsOf(model, Topology::kPsOne)->incast_round_trips, 0);
  EXPECT_EQ(DescribeIncastTerm(model).rfind("incast term: none", 0), 0u) << DescribeIncastTerm(model);
  EXPECT_NE(DescribeIncastTerm(with).find(absl::StrFormat("c = %.3f", fit->round_trips_per_cut().value())),
            std::string::npos)
      << DescribeIncastTerm(with);
  EXPECT_NE(DescribeIncastTerm(with).find("round trips 39-100 ms"), std::string::npos)
      << DescribeIncastTerm(with);
  // A term that is not a cost, or another TCP's decrease, is refused.
  proto::CostModelFile bad = with;
  bad.mutable_incast()->mutable_round_trips_per_cut()->set_value(-1);
  EXPECT_NE(ValidateModelFile(bad).message().find("incast.round_trips_per_cut"), std::string::npos);
  bad = with;
  bad.mutable_incast()->set_multiplicative_decrease(0.5);
  EXPECT_NE(ValidateModelFile(bad).message().find("cubic"), std::string::npos) << ValidateModelFile(bad);

  // An onset below 1 is refused.
  bad = with;
  bad.mutable_incast()->mutable_onset_ratio()->set_value(0.8);
  EXPECT_NE(ValidateModelFile(bad).message().find("incast.onset_ratio"), std::string::npos)
      << ValidateModelFile(bad);

  // Too few points, or an excess that does not grow with the term: nothing to fit.
  EXPECT_EQ(FitIncast({(*points)[0], (*points)[1]}).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<IncastPoint> shrinking = *points;
  for (IncastPoint& p : shrinking) p.excess_s = -p.x;
  EXPECT_EQ(FitIncast(shrinking).status().code(), absl::StatusCode::kInvalidArgument);
}

// Runs that drop only from a burst 1.3 times the port's buffer: the fit finds the onset and c, gives them
// standard errors from the bootstrap, and the model file carries R0 to every PS exchange.
TEST(FitIncastTest, FindsTheOnsetFromWhichThePortDrops) {
  const proto::CostModelFile model = Windowed();
  std::vector<int> nodes;
  for (int n = 3; n <= 16; ++n) nodes.push_back(n);
  const std::vector<ReportRow> rows = SyntheticRows(
      {"120mbit 12ms queue 5ms", "70mbit 40ms queue 10ms", "80mbit 25ms queue 5ms", "100mbit 30ms queue 8ms"},
      nodes);
  absl::StatusOr<std::vector<IncastPoint>> unit = IncastPointsOf(model, rows, ReportDefaults{});
  ASSERT_TRUE(unit.ok()) << unit.status();
  ASSERT_GT(unit->size(), 40u);
  std::vector<ReportRow> kept;
  int i = 0;
  for (const IncastPoint& p : *unit) {
    ReportRow r = p.row;
    r.measured_s = 1 + 1.5 * IncastTermAt(p, 1.3) * (i % 2 == 0 ? 1.1 : 0.9) + (i % 3 - 1) * 0.002;
    ++i;
    kept.push_back(r);
  }
  absl::StatusOr<std::vector<IncastPoint>> points = IncastPointsOf(model, kept, ReportDefaults{});
  ASSERT_TRUE(points.ok()) << points.status();
  int below = 0;
  for (const IncastPoint& p : *points) below += p.ratio <= 1.3;
  ASSERT_GE(below, 5) << "the runs must reach below the onset";
  IncastFitReport report;
  absl::StatusOr<proto::IncastCost> fit = FitIncast(*points, IncastFitOptions{}, &report);
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_TRUE(fit->has_onset_ratio());
  EXPECT_NEAR(fit->onset_ratio().value(), 1.3, 0.05);
  EXPECT_GT(fit->onset_ratio().std_error(), 0);
  EXPECT_LT(fit->onset_ratio().std_error(), 0.2 * 1.3);
  EXPECT_TRUE(report.onset_identified);
  EXPECT_LE(report.onset_low, fit->onset_ratio().value());
  EXPECT_GE(report.onset_high, fit->onset_ratio().value());
  EXPECT_NEAR(fit->round_trips_per_cut().value(), 1.5, 0.1);
  EXPECT_GT(fit->round_trips_per_cut().std_error(), 0);
  // The same runs and options give the same file (the bootstrap's seed is fixed).
  absl::StatusOr<proto::IncastCost> again = FitIncast(*points);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->SerializeAsString(), fit->SerializeAsString());
  // Held at R0 = 1, the same runs fit worse: the onset is what they show.
  IncastFitOptions from_the_buffer;
  from_the_buffer.fit_onset = false;
  absl::StatusOr<proto::IncastCost> flat = FitIncast(*points, from_the_buffer);
  ASSERT_TRUE(flat.ok());
  EXPECT_GT(flat->residual_rel_sd(), fit->residual_rel_sd());

  proto::CostModelFile with = model;
  *with.mutable_incast() = *fit;
  ASSERT_TRUE(ValidateModelFile(with).ok()) << ValidateModelFile(with);
  EXPECT_DOUBLE_EQ(ParamsOf(with, Topology::kPsOne)->incast_onset_ratio, fit->onset_ratio().value());
  EXPECT_DOUBLE_EQ(ParamsOf(with, Topology::kPsDedicated)->incast_onset_ratio, fit->onset_ratio().value());
  EXPECT_NE(DescribeIncastTerm(with).find(absl::StrFormat("R0 = %.2f", fit->onset_ratio().value())),
            std::string::npos)
      << DescribeIncastTerm(with);
}

// Runs far above any onset, with a wide scatter, say little about where the port starts dropping: the onset's
// bootstrap spread is wide, and it is dropped (R0 = 1: the term from the buffer on) and reported.
TEST(FitIncastTest, DropsAnOnsetTheRunsDoNotPinDown) {
  const proto::CostModelFile model = Windowed();
  std::vector<ReportRow> rows = SyntheticRows(
      {"120mbit 12ms queue 5ms", "70mbit 40ms queue 10ms", "80mbit 25ms queue 5ms"}, {12, 14, 16});
  absl::StatusOr<std::vector<IncastPoint>> unit = IncastPointsOf(model, rows, ReportDefaults{});
  ASSERT_TRUE(unit.ok()) << unit.status();
  constexpr double kScatter[] = {1.4, 0.6, 1.1, 0.8, 1.3, 0.7, 0.9, 1.2};
  for (size_t k = 0; k < rows.size(); ++k) {
    rows[k].measured_s = 1 + 1.5 * (*unit)[k].x * kScatter[k % 8];
  }
  absl::StatusOr<std::vector<IncastPoint>> points = IncastPointsOf(model, rows, ReportDefaults{});
  ASSERT_TRUE(points.ok()) << points.status();
  IncastFitReport report;
  absl::StatusOr<proto::IncastCost> fit = FitIncast(*points, IncastFitOptions{}, &report);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_GT(report.onset_std_error, kIdentifiedRelativeError * report.onset_fitted)
      << report.onset_fitted << " " << report.onset_low << "-" << report.onset_high;
  EXPECT_FALSE(report.onset_identified);
  EXPECT_FALSE(fit->has_onset_ratio()) << "dropped: R0 = 1";
  IncastFitOptions from_the_buffer;
  from_the_buffer.fit_onset = false;
  absl::StatusOr<proto::IncastCost> flat = FitIncast(*points, from_the_buffer);
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->SerializeAsString(), fit->SerializeAsString()) << "the term as fitted without an onset";
}

}  // namespace
}  // namespace psring::bench::model
