// //bench:validate --plan=FILE: the plan file's JSON mapped onto a ValidationPlan, every error naming the
// file, the sweep and the field (no sweep runs), the committed example, and one --plan_only run of the
// binary.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/cmd/validation.h"
#include "bench/core/exchange.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace psring::bench {
namespace {

using ::bazel::tools::cpp::runfiles::Runfiles;

constexpr size_t kMiB = 1u << 20;
constexpr char kGradient[] =
    R"({"link": "150mbit", "latency": "20ms", "mode": "gradient", "nodes": [8, 16],
        "model_bytes": ["4M", "512K"]})";
constexpr char kReplay[] =
    R"({"link": "100mbit", "latency": "5ms", "mode": "replay", "workloads": ["resnet50", "vgg16"],
        "bytes_scale": 64, "bucket_mb": [0, 25], "nodes": [4]})";

// A plan file of `sweeps` (JSON objects) and `rest` (more top-level fields, each with its leading comma).
std::string PlanJson(const std::vector<std::string>& sweeps, const std::string& rest = "") {
  std::string json = R"({"sweeps": [)";
  for (size_t i = 0; i < sweeps.size(); ++i) absl::StrAppend(&json, i > 0 ? ", " : "", sweeps[i]);
  return absl::StrCat(json, "]", rest, "}");
}

// A small gradient sweep with `field` set to `value` (a JSON value; "" leaves the field out).
std::string GradientWith(const std::string& field, const std::string& value) {
  std::vector<std::pair<std::string, std::string>> fields = {{"link", R"("150mbit")"},
                                                             {"latency", R"("20ms")"},
                                                             {"mode", R"("gradient")"},
                                                             {"nodes", "[8]"},
                                                             {"model_bytes", R"(["4M"])"}};
  auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == field; });
  if (it == fields.end()) it = fields.insert(fields.end(), {field, value});
  it->second = value;
  std::vector<std::string> parts;
  for (const auto& [key, json] : fields) {
    if (!json.empty()) parts.push_back(absl::StrCat("\"", key, "\": ", json));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

// A small replay sweep with `extra` fields (JSON, without braces).
std::string ReplayWith(const std::string& extra) {
  return absl::StrCat(R"({"link": "150mbit", "latency": "2ms", "mode": "replay", "nodes": [4], )", extra,
                      "}");
}

TEST(ValidationPlanFileTest, MapsEveryFieldOntoThePlan) {
  absl::StatusOr<ValidationPlan> plan = ParseValidationPlanFile(
      PlanJson({kGradient, kReplay}, R"(, "exchanges": ["ps-1", "ring"], "noise_sweep": 1, "noise_runs": 3)"),
      "plan.json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->sweeps.size(), 2u);
  const HeldOutSweep& g = plan->sweeps[0];
  EXPECT_EQ(g.link, "150mbit");
  EXPECT_EQ(g.latency, "20ms");
  EXPECT_EQ(g.nodes, std::vector<int>({8, 16}));
  EXPECT_EQ(g.sizes, std::vector<size_t>({4 * kMiB, 512 * 1024}));
  EXPECT_TRUE(g.workloads.empty());
  EXPECT_EQ(g.bytes_scale, 1);
  EXPECT_EQ(g.Name(), "150mbit 20ms gradient");
  const HeldOutSweep& r = plan->sweeps[1];
  EXPECT_EQ(r.workloads, std::vector<std::string>({"resnet50", "vgg16"}));
  EXPECT_EQ(r.bucket_mbs, std::vector<double>({0, 25}));
  EXPECT_EQ(r.bytes_scale, 64);
  EXPECT_TRUE(r.sizes.empty());
  EXPECT_EQ(r.Name(), "100mbit 5ms replay resnet50,vgg16 bytes/64");
  EXPECT_EQ(plan->exchanges, std::vector<Exchange>({Exchange::kPsOne, Exchange::kRing}));
  EXPECT_EQ(plan->noise_sweep, 1);
  EXPECT_EQ(plan->noise_runs, 3);
  for (const HeldOutSweep& s : plan->sweeps) EXPECT_TRUE(ExpandSweep(s).ok()) << s.Name();
}

// A sweep's own link queue (a shallow switch port): in its name and each condition's, never a condition
// calibration covers (it ran the cluster's default queue), and absent means the cluster's.
TEST(ValidationPlanFileTest, ASweepsQueueNamesItsConditions) {
  absl::StatusOr<ValidationPlan> plan =
      ParseValidationPlanFile(PlanJson({GradientWith("queue", R"("5ms")"), kGradient}), "plan.json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->sweeps[0].queue, "5ms");
  EXPECT_EQ(plan->sweeps[0].Name(), "150mbit 20ms queue 5ms gradient");
  EXPECT_TRUE(plan->sweeps[1].queue.empty());
  absl::StatusOr<std::vector<HeldOutCondition>> conditions = ExpandSweep(plan->sweeps[0]);
  ASSERT_TRUE(conditions.ok()) << conditions.status();
  EXPECT_EQ((*conditions)[0].Name(), "150mbit 20ms queue 5ms N=8 4MiB");
  EXPECT_EQ((*ExpandSweep(plan->sweeps[1]))[0].Name(), "150mbit 20ms N=8 4MiB");
  // A model whose coverage holds the condition's link, latency, N and S covers it on the default queue only.
  proto::CostModelFile model;
  proto::ExchangeModel* e = model.add_exchanges();
  e->mutable_coverage()->add_link_bytes_per_second((*conditions)[0].link_bytes_per_second);
  e->mutable_coverage()->add_latency_s((*conditions)[0].latency_s);
  e->mutable_coverage()->add_nodes(8);
  e->mutable_coverage()->add_bytes(4 * kMiB);
  HeldOutCondition same = (*conditions)[0];
  EXPECT_FALSE(CalibrationCovers(model, same));
  same.queue.clear();
  EXPECT_TRUE(CalibrationCovers(model, same));
}

// --time_dilation: every network time x K with the bytes the same (rate / K, latency and queue x K, the
// cluster's queue where a sweep has none); K = 1 changes nothing; a replayed workload, K < 1 and a rate below
// 1 kbit/s are refused, naming what to do.
TEST(ValidationPlanFileTest, TimeDilationSlowsTheNetworkKeepingItsBytes) {
  absl::StatusOr<ValidationPlan> plan = ParseValidationPlanFile(
      PlanJson({GradientWith("queue", R"("5ms")"), GradientWith("link", R"("65mbit")"),
                GradientWith("latency", R"("1.5ms")")}),
      "plan.json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<ValidationPlan> x2 = DilatePlan(*plan, 2, "50ms");
  ASSERT_TRUE(x2.ok()) << x2.status();
  EXPECT_EQ(x2->sweeps[0].Name(), "75mbit 40ms queue 10ms gradient");
  EXPECT_EQ(x2->sweeps[1].Name(), "32500kbit 40ms queue 100ms gradient");
  EXPECT_EQ(x2->sweeps[2].Name(), "75mbit 3ms queue 100ms gradient");
  EXPECT_EQ(x2->sweeps[0].nodes, plan->sweeps[0].nodes);
  EXPECT_EQ(x2->sweeps[0].sizes, plan->sweeps[0].sizes);
  // The bandwidth-delay product and the queue's bytes are the plan's.
  const HeldOutCondition before = (*ExpandSweep(plan->sweeps[1]))[0];
  const HeldOutCondition after = (*ExpandSweep(x2->sweeps[1]))[0];
  EXPECT_DOUBLE_EQ(after.link_bytes_per_second * after.latency_s,
                   before.link_bytes_per_second * before.latency_s);
  EXPECT_DOUBLE_EQ(after.link_bytes_per_second * after.queue_s, before.link_bytes_per_second * 0.05);
  absl::StatusOr<ValidationPlan> x1 = DilatePlan(*plan, 1, "50ms");
  ASSERT_TRUE(x1.ok()) << x1.status();
  EXPECT_EQ(x1->sweeps[1].Name(), plan->sweeps[1].Name());
  EXPECT_EQ(*DilateDuration("10ms", 4), "40ms");
  EXPECT_EQ(*DilateDuration("1.5ms", 3), "4.5ms");
  EXPECT_FALSE(DilateDuration("soon", 2).ok());

  for (double bad : {0.5, 0.0, -2.0, std::numeric_limits<double>::infinity()}) {
    absl::Status s = DilatePlan(*plan, bad, "50ms").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("give a factor >= 1"), std::string::npos) << s;
  }
  absl::StatusOr<ValidationPlan> replay = ParseValidationPlanFile(PlanJson({kReplay}), "plan.json");
  ASSERT_TRUE(replay.ok()) << replay.status();
  absl::Status s = DilatePlan(*replay, 2, "50ms").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("its compute would not stretch with it"), std::string::npos) << s;
  absl::StatusOr<ValidationPlan> slow =
      ParseValidationPlanFile(PlanJson({GradientWith("link", R"("1500kbit")")}), "plan.json");
  ASSERT_TRUE(slow.ok()) << slow.status();
  s = DilatePlan(*slow, 2000, "50ms").status();
  EXPECT_NE(s.message().find("below 1 kbit/s"), std::string::npos) << s;
}

TEST(ValidationPlanFileTest, LeftOutFieldsTakeTheBuiltInPlansDefaults) {
  absl::StatusOr<ValidationPlan> plan = ParseValidationPlanFile(
      PlanJson({ReplayWith(R"("workloads": ["mlp"], "bucket_mb": [0])")}), "plan.json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->exchanges, AllExchanges());
  EXPECT_EQ(plan->noise_sweep, ValidationPlan().noise_sweep);
  EXPECT_EQ(plan->noise_runs, ValidationPlan().noise_runs);
  EXPECT_EQ(plan->sweeps[0].bytes_scale, 1);
}

TEST(ValidationPlanFileTest, SweepsMayNameTheExchangesWhenAllNameTheSame) {
  const std::string with = GradientWith("exchanges", R"(["ring", "ps-dedicated"])");
  absl::StatusOr<ValidationPlan> plan = ParseValidationPlanFile(
      PlanJson({with, kGradient, GradientWith("exchanges", R"(["ps-dedicated", "ring"])")}), "plan.json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->exchanges, std::vector<Exchange>({Exchange::kRing, Exchange::kPsDedicated}));
}

struct BadPlan {
  std::string json;
  std::string where;  // the file, sweep and field the error must name
  std::string fix;    // part of what it says to write instead
};

TEST(ValidationPlanFileTest, EveryErrorNamesTheFileTheSweepAndTheFieldAndSaysWhatToWrite) {
  const std::vector<BadPlan> cases = {
      {R"({"sweeps": []})", "plan.json: sweeps: missing", "at least one sweep"},
      {PlanJson({kGradient, GradientWith("link", R"("fast")")}), "plan.json: sweeps[1].link: \"fast\"",
       "150mbit"},
      {PlanJson({GradientWith("link", "")}), "plan.json: sweeps[0].link: missing", "150mbit"},
      {PlanJson({GradientWith("latency", R"("2 parsecs")")}),
       "sweeps[0].latency: \"2 parsecs\" is not a duration", "\"2ms\""},
      {PlanJson({GradientWith("latency", "")}), "sweeps[0].latency: missing", "\"2ms\""},
      {PlanJson({GradientWith("queue", R"("deep")")}), "sweeps[0].queue: \"deep\" is not a duration > 0",
       "\"5ms\""},
      {PlanJson({GradientWith("queue", R"("0")")}), "sweeps[0].queue: \"0\" is not a duration > 0",
       "\"5ms\""},
      {PlanJson({GradientWith("nodes", "")}), "sweeps[0].nodes: missing", "[8, 16]"},
      {PlanJson({GradientWith("nodes", "[4, 0]")}), "sweeps[0].nodes: 0 is not a node count", "N >= 1"},
      {PlanJson({GradientWith("mode", R"("train")")}), "sweeps[0].mode: \"train\" is not a mode",
       "\"gradient\""},
      {PlanJson({GradientWith("mode", "")}), "sweeps[0].mode: missing", "\"replay\""},
      {PlanJson({GradientWith("model_bytes", "")}), "sweeps[0].model_bytes: missing", "[\"4M\"]"},
      {PlanJson({GradientWith("model_bytes", R"(["4Q"])")}), "sweeps[0].model_bytes: \"4Q\"", "\"4M\""},
      {PlanJson({GradientWith("model_bytes", R"(["0"])")}), "sweeps[0].model_bytes: \"0\" is not a size > 0",
       "K/M/G"},
      {PlanJson({GradientWith("bucket_mb", "[0, 25]")}), "sweeps[0].bucket_mb: is for replay sweeps",
       "\"mode\": \"replay\""},
      {PlanJson({GradientWith("workloads", R"(["resnet50"])")}), "sweeps[0].workloads: is for replay sweeps",
       "\"mode\": \"replay\""},
      {PlanJson({GradientWith("bytes_scale", "64")}), "sweeps[0].bytes_scale: is for replay sweeps",
       "drop it"},
      {PlanJson({ReplayWith(R"("bucket_mb": [0])")}), "sweeps[0].workloads: missing", "resnet50"},
      {PlanJson({ReplayWith(R"("workloads": ["resnet51"], "bucket_mb": [0])")}),
       "sweeps[0].workloads: \"resnet51\" is neither a preset", "bert_base"},
      {PlanJson({ReplayWith(R"("workloads": ["resnet50"])")}), "sweeps[0].bucket_mb: missing", "[0, 25]"},
      {PlanJson({ReplayWith(R"("workloads": ["resnet50"], "bucket_mb": [-1])")}),
       "sweeps[0].bucket_mb: -1 is not a cap", "MiB >= 0"},
      {PlanJson({ReplayWith(R"("workloads": ["resnet50"], "bucket_mb": [0], "bytes_scale": 0.5)")}),
       "sweeps[0].bytes_scale: 0.5 is not a divisor >= 1", "64"},
      {PlanJson({ReplayWith(R"("workloads": ["resnet50"], "bucket_mb": [0], "model_bytes": ["4M"])")}),
       "sweeps[0].model_bytes: is for gradient sweeps", "\"mode\": \"gradient\""},
      {PlanJson({kGradient}, R"(, "exchanges": ["allreduce"])"), "plan.json: exchanges: unknown exchange",
       "ps-colocated"},
      {PlanJson({kGradient}, R"(, "exchanges": ["ring", "ring"])"),
       "plan.json: exchanges: \"ring\" is listed twice", "once"},
      {PlanJson({GradientWith("exchanges", R"(["ring"])")}, R"(, "exchanges": ["ring", "ps-1"])"),
       "sweeps[0].exchanges: differ from the top-level exchanges", "a plan file of their own"},
      {PlanJson(
           {kGradient, GradientWith("exchanges", R"(["ring"])"), GradientWith("exchanges", R"(["ps-1"])")}),
       "sweeps[2].exchanges: differ from sweeps[1]'s", "top-level \"exchanges\""},
      {PlanJson({kGradient, kReplay}, R"(, "noise_sweep": 2)"), "plan.json: noise_sweep: 2 is not a sweep",
       "from 0 to 1"},
      {PlanJson({kGradient}, R"(, "noise_runs": 0)"), "plan.json: noise_runs: 0 is not a run count",
       "2 or more"},
  };
  for (const BadPlan& c : cases) {
    absl::StatusOr<ValidationPlan> plan = ParseValidationPlanFile(c.json, "plan.json");
    ASSERT_FALSE(plan.ok()) << c.json;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    const std::string message(plan.status().message());
    EXPECT_EQ(message.rfind("plan.json: ", 0), 0u) << message;
    EXPECT_NE(message.find(c.where), std::string::npos) << "want '" << c.where << "' in: " << message;
    EXPECT_NE(message.find(c.fix), std::string::npos) << "want '" << c.fix << "' in: " << message;
  }
}

TEST(ValidationPlanFileTest, UnknownFieldsAreErrorsNamingThem) {
  for (const auto& [json, field] : std::vector<std::pair<std::string, std::string>>{
           {PlanJson({GradientWith("step", "3")}), "(sweeps[0]) step"},
           {PlanJson({kGradient}, R"(, "steps": 3)"), "steps"},
           {R"({"sweeps": [)", "not a validation plan"},
       }) {
    absl::StatusOr<ValidationPlan> plan = ParseValidationPlanFile(json, "plan.json");
    ASSERT_FALSE(plan.ok()) << json;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(plan.status().message());
    EXPECT_EQ(message.rfind("plan.json: not a validation plan", 0), 0u) << message;
    EXPECT_NE(message.find(field), std::string::npos) << "want '" << field << "' in: " << message;
  }
}

TEST(ValidationPlanFileTest, AMissingFileIsNotFound) {
  EXPECT_EQ(ReadValidationPlanFile(testing::FreshTempPath("no_plan.json")).status().code(),
            absl::StatusCode::kNotFound);
}

class ValidatePlanOnlyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    runfiles_.reset(Runfiles::CreateForTest(&error));
    ASSERT_NE(runfiles_, nullptr) << error;
  }
  // //bench:validate with the committed model and `flags`, within 60 s.
  ProcessResult Validate(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {
        runfiles_->Rlocation("psring/bench/validate"),
        "--model=" + runfiles_->Rlocation("psring/bench/results/committed_model.json")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    JobOptions options;
    options.timeout = absl::Seconds(60);
    absl::StatusOr<std::vector<ProcessResult>> results = RunJob({{"validate", argv}}, options);
    EXPECT_TRUE(results.ok()) << results.status();
    return results.ok() ? (*results)[0] : ProcessResult{};
  }
  std::string ExamplePlan() const {
    return runfiles_->Rlocation("psring/bench/results/plans/example_plan.json");
  }
  std::unique_ptr<Runfiles> runfiles_;
};

TEST_F(ValidatePlanOnlyTest, TheCommittedExampleParses) {
  absl::StatusOr<ValidationPlan> plan = ReadValidationPlanFile(ExamplePlan());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->sweeps.empty());
}

TEST_F(ValidatePlanOnlyTest, PrintsTheFilesHeldOutPlanAndWhereItCameFrom) {
  const ProcessResult r = Validate({"--plan=" + ExamplePlan(), "--plan_only", "--exchanges=ring,ps-1"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_tail;
  EXPECT_NE(r.stdout_text.find(absl::StrCat("# plan: ", ExamplePlan(), "\n")), std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("# held-out sweep 0: 50mbit 10ms gradient"), std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("estimate of this plan's run time"), std::string::npos) << r.stdout_text;
  // Every condition's prediction, as a run prints it before it starts: sweep 0's four (N = 6, 10 x 1, 4 MiB),
  // then the replayed one (flat and 25 MB buckets at N = 6), each with the two exchanges asked for.
  EXPECT_NE(r.stdout_text.find("# PREDICTED before running 50mbit 10ms N=6 1MiB (90 % intervals): ring "),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("# PREDICTED before running 50mbit 10ms N=10 4MiB"), std::string::npos)
      << r.stdout_text;
  size_t lines = 0;
  for (size_t at = r.stdout_text.find("# PREDICTED"); at != std::string::npos;
       at = r.stdout_text.find("# PREDICTED", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 6u) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("ps-colocated"), std::string::npos) << "only the exchanges asked for";
}

// --time_limit: a sweep that would end past it does not start. With 0 s none does (so this runs without root
// or a cluster): every row is reported "not run (time limit)", counted apart, the files are written, and the
// progress says when each sweep would have ended by the model's estimate.
TEST_F(ValidatePlanOnlyTest, ATimeLimitSkipsTheSweepsThatWouldEndPastItAndReportsThem) {
  const std::string out_dir = testing::FreshTempPath("validate_time_limit");
  const ProcessResult r = Validate(
      {"--plan=" + ExamplePlan(), "--exchanges=ring,ps-1", "--time_limit=0s", "--out_dir=" + out_dir});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_tail;
  EXPECT_NE(
      r.stdout_text.find("12 runs, 0 usable, 0 EMULATOR-BOUND (excluded), 0 failed (excluded), 12 not run "
                         "(time limit"),
      std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("# held-out sweep 1: 150mbit 2ms replay vgg16 bytes/64, N = 6, about "),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(
      r.stderr_tail.find("# validation sweep 2/2: 150mbit 2ms replay vgg16 bytes/64, not run: at 0 s it "
                         "would end about "),
      std::string::npos)
      << r.stderr_tail;
  EXPECT_NE(r.stderr_tail.find("the pace taken before any sweep ran), past the time limit 0 s"),
            std::string::npos)
      << r.stderr_tail;
  std::ifstream report(out_dir + "/validation.txt");
  const std::string text((std::istreambuf_iterator<char>(report)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("not run (time limit)"), std::string::npos) << text;
}

// --time_dilation=2: the plan's sweeps printed and predicted at the dilated conditions, the report's header
// says so; a plan with a replayed sweep is refused before anything runs.
TEST_F(ValidatePlanOnlyTest, TimeDilationPrintsAndPredictsTheDilatedConditions) {
  const std::string plan = testing::FreshTempPath("dilated_plan.json");
  std::ofstream(plan) << PlanJson({GradientWith("link", R"("65mbit")")});
  ProcessResult r = Validate({"--plan=" + plan, "--plan_only", "--exchanges=ring,ps-1", "--time_dilation=2"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_tail;
  EXPECT_NE(r.stdout_text.find("# time dilation x2: link rates / 2, latencies, queues and the links' burst "
                               "(20ms) x 2"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("# held-out sweep 0: 32500kbit 40ms queue 100ms gradient, N = 8"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("# PREDICTED before running 32500kbit 40ms queue 100ms N=8 4MiB"),
            std::string::npos)
      << r.stdout_text;
  r = Validate({"--plan=" + ExamplePlan(), "--plan_only", "--time_dilation=2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_tail.find("time dilation stretches the network only"), std::string::npos)
      << r.stderr_tail;
}

TEST_F(ValidatePlanOnlyTest, RefusesPlanWithQuickAndABadFile) {
  ProcessResult r = Validate({"--plan=" + ExamplePlan(), "--quick", "--plan_only"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_tail.find("--plan and --quick exclude each other"), std::string::npos) << r.stderr_tail;
  const std::string bad = testing::FreshTempPath("bad_plan.json");
  std::ofstream(bad) << PlanJson({GradientWith("latency", R"("soon")")});
  r = Validate({"--plan=" + bad, "--plan_only"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_tail.find(absl::StrCat(bad, ": sweeps[0].latency: \"soon\"")), std::string::npos)
      << r.stderr_tail;
}

}  // namespace
}  // namespace psring::bench
