// The driver's port-clash retry, on loopback with a stand-in worker program: a clash is recognised by the
// worker's exit code (kExitPortInUse), never by the text of its error.
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "bench/harness/sweep.h"
#include "common/exit_codes.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace psring::bench {
namespace {

constexpr char kResultLine[] =
    R"(PSRING_RESULT {"role":"worker","exchange":"ring-tcp","rank":0,"world_size":1,"steps":2,"bytes":4096,)"
    R"("compute_s":0,"exchange_s":0.002,"step_s":0.001,"samples_per_s":0,"bytes_sent":0,"bytes_received":0,)"
    R"("wrong":0,"test_accuracy":-1})";

// A ring_worker stand-in: the first `failures` launches print `message` and exit with `code`, later ones print
// a result line. Returns its path.
std::string FakeWorker(const std::string& name, int failures, int code, const std::string& message) {
  const std::string dir = testing::FreshTempPath(name);
  mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/ring_worker";
  std::ofstream script(path);
  script << "#!/bin/sh\n"
         << "n=$(cat " << dir << "/count 2>/dev/null || echo 0)\n"
         << "echo $((n + 1)) > " << dir << "/count\n"
         << "if [ \"$n\" -lt " << failures << " ]; then echo '" << message << "' >&2; exit " << code << "; fi\n"
         << "echo '" << kResultLine << "'\n";
  script.close();
  chmod(path.c_str(), 0755);
  return path;
}

absl::StatusOr<SweepResult> RunOnce(const std::string& worker, std::ostream* progress) {
  ScalingOptions options;
  options.nodes = {1};
  options.exchanges = {Exchange::kRing};
  options.model_bytes = {4096};
  options.steps = 2;
  options.job_timeout_s = 30;
  options.cluster.force_loopback = true;
  options.binaries.ring_worker = worker;
  return RunScaling(options, progress);
}

TEST(ScalingDriverTest, RetriesOnceWhenAWorkerExitsWithPortInUse) {
  std::ostringstream progress;
  auto result = RunOnce(FakeWorker("clash_once", 1, kExitPortInUse, "listen: taken"), &progress);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->records.size(), 1u);
  EXPECT_TRUE(result->records[0].ok()) << result->records[0].error;
  EXPECT_EQ(result->records[0].bytes, 4096u);
  EXPECT_TRUE(absl::StrContains(progress.str(), "retrying with new ports")) << progress.str();
}

TEST(ScalingDriverTest, GivesUpAfterOneRetry) {
  std::ostringstream progress;
  auto result = RunOnce(FakeWorker("clash_always", 2, kExitPortInUse, "listen: taken"), &progress);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->records[0].ok());
  EXPECT_TRUE(absl::StrContains(progress.str(), "retrying with new ports")) << progress.str();
}

// The old text match is gone: a failure that merely says so is not a port clash.
TEST(ScalingDriverTest, AMessageAloneIsNotAPortClash) {
  std::ostringstream progress;
  auto result = RunOnce(FakeWorker("clash_text", 1, 1, "bind: Address already in use"), &progress);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->records[0].ok());
  EXPECT_FALSE(absl::StrContains(progress.str(), "retrying")) << progress.str();
}

}  // namespace
}  // namespace psring::bench
