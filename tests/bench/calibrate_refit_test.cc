// End to end: //bench:calibrate --refit with several runs files. The committed runs split in two and merged
// again give the committed runs back (--runs_out) and a model; runs of another host are refused, named.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/model/calibration_runs.h"
#include "bench/model/model_file.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace psring::bench {
namespace {

using ::bazel::tools::cpp::runfiles::Runfiles;
using ::testing::HasSubstr;

absl::StatusOr<ProcessResult> RunCalibrate(const std::string& binary, const std::vector<std::string>& argv) {
  JobOptions options;
  options.timeout = absl::Seconds(120);
  std::vector<std::string> full = {binary};
  full.insert(full.end(), argv.begin(), argv.end());
  absl::StatusOr<std::vector<ProcessResult>> results = RunJob({{"calibrate", full}}, options);
  if (!results.ok()) return results.status();
  return (*results)[0];
}

TEST(CalibrateRefitTest, MergesRunsFilesOfOneHostAndRefusesAnother) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  const char* tmp = std::getenv("TEST_TMPDIR");
  ASSERT_NE(tmp, nullptr);
  const std::string binary = runfiles->Rlocation("psring/bench/calibrate");
  absl::StatusOr<model::SavedRuns> committed =
      model::ReadCalibrationRuns(runfiles->Rlocation("psring/bench/results/committed_runs.json"));
  ASSERT_TRUE(committed.ok()) << committed.status();
  ASSERT_GT(committed->runs.size(), 2u);

  // The committed runs in two files, as a calibration and a supplementary sweep would leave them.
  model::SavedRuns first = *committed, second = *committed;
  const size_t half = committed->runs.size() / 2;
  first.runs.assign(committed->runs.begin(), committed->runs.begin() + half);
  second.runs.assign(committed->runs.begin() + half, committed->runs.end());
  const std::string a = absl::StrCat(tmp, "/a.json"), b = absl::StrCat(tmp, "/b.json");
  ASSERT_TRUE(model::WriteSavedRuns(a, first).ok());
  ASSERT_TRUE(model::WriteSavedRuns(b, second).ok());
  const std::string merged = absl::StrCat(tmp, "/merged.json"), out = absl::StrCat(tmp, "/model.json");
  absl::StatusOr<ProcessResult> refit =
      RunCalibrate(binary, {"--refit=" + a + "," + b, "--model_out=" + out, "--runs_out=" + merged});
  ASSERT_TRUE(refit.ok()) << refit.status();
  ASSERT_EQ(refit->exit_code, 0) << refit->stderr_tail << "\n" << refit->stdout_text;
  EXPECT_THAT(refit->stdout_text, HasSubstr(absl::StrCat("# runs file: ", merged, " (", committed->runs.size())));
  absl::StatusOr<model::SavedRuns> back = model::ReadCalibrationRuns(merged);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->runs.size(), committed->runs.size());
  for (size_t i = 0; i < back->runs.size(); ++i) EXPECT_EQ(back->runs[i].seconds, committed->runs[i].seconds);
  EXPECT_EQ(back->file.data_path_fingerprint(), committed->file.data_path_fingerprint());
  absl::StatusOr<proto::CostModelFile> model = model::ReadModelFile(out);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->data_path_fingerprint(), committed->file.data_path_fingerprint());

  // Another host's runs: a model's CPU ceilings hold for one host, so the merge stops and says so.
  model::SavedRuns other = second;
  other.file.set_host("another-host");
  const std::string c = absl::StrCat(tmp, "/c.json");
  ASSERT_TRUE(model::WriteSavedRuns(c, other).ok());
  refit = RunCalibrate(binary, {"--refit=" + a + "," + c, "--model_out=" + absl::StrCat(tmp, "/no.json")});
  ASSERT_TRUE(refit.ok()) << refit.status();
  EXPECT_NE(refit->exit_code, 0);
  EXPECT_THAT(refit->stderr_tail, HasSubstr("was measured on host 'another-host'"));
  EXPECT_FALSE(std::ifstream(absl::StrCat(tmp, "/no.json")).good()) << "no model from a refused merge";
}

}  // namespace
}  // namespace psring::bench
