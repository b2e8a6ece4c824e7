// End to end: //bench:time_to_accuracy with the real worker binaries on loopback, a tiny grid (N = 2, the
// ring and the async PS, without and with a straggler, one run each) to an easy target, then one run to a
// target it cannot reach in 20 steps. Checks the table, the files and that a run that missed the target
// reports no time.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/bench/svg_checks.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace psring::bench {
namespace {

using ::bazel::tools::cpp::runfiles::Runfiles;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `text` with every run of spaces as one space (table rows without their column widths).
std::string Collapsed(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c != ' ' || out.empty() || out.back() != ' ') out += c;
  }
  return out;
}

bool HaveFashionMnist() {
  return std::ifstream("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz").good();
}

class TtaE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    runfiles_.reset(Runfiles::CreateForTest(&error));
    ASSERT_NE(runfiles_, nullptr) << error;
    const char* tmp = std::getenv("TEST_TMPDIR");
    ASSERT_NE(tmp, nullptr);
    tmp_ = tmp;
  }

  // The tool with the real workers and `flags`, within 100 s; its stdout (stderr on failure).
  ProcessResult Run(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {
        runfiles_->Rlocation("psring/bench/time_to_accuracy"),
        "--ring_worker=" + runfiles_->Rlocation("psring/ring/ring_worker"),
        "--ps_server=" + runfiles_->Rlocation("psring/ps/server"),
        "--ps_worker=" + runfiles_->Rlocation("psring/ps/worker"),
        "--model=none",
    };
    if (!HaveFashionMnist()) argv.push_back("--dataset=synthetic");
    argv.insert(argv.end(), flags.begin(), flags.end());
    JobOptions options;
    options.timeout = absl::Seconds(100);
    absl::StatusOr<std::vector<ProcessResult>> results = RunJob({{"time_to_accuracy", argv}}, options);
    EXPECT_TRUE(results.ok()) << results.status();
    return results.ok() ? (*results)[0] : ProcessResult{};
  }

  std::unique_ptr<Runfiles> runfiles_;
  std::string tmp_;
};

TEST_F(TtaE2eTest, TinyGridOnLoopbackWritesTableJsonCsvAndSvg) {
  const std::string stem = tmp_ + "/tta/tiny";
  const ProcessResult r = Run({"--n=2", "--exchanges=ring,ps-async1", "--factors=1,3", "--reps=1", "--target=0.7",
                               "--max_steps=200", "--eval_every=10", "--eval_samples=500", "--out=" + stem});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_tail;
  const std::string& out = r.stdout_text;
  EXPECT_TRUE(absl::StrContains(out, "# loopback")) << out;
  for (const char* row : {"\n ring 2 1 1/1 ", "\n ps-async1 2 1 1/1 ", "\n ring 2 3 1/1 ", "\n ps-async1 2 3 1/1 "}) {
    EXPECT_TRUE(absl::StrContains(Collapsed(out), row)) << "missing row '" << row << "' in\n" << out;
  }
  EXPECT_TRUE(absl::StrContains(out, "# failed runs: 0")) << out << r.stderr_tail;
  EXPECT_TRUE(absl::StrContains(out, "never reached 70.0%: none")) << out;
  EXPECT_EQ(Count(r.stderr_tail, "reached 70.0% at step "), 4) << r.stderr_tail;

  EXPECT_EQ(ReadFile(stem + ".txt").find("# time to accuracy"), 0u);
  const std::string json = ReadFile(stem + ".json");
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json;
  const google::protobuf::ListValue& runs = parsed.fields().at("runs").list_value();
  ASSERT_EQ(runs.values_size(), 4);
  for (const google::protobuf::Value& run : runs.values()) {
    const auto& f = run.struct_value().fields();
    EXPECT_TRUE(f.at("reached").bool_value());
    const auto& curve = f.at("curve").list_value();
    ASSERT_GE(curve.values_size(), 2);
    EXPECT_EQ(curve.values(0).struct_value().fields().at("step").number_value(), 0);
    const double last_step = curve.values(curve.values_size() - 1).struct_value().fields().at("step").number_value();
    EXPECT_EQ(f.at("steps_to_target").number_value(), last_step) << "the run stops at the target";
    EXPECT_EQ(static_cast<int>(last_step) % 10, 0);
    EXPECT_GE(f.at("final_accuracy").number_value(), 0.5) << "the full test set after the last step";
  }
  const std::string csv = ReadFile(stem + ".csv");
  EXPECT_EQ(csv.find("exchange,nodes,factor,rep,step,wall_s,accuracy\n"), 0u);
  EXPECT_GE(Count(csv, "\nring,2,3,1,"), 2);
  const std::string svg = ReadFile(stem + ".svg");
  std::string why;
  EXPECT_TRUE(WellFormed(svg, &why)) << why;
  EXPECT_TRUE(absl::StrContains(svg, "ps-async1"));
}

TEST_F(TtaE2eTest, ARunThatMissesTheTargetSaysSoWithItsBestAccuracy) {
  const std::string stem = tmp_ + "/tta/never";
  const ProcessResult r = Run({"--n=2", "--exchanges=ring", "--factors=1", "--reps=1", "--target=0.99",
                               "--max_steps=20", "--eval_every=10", "--eval_samples=200", "--out=" + stem});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_tail;
  EXPECT_TRUE(absl::StrContains(Collapsed(r.stdout_text), "\n ring 2 1 0/1 never [ - .. -] - [ - .. -] "))
      << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "never reached 99.0%: ring N=2 factor 1 (1/1, best ")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_tail, "never reached 99.0% in 20 steps (best ")) << r.stderr_tail;
  const std::string json = ReadFile(stem + ".json");
  EXPECT_TRUE(absl::StrContains(json, R"("reached":false,"steps_to_target":null,"wall_to_target_s":null)")) << json;
}

TEST_F(TtaE2eTest, BadFlagsAreRefusedBeforeAnyRun) {
  const ProcessResult r = Run({"--exchanges=ring,ps-async0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.stderr_tail, "ps-async0")) << r.stderr_tail;
  const ProcessResult t = Run({"--target=85"});
  EXPECT_EQ(t.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(t.stderr_tail, "--target=85")) << t.stderr_tail;
}

}  // namespace
}  // namespace psring::bench
