// The time limit validate and calibrate weigh each next sweep against (bench/cmd/time_limit.h), on explicit
// times, and calibrate's use of it: a limit no condition fits runs nothing, lists every condition not run,
// still hands the (empty) runs to keep_runs, and says why the fit has nothing.
#include "bench/cmd/time_limit.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/cmd/calibration.h"
#include "bench/model/calibration_plan.h"
#include "gtest/gtest.h"

namespace psring::bench {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000000);

TEST(SweepClockTest, WithoutALimitEverySweepStarts) {
  SweepClock clock(absl::InfiniteDuration(), kT0);
  EXPECT_EQ(clock.WhyNot(1e9, kT0 + absl::Hours(100)), "");
}

// Before any sweep ran the estimate is scaled by kFirstSweepPace: with 100 s, 79 s (98.75 s) starts, 81 s
// (101.25 s) does not, and the reason gives the numbers.
TEST(SweepClockTest, BeforeAnySweepTheEstimateIsScaledByTheFirstPace) {
  ASSERT_EQ(kFirstSweepPace, 1.25);
  SweepClock clock(absl::Seconds(100), kT0);
  EXPECT_DOUBLE_EQ(clock.Pace(), 1.25);
  EXPECT_EQ(clock.WhyNot(79, kT0), "");
  EXPECT_EQ(
      clock.WhyNot(81, kT0),
      "at 0 s it would end about 101 s in (the model's 81 s x 1.25, the pace taken before any sweep ran), "
      "past the time limit 100 s");
}

// A sweep estimated at 40 s that took 60 s sets the pace to 1.5: at 60 s in, 26 s (39 s) still fits the 100
// s, 27 s (40.5 s) does not. A sweep faster than its estimate never makes the next estimate shorter (pace >=
// 1).
TEST(SweepClockTest, ThePaceIsTheSweepsSoFarAndNeverBelowOne) {
  SweepClock clock(absl::Seconds(100), kT0);
  clock.Start(kT0);
  clock.Ran(40, kT0 + absl::Seconds(60));
  EXPECT_DOUBLE_EQ(clock.Pace(), 1.5);
  EXPECT_EQ(clock.WhyNot(26, kT0 + absl::Seconds(60)), "");
  const std::string why = clock.WhyNot(27, kT0 + absl::Seconds(60));
  EXPECT_NE(
      why.find("at 60 s it would end about 100 s in (the model's 27 s x 1.50, the pace of the sweeps so "
               "far)"),
      std::string::npos)
      << why;

  SweepClock fast(absl::Seconds(100), kT0);
  fast.Start(kT0);
  fast.Ran(40, kT0 + absl::Seconds(20));
  EXPECT_DOUBLE_EQ(fast.Pace(), 1.0);
  EXPECT_EQ(fast.WhyNot(80, kT0 + absl::Seconds(20)), "");
  EXPECT_NE(fast.WhyNot(81, kT0 + absl::Seconds(20)), "");
}

// No root needed: nothing runs.
TEST(RunCalibrationTest, ALimitNoConditionFitsRunsNothingAndSaysSo) {
  const CalibrationPlan plan = QuickCalibrationPlan();
  std::ostringstream progress;
  int kept = -1;
  absl::StatusOr<Calibration> c = RunCalibration(
      plan, ScalingOptions{}, model::FileInfo{"box", "2026-12-07", ""}, &progress,
      [&](const std::vector<model::MeasuredRun>& runs, const model::FileInfo&) {
        kept = static_cast<int>(runs.size());
        return absl::OkStatus();
      },
      absl::ZeroDuration());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(kept, 0);
  EXPECT_NE(
      c.status().message().find(absl::StrCat(plan.conditions.size(), " conditions not run (time limit)")),
      std::string::npos)
      << c.status();
  size_t lines = 0;
  for (size_t at = progress.str().find(", not run: at 0 s"); at != std::string::npos;
       at = progress.str().find(", not run: at 0 s", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, plan.conditions.size()) << progress.str();
}

// A supplementary sweep (fewer than every exchange) is not fitted: with nothing usable it says so, not that
// an exchange it never ran lacks a link run. No root needed: nothing runs.
TEST(RunCalibrationTest, ASupplementarySweepWithNoUsableRunSaysSoAndNamesNoOtherExchange) {
  CalibrationPlan plan = QuickCalibrationPlan();
  plan.exchanges = {Exchange::kPsOne, Exchange::kPsDedicated};
  EXPECT_TRUE(IsSupplementary(plan));
  EXPECT_FALSE(IsSupplementary(QuickCalibrationPlan()));
  std::ostringstream progress;
  absl::StatusOr<Calibration> c = RunCalibration(
      plan, ScalingOptions{}, model::FileInfo{"box", "2026-12-07", ""}, &progress,
      [](const std::vector<model::MeasuredRun>&, const model::FileInfo&) { return absl::OkStatus(); },
      absl::ZeroDuration());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  EXPECT_NE(c.status().message().find("supplementary sweep kept no usable run"), std::string::npos)
      << c.status();
  EXPECT_EQ(c.status().message().find("ring"), std::string::npos) << c.status();
}

}  // namespace
}  // namespace psring::bench
