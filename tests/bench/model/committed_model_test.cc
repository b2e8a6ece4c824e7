// The model committed with psring must have been calibrated on this tree's data path (bench/model/data_path.h):
// this test fails when PS/ring code that alters timing changed and nobody recalibrated.
#include <memory>
#include <string>

#include "bench/model/data_path.h"
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

}  // namespace
}  // namespace psring::bench::model
