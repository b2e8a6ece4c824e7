// The model committed with psring must have been calibrated on this tree's data path (bench/model/data_path.h):
// this test fails when PS/ring code that alters timing changed and nobody recalibrated.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/model/calibration_runs.h"
#include "bench/model/collective.h"
#include "bench/model/data_path.h"
#include "bench/model/incast_fit.h"
#include "bench/model/model_file.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace psring::bench::model {
namespace {

using ::bazel::tools::cpp::runfiles::Runfiles;

// The model committed with psring (bench/BUILD.bazel's COMMITTED_MODEL, the default --model of every suite)
// must have been calibrated on this tree's data path. When this fails: recalibrate on a quiet machine
// (./bazelw run //bench:calibrate -- --quick), validate it, and commit the new file as the committed model.
TEST(DataPath, TheCommittedModelWasCalibratedOnThisTree) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  const std::string path = runfiles->Rlocation("psring/bench/results/committed_model.json");
  absl::StatusOr<proto::CostModelFile> file = ReadModelFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const DataPathState state = CompareDataPath(*file);
  EXPECT_TRUE(state.current) << state.Describe();
}

// The committed model is the fit of the committed runs by this tree's fit: a change of the fit or of the
// model's terms must refit them (./bazelw run //bench:calibrate -- --refit=bench/results/committed_runs.json
// --model_out=bench/results/committed_model.json) and be validated again, not leave a model the code would no
// longer produce.
TEST(DataPath, TheCommittedModelIsTheFitOfTheCommittedRuns) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  const std::string runs_path = runfiles->Rlocation("psring/bench/results/committed_runs.json");
  absl::StatusOr<SavedRuns> saved = ReadCalibrationRuns(runs_path);
  ASSERT_TRUE(saved.ok()) << saved.status();
  absl::StatusOr<proto::CostModelFile> committed =
      ReadModelFile(runfiles->Rlocation("psring/bench/results/committed_model.json"));
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_EQ(saved->file.date(), committed->date()) << "the runs are not the committed model's calibration";
  EXPECT_EQ(saved->file.data_path_fingerprint(), committed->data_path_fingerprint());
  absl::StatusOr<proto::CostModelFile> refit = RefitModel(*saved, runs_path);
  ASSERT_TRUE(refit.ok()) << refit.status();
  // The fit's pattern search stops at a step of 1e-7 in log space, so another binary (this test's against
  // calibrate's, gcc's against clang's) may stop a step apart (ps-1's window 2e-9 relative on 2026-11-28):
  // 1e-6 relative, far below any parameter's standard error (>= 1e-3 relative), tells a refit from a
  // different fit.
  constexpr double kSearchResolution = 1e-6;
  for (Topology t : AllTopologies()) {
    absl::StatusOr<ExchangeParams> want = ParamsOf(*committed, t);
    absl::StatusOr<ExchangeParams> got = ParamsOf(*refit, t);
    ASSERT_TRUE(want.ok() && got.ok());
    for (const ParamTerm& term : ParamTerms()) {
      const double a = (*want).*term.member, b = (*got).*term.member;
      EXPECT_NEAR(b, a, kSearchResolution * std::max(1.0, std::abs(a)))
          << TopologyName(t) << " " << term.name;
    }
  }
  // What the intervals take from the fit: the scatter and the extrapolation error measured on the runs.
  ASSERT_EQ(refit->exchanges_size(), committed->exchanges_size());
  for (int i = 0; i < committed->exchanges_size(); ++i) {
    const proto::ExchangeModel& want = committed->exchanges(i);
    const proto::ExchangeModel& got = refit->exchanges(i);
    SCOPED_TRACE(want.exchange());
    EXPECT_NEAR(got.residual_rel_sd(), want.residual_rel_sd(), kSearchResolution);
    EXPECT_NEAR(got.loopback_residual_rel_sd(), want.loopback_residual_rel_sd(), kSearchResolution);
    ASSERT_EQ(got.extrapolation_size(), want.extrapolation_size()) << "refit the committed runs";
    for (int j = 0; j < want.extrapolation_size(); ++j) {
      EXPECT_EQ(got.extrapolation(j).dimension(), want.extrapolation(j).dimension());
      EXPECT_NEAR(got.extrapolation(j).log_sd_per_log_factor(), want.extrapolation(j).log_sd_per_log_factor(),
                  kSearchResolution);
    }
  }
}

// The committed model's incast term is the fit of the reports it lists by this tree's fit_incast: a change of
// the term, its fit or the lossless windows it reads must refit it (./bazelw run //bench:fit_incast --
// --model=bench/results/committed_model.json --reports=<its incast.fitted_on> --out=...) and be validated
// again.
TEST(DataPath, TheCommittedIncastTermIsTheFitOfItsReports) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  absl::StatusOr<proto::CostModelFile> committed =
      ReadModelFile(runfiles->Rlocation("psring/bench/results/committed_model.json"));
  ASSERT_TRUE(committed.ok()) << committed.status();
  ASSERT_TRUE(committed->has_incast()) << "the committed model has no incast term";
  ASSERT_GT(committed->incast().fitted_on_size(), 0);
  // A term fitted on reports an earlier file predicted names that file (incast.reports_model).
  std::optional<proto::CostModelFile> reports_model;
  if (committed->incast().has_reports_model()) {
    const std::string path = committed->incast().reports_model();
    absl::StatusOr<proto::CostModelFile> then = ReadModelFile(runfiles->Rlocation("psring/" + path));
    ASSERT_TRUE(then.ok()) << then.status() << " (is " << path << " among //bench:committed_incast_reports?)";
    reports_model = *then;
  }
  std::vector<IncastPoint> points;
  for (const std::string& report : committed->incast().fitted_on()) {
    absl::StatusOr<std::vector<ReportRow>> rows =
        ReadValidationReport(runfiles->Rlocation("psring/" + report), report);
    ASSERT_TRUE(rows.ok()) << rows.status() << " (is it among //bench:committed_incast_reports?)";
    absl::StatusOr<std::vector<IncastPoint>> more =
        IncastPointsOf(*committed, *rows, ReportDefaults{}, reports_model ? &*reports_model : nullptr);
    ASSERT_TRUE(more.ok()) << more.status();
    points.insert(points.end(), more->begin(), more->end());
  }
  absl::StatusOr<proto::IncastCost> refit = FitIncast(points);
  ASSERT_TRUE(refit.ok()) << refit.status();
  const proto::IncastCost& want = committed->incast();
  EXPECT_EQ(refit->runs(), want.runs());
  EXPECT_NEAR(refit->round_trips_per_cut().value(), want.round_trips_per_cut().value(), 1e-9);
  EXPECT_NEAR(refit->round_trips_per_cut().std_error(), want.round_trips_per_cut().std_error(), 1e-9);
  EXPECT_NEAR(refit->residual_rel_sd(), want.residual_rel_sd(), 1e-9);
  EXPECT_EQ(refit->has_onset_ratio(), want.has_onset_ratio());
  EXPECT_NEAR(refit->onset_ratio().value(), want.onset_ratio().value(), 1e-9);
  EXPECT_NEAR(refit->onset_ratio().std_error(), want.onset_ratio().std_error(), 1e-9);
}

}  // namespace
}  // namespace psring::bench::model
