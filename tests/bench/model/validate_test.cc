#include "bench/model/validate.h"

#include "gtest/gtest.h"

namespace psring::bench::model {
namespace {

TEST(ValidateTest, QuantileInterpolatesBetweenRanks) {
  // Sorted 1..10: median at position 4.5 -> 5.5; p90 at 8.1 -> 9.1 (numpy: 5.5, 9.1).
  const std::vector<double> v = {10, 3, 1, 7, 2, 9, 4, 6, 8, 5};
  EXPECT_DOUBLE_EQ(*Quantile(v, 0.5), 5.5);
  EXPECT_DOUBLE_EQ(*Quantile(v, 0.9), 9.1);
  EXPECT_DOUBLE_EQ(*Quantile(v, 0), 1);
  EXPECT_DOUBLE_EQ(*Quantile(v, 1), 10);
  EXPECT_DOUBLE_EQ(*Quantile({4}, 0.9), 4);
  EXPECT_FALSE(Quantile({}, 0.5).ok());
  EXPECT_FALSE(Quantile(v, 1.5).ok());
  EXPECT_FALSE(Quantile({1, NAN}, 0.5).ok());
}

TEST(ValidateTest, SummaryOfAbsoluteErrors) {
  // |e| = 0.01, 0.02, 0.03, 0.04, 0.20: median 0.03, p90 at position 3.6 -> 0.04 + 0.6 * 0.16 = 0.136.
  std::vector<double> errors = {0.02, -0.01, 0.20, -0.04, 0.03};
  absl::StatusOr<ErrorSummary> s = SummarizeErrors(errors);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->count, 5);
  EXPECT_DOUBLE_EQ(s->median_abs, 0.03);
  EXPECT_DOUBLE_EQ(s->p90_abs, 0.136);
  EXPECT_DOUBLE_EQ(s->max_abs, 0.20);
  EXPECT_DOUBLE_EQ(RelativeError(0.9, 1.2), -0.25);
}

TEST(ValidateTest, TieBandIsTheFloorUnlessNoiseIsLarger) {
  // Noise per condition (max - min) / median: 0.02/1.01, 0.3/10.15, one run skipped -> their mean (median of 2).
  absl::StatusOr<TieBand> quiet = ComputeTieBand({{1.0, 1.02, 1.01}, {10.0, 10.3}, {5.0}});
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  EXPECT_DOUBLE_EQ(quiet->band, 0.05);
  EXPECT_FALSE(quiet->from_noise);
  EXPECT_EQ(quiet->noise_conditions, 2);
  EXPECT_NEAR(quiet->noise, (0.02 / 1.01 + 0.3 / 10.15) / 2, 1e-12);
  EXPECT_NE(quiet->Describe().find("the floor"), std::string::npos) << quiet->Describe();
  // 10 % and 20 % spread: the median noise (15 %) sets the band.
  absl::StatusOr<TieBand> noisy = ComputeTieBand({{1.0, 1.1}, {2.0, 2.4}});
  ASSERT_TRUE(noisy.ok()) << noisy.status();
  EXPECT_TRUE(noisy->from_noise);
  EXPECT_NEAR(noisy->band, (0.1 / 1.05 + 0.4 / 2.2) / 2, 1e-12);
  EXPECT_NE(noisy->Describe().find("measured noise"), std::string::npos) << noisy->Describe();
  // Nothing repeated: the floor, and it says so.
  absl::StatusOr<TieBand> none = ComputeTieBand({});
  EXPECT_DOUBLE_EQ(none->band, 0.05);
  EXPECT_NE(none->Describe().find("no repeated runs"), std::string::npos);
  EXPECT_FALSE(ComputeTieBand({{1.0, 0.0}}).ok());
  EXPECT_FALSE(ComputeTieBand({}, -0.1).ok());
}

TEST(ValidateTest, WinnerAccuracyCountsOnlyClearMargins) {
  const std::vector<ConditionResult> conditions = {
      // Clear ring win (ps-1 is 50 % slower), predicted right.
      {"a", {{"ring", 1.0, 1.0}, {"ps-1", 1.4, 1.5}}},
      // Clear PS win (ring 20 % slower), predicted wrong.
      {"b", {{"ring", 0.9, 1.2}, {"ps-colocated", 1.0, 1.0}}},
      // Within the 5 % band: a tie, not scored whatever the prediction.
      {"c", {{"ring", 2.0, 1.03}, {"ps-1", 1.0, 1.0}}},
      // Three exchanges, margin against the second fastest (ps-dedicated, 10 %), predicted right.
      {"d", {{"ring", 3.0, 3.0}, {"ps-1", 1.0, 1.0}, {"ps-dedicated", 1.2, 1.1}}},
  };
  absl::StatusOr<WinnerAccuracy> w = ScoreWinners(conditions, 0.05);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->counted, 3);
  EXPECT_EQ(w->correct, 2);
  EXPECT_EQ(w->ties, 1);
  EXPECT_DOUBLE_EQ(w->accuracy, 2.0 / 3);
  ASSERT_EQ(w->verdicts.size(), 4u);
  EXPECT_EQ(w->verdicts[1].measured_winner, "ps-colocated");
  EXPECT_EQ(w->verdicts[1].predicted_winner, "ring");
  EXPECT_FALSE(w->verdicts[1].correct);
  EXPECT_NEAR(w->verdicts[1].measured_margin, 0.2, 1e-12);
  EXPECT_FALSE(w->verdicts[2].counted);
  EXPECT_NEAR(w->verdicts[3].measured_margin, 0.1, 1e-12);
  // A wider band (noise 25 %) turns b and d into ties.
  w = ScoreWinners(conditions, 0.25);
  EXPECT_EQ(w->counted, 1);
  EXPECT_EQ(w->ties, 3);
}

// The winner judged is the one printed before the run (the fastest prediction over every exchange): when that
// run, or the fastest measured one, was excluded, the condition is unjudged, never "right".
TEST(ValidateTest, AnExcludedPrintedOrMeasuredWinnerLeavesTheConditionUnjudged) {
  const std::vector<ConditionResult> conditions = {
      // Predicted ps-colocated, excluded (EMULATOR-BOUND): the usable ring beats ps-1 by 50 %, but the printed
      // winner was never measured.
      {"printed", {{"ring", 1.0, 1.0}, {"ps-1", 1.4, 1.5}, {"ps-colocated", 0.9, 1.6, true}}},
      // Predicted ring, right among the usable runs, but the fastest run measured (ps-dedicated) was excluded.
      {"measured", {{"ring", 1.0, 1.0}, {"ps-1", 1.4, 1.5}, {"ps-dedicated", 1.2, 0.8, true}}},
      // A failed run (not measured) that was not the printed winner does not stop the judgment.
      {"failed", {{"ring", 1.0, 1.0}, {"ps-1", 1.4, 1.5}, {"ps-dedicated", 1.2, -1, true}}},
      // Only one usable exchange besides an excluded one: nothing to compare the winner with.
      {"alone", {{"ring", 1.0, 1.0}, {"ps-1", 1.4, 1.6, true}}},
  };
  absl::StatusOr<WinnerAccuracy> w = ScoreWinners(conditions, 0.05);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->unjudged, 3);
  EXPECT_EQ(w->counted, 1);
  EXPECT_EQ(w->correct, 1);
  EXPECT_EQ(w->ties, 0);
  ASSERT_EQ(w->verdicts.size(), 4u);
  EXPECT_FALSE(w->verdicts[0].judged);
  EXPECT_FALSE(w->verdicts[0].correct);
  EXPECT_EQ(w->verdicts[0].predicted_winner, "ps-colocated");
  EXPECT_NE(w->verdicts[0].unjudged_reason.find("predicted winner ps-colocated"), std::string::npos);
  EXPECT_FALSE(w->verdicts[1].judged);
  EXPECT_NE(w->verdicts[1].unjudged_reason.find("ps-dedicated"), std::string::npos);
  EXPECT_TRUE(w->verdicts[2].judged);
  EXPECT_NEAR(w->verdicts[2].measured_margin, 0.5, 1e-12);
  EXPECT_FALSE(w->verdicts[3].judged);
}

// Where the intervals overlap, the model printed "fastest undetermined": when its point prediction's run is
// then excluded, the condition is unjudged and its reason says the model named no winner (plan 15, run 2:
// the report had printed "predicted ring UNJUDGED" for a condition the model had left undetermined).
TEST(ValidateTest, AnUnjudgedConditionSaysWhenTheModelNamedNoWinner) {
  const std::vector<ConditionResult> conditions = {
      // ring [0.9, 1.1] overlaps ps-colocated [1.0, 1.2]: undetermined; the ring's run excluded.
      {"overlap",
       {{"ring", 1.0, 1.0, true, 0.9, 1.1},
        {"ps-colocated", 1.1, 1.05, false, 1.0, 1.2},
        {"ps-1", 3.0, 3.1, false, 2.8, 3.2}}},
      // ring [0.9, 1.0] clears ps-colocated [1.1, 1.3]: named; the ring's run excluded.
      {"named",
       {{"ring", 0.95, 1.0, true, 0.9, 1.0},
        {"ps-colocated", 1.2, 1.05, false, 1.1, 1.3},
        {"ps-1", 3.0, 3.1, false, 2.8, 3.2}}},
  };
  absl::StatusOr<WinnerAccuracy> w = ScoreWinners(conditions, 0.05);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->unjudged, 2);
  EXPECT_EQ(w->undetermined, 0);
  ASSERT_EQ(w->verdicts.size(), 2u);
  EXPECT_FALSE(w->verdicts[0].winner_named);
  EXPECT_FALSE(w->verdicts[0].judged);
  EXPECT_NE(w->verdicts[0].unjudged_reason.find("named no winner"), std::string::npos)
      << w->verdicts[0].unjudged_reason;
  EXPECT_TRUE(w->verdicts[1].winner_named);
  EXPECT_NE(w->verdicts[1].unjudged_reason.find("the predicted winner ring was excluded"), std::string::npos)
      << w->verdicts[1].unjudged_reason;
}

// The one winner rule (CallWinner) that verdicts, projections and maps share.
TEST(ValidateTest, CallWinnerNamesTheFastestOnlyWhereItsIntervalClearsTheOthers) {
  EXPECT_FALSE(CallWinner({}).clear());
  EXPECT_EQ(CallWinner({}).fastest, -1);
  // 1 [0.9, 1.1] clears 2 [1.8, 2.2] and 3 [2.7, 3.3].
  WinnerCall call = CallWinner({{2, 1.8, 2.2}, {1, 0.9, 1.1}, {3, 2.7, 3.3}});
  EXPECT_TRUE(call.clear());
  EXPECT_EQ(call.fastest, 1);
  // 1 [0.5, 1.9] overlaps 2 [1.8, 2.2]: undetermined, the point winner still named, the overlap too.
  call = CallWinner({{1, 0.5, 1.9}, {3, 2.7, 3.3}, {2, 1.8, 2.2}});
  EXPECT_FALSE(call.clear());
  EXPECT_EQ(call.fastest, 0);
  EXPECT_EQ(call.overlapping, 2);
  // A candidate without an interval is compared by value only.
  call = CallWinner({{1, 0, 0}, {1.01, 0, 0}});
  EXPECT_TRUE(call.clear());
  EXPECT_EQ(call.fastest, 0);
  // Equal values: the first.
  EXPECT_EQ(CallWinner({{1, 0, 0}, {1, 0, 0}}).fastest, 0);
}

TEST(ValidateTest, WinnerAccuracyErrors) {
  EXPECT_FALSE(ScoreWinners({{"lonely", {{"ring", 1, 1}}}}, 0.05).ok());
  EXPECT_FALSE(ScoreWinners({{"zero", {{"ring", 1, 0}, {"ps-1", 1, 1}}}}, 0.05).ok());
  EXPECT_FALSE(ScoreWinners({}, -1).ok());
  absl::StatusOr<WinnerAccuracy> empty = ScoreWinners({}, 0.05);
  EXPECT_EQ(empty->accuracy, -1);
}

}  // namespace
}  // namespace psring::bench::model
