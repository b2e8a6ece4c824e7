// End to end: //bench:calibrate --cpu_only with the real worker binaries on loopback (small sizes, few steps:
// about 6 s on 2 cores), then //bench:crossover_maps projecting with the file it wrote. Checks the file reads
// back valid with every exchange, the table says it is this host's CPU, and the projection names the file.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/model/cpu_model.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace psring::bench {
namespace {

using ::bazel::tools::cpp::runfiles::Runfiles;
using ::testing::HasSubstr;

absl::StatusOr<ProcessResult> RunTool(const std::string& name, const std::vector<std::string>& argv) {
  JobOptions options;
  options.timeout = absl::Seconds(90);
  absl::StatusOr<std::vector<ProcessResult>> results = RunJob({{name, argv}}, options);
  if (!results.ok()) return results.status();
  return (*results)[0];
}

TEST(CalibrateCpuOnlyTest, MeasuresThisHostAndAProjectionUsesTheFile) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  const char* tmp = std::getenv("TEST_TMPDIR");
  ASSERT_NE(tmp, nullptr);
  const std::string out = absl::StrCat(tmp, "/cpu_model.json");
  const std::string model = runfiles->Rlocation("psring/bench/results/committed_model.json");

  absl::StatusOr<ProcessResult> calibrate = RunTool(
      "calibrate", {runfiles->Rlocation("psring/bench/calibrate"), "--cpu_only", "--loopback_sizes=8M",
                    "--steps=2", "--warmup_steps=1", "--host=testbox", "--model=" + model,
                    "--model_out=" + out, "--ring_worker=" + runfiles->Rlocation("psring/ring/ring_worker"),
                    "--ps_server=" + runfiles->Rlocation("psring/ps/server"),
                    "--ps_worker=" + runfiles->Rlocation("psring/ps/worker")});
  ASSERT_TRUE(calibrate.ok()) << calibrate.status();
  ASSERT_EQ(calibrate->exit_code, 0) << calibrate->stderr_tail << "\n" << calibrate->stdout_text;
  EXPECT_THAT(calibrate->stdout_text, HasSubstr("CPU CEILINGS of this host's CPU: testbox"));
  absl::StatusOr<proto::CpuModelFile> file = model::ReadCpuModelFile(out);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->exchanges_size(), 4);
  for (const proto::CpuExchange& e : file->exchanges()) EXPECT_GE(e.runs_size(), 1) << e.exchange();

  absl::StatusOr<ProcessResult> maps =
      RunTool("crossover_maps",
              {runfiles->Rlocation("psring/bench/crossover_maps"), "--model=" + model, "--cpu_model=" + out,
               "--workload=mlp", "--nodes=8", absl::StrCat("--out_dir=", tmp)});
  ASSERT_TRUE(maps.ok()) << maps.status();
  ASSERT_EQ(maps->exit_code, 0) << maps->stderr_tail << "\n" << maps->stdout_text;
  EXPECT_THAT(maps->stdout_text, HasSubstr(absl::StrCat("# CPU ceilings from ", out, " (testbox, ")));

  // A bad file stops the projection with the file and field named.
  absl::StatusOr<ProcessResult> bad =
      RunTool("crossover_maps", {runfiles->Rlocation("psring/bench/crossover_maps"), "--model=" + model,
                                 "--cpu_model=" + model, absl::StrCat("--out_dir=", tmp)});
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_NE(bad->exit_code, 0);
  EXPECT_THAT(bad->stderr_tail, HasSubstr(model + ": not a CPU model file"));
}

}  // namespace
}  // namespace psring::bench
