// The straggler validation's plan files, predictions and verdict (bench/cmd/straggler_validation.h), without
// running anything: the harness's part is //bench:straggler_validate's.
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/cmd/straggler_validation.h"
#include "gtest/gtest.h"
#include "tests/bench/model/synthetic_runs.h"

namespace psring::bench {
namespace {

constexpr char kPlan[] = R"(# a comment
nodes 4
workload mlp
compute_scale 50   # 100 ms a step
steps 30
warmup_steps 1
noise_seed 3
link loopback
condition exchange=ring straggler=1:2
condition exchange=ps-1 straggler=2:4 noise=0.3 backup=1
condition exchange=ring noise=0.5 bucket_mb=0.25
control exchange=ps-colocated
)";

TEST(StragglerPlanTest, ParsesEveryField) {
  absl::StatusOr<StragglerPlan> plan = ParseStragglerPlan(kPlan, "plan.txt");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->nodes, 4);
  EXPECT_EQ(plan->compute_scale, 50);
  EXPECT_EQ(plan->steps, 30);
  EXPECT_EQ(plan->warmup_steps, 1);
  EXPECT_EQ(plan->noise_seed, 3u);
  EXPECT_EQ(plan->link, "");
  ASSERT_EQ(plan->conditions.size(), 4u);
  const StragglerCondition& backup = plan->conditions[1];
  EXPECT_EQ(backup.exchange, Exchange::kPsOne);
  EXPECT_EQ(backup.slow_rank, 2);
  EXPECT_EQ(backup.factor, 4);
  EXPECT_EQ(backup.noise_sigma, 0.3);
  EXPECT_EQ(backup.backup_workers, 1);
  EXPECT_EQ(plan->conditions[2].bucket_mb, 0.25);
  EXPECT_TRUE(plan->conditions[3].control);
  EXPECT_EQ(backup.Name(), "ps-1 slow 2x4 noise 0.3 B=1");
}

TEST(StragglerPlanTest, AsyncConditionsParseAndAreNamed) {
  absl::StatusOr<StragglerPlan> plan =
      ParseStragglerPlan("nodes 4\nworkload mlp\ncompute_scale 50\nsteps 40\n"
                         "condition exchange=ps-1 straggler=1:4 noise=0.3 staleness=4\n"
                         "condition exchange=ps-1 straggler=1:4 noise=0.3\n",
                         "plan.txt");
  ASSERT_TRUE(plan.ok()) << plan.status();
  const StragglerCondition& async = plan->conditions[0];
  EXPECT_EQ(async.staleness, 4);
  EXPECT_EQ(plan->conditions[1].staleness, -1);
  EXPECT_EQ(async.Name(), "ps-1 slow 1x4 noise 0.3 async s=4");
}

TEST(StragglerPlanTest, ErrorsNameTheLineAndWhatToWrite) {
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"nodes 4\ncolor blue\ncondition exchange=ring straggler=1:2\n", "plan.txt:2"},
      {"condition exchange=ring straggler=1:0.5\n", "RANK:FACTOR"},
      {"condition exchange=ring straggler=1:2 backup=1\n", "sync PS"},
      {"condition exchange=ring\n", "control"},
      {"condition exchange=rings straggler=1:2\n", "plan.txt:1"},
      {"condition exchange=ring straggler=1:2 speed=3\n", "exchange=NAME"},
      {"nodes 4\ncondition exchange=ring straggler=4:2\n", "below N = 4"},
      {"nodes 4\n", "no condition"},
      {"steps 0\ncondition exchange=ring straggler=1:2\n", "steps"},
      {"link fast\ncondition exchange=ring straggler=1:2\n", "link"},
      {"condition exchange=ring straggler=1:2 staleness=1\n", "asynchronous PS"},
      {"condition exchange=ps-1 straggler=1:2 staleness=1 backup=1\n", "asynchronous PS"},
      {"condition exchange=ps-1 straggler=1:2 staleness=-1\n", "S >= 0"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<StragglerPlan> plan = ParseStragglerPlan(c.text, "plan.txt");
    ASSERT_FALSE(plan.ok()) << c.text;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find(c.expect), absl::string_view::npos) << plan.status();
  }
  EXPECT_EQ(ReadStragglerPlanFile("/nonexistent/plan.txt").status().code(), absl::StatusCode::kNotFound);
}

TEST(StragglerPlanTest, TheCommittedPlanParses) {
  const char* root = std::getenv("TEST_SRCDIR");
  ASSERT_NE(root, nullptr) << "run under bazel test";
  absl::StatusOr<StragglerPlan> plan =
      ReadStragglerPlanFile(std::string(root) + "/psring/bench/results/plans/straggler_plan_2026-11-27.txt");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->nodes, 4);
  EXPECT_TRUE(plan->link.empty());
  int controls = 0, backups = 0;
  for (const StragglerCondition& c : plan->conditions) {
    controls += c.control;
    backups += c.backup_workers > 0;
  }
  EXPECT_EQ(controls, 3);
  EXPECT_EQ(backups, 4);
  EXPECT_EQ(plan->conditions.size(), 17u);
}

TEST(StragglerPlanTest, QuickPlanIsOneConditionOnTwoExchanges) {
  const StragglerPlan quick = QuickStragglerPlan();
  ASSERT_EQ(quick.conditions.size(), 2u);
  EXPECT_EQ(quick.conditions[0].exchange, Exchange::kRing);
  EXPECT_EQ(quick.conditions[1].exchange, Exchange::kPsOne);
  EXPECT_EQ(quick.conditions[0].factor, 2);
  EXPECT_TRUE(quick.link.empty());
}

TEST(StragglerPlanTest, PredictsFromTheProfileAndTheInjection) {
  // A model whose exchanges cost nothing on loopback: the step is the stretched compute alone, 100 ms x 2.
  const proto::CostModelFile model =
      model::ModelFileOf({{0, 1, 0, 0}, {0, 1, 0, 0}, {0, 1, 0, 0}, {0, 1, 0, 0}});
  absl::StatusOr<StragglerPlan> plan = ParseStragglerPlan(kPlan, "plan.txt");
  ASSERT_TRUE(plan.ok());
  absl::StatusOr<std::vector<StragglerRow>> rows = PredictStragglerPlan(*plan, model);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_NEAR((*rows)[0].unperturbed_s, 0.100, 1e-6);
  EXPECT_NEAR((*rows)[0].predicted_s, 0.200, 1e-6);
  EXPECT_NEAR((*rows)[0].sampling_sd, 0, 1e-9);
  // The compute it asks for: 100 ms x the mean factor (2 + 1 + 1 + 1) / 4; no noise, so the floor's limit.
  EXPECT_NEAR((*rows)[0].predicted_compute_s, 0.125, 1e-6);
  EXPECT_EQ((*rows)[0].compute_limit, kMinComputeOvershoot);
  EXPECT_GT((*rows)[1].compute_limit, kMinComputeOvershoot);  // noise 0.3 over 30 steps: 4 sd > 5 %
  // The backup row: rank 2 at x4 runs at its own pace, the others' quorum near the unstretched step.
  EXPECT_GT((*rows)[1].predicted_s, 0.4);
  EXPECT_LT((*rows)[1].cluster_s, 0.2);
  EXPECT_GT((*rows)[2].sampling_sd, 0);
  EXPECT_NEAR((*rows)[3].predicted_s, 0.100, 1e-6);
  EXPECT_GT(EstimateStragglerSeconds(*plan, *rows), 31 * 0.7);
}

StragglerRow Row(double predicted, double measured, const std::string& note = "", bool control = false) {
  StragglerRow r;
  r.condition.control = control;
  r.predicted_s = predicted;
  r.measured_s = measured;
  r.note = note;
  return r;
}

TEST(StragglerPlanTest, VerdictCountsUnjudgedRunsAsNotRight) {
  StragglerValidation v;
  v.rows = {Row(1.02, 1), Row(0.96, 1), Row(1.01, 1), Row(1.5, 1, "", true)};
  ASSERT_TRUE(SummarizeStragglerRows(&v).ok());
  EXPECT_EQ(v.judged, 3);
  EXPECT_EQ(v.unjudged, 0);
  EXPECT_NEAR(v.straggler.median_abs, 0.02, 1e-9);
  EXPECT_EQ(v.control.count, 1);
  EXPECT_TRUE(v.pass);
  EXPECT_NE(FormatStragglerReport(v).find("verdict: PASS"), std::string::npos);
  // An EMULATOR-BOUND run is unjudged: no PASS, whatever the others say.
  v.rows.push_back(Row(1, 3, "EMULATOR-BOUND: box CPU"));
  ASSERT_TRUE(SummarizeStragglerRows(&v).ok());
  EXPECT_EQ(v.judged, 3);
  EXPECT_EQ(v.unjudged, 1);
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.verdict, "INCOMPLETE");
  EXPECT_NE(FormatStragglerReport(v).find("INCOMPLETE"), std::string::npos);
  // A 20 % miss fails the p90 target.
  v.rows.pop_back();
  v.rows.push_back(Row(1.2, 1));
  ASSERT_TRUE(SummarizeStragglerRows(&v).ok());
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.verdict, "FAIL");
  EXPECT_NE(FormatStragglerReport(v).find("verdict: FAIL"), std::string::npos);
  // Nothing measured: unjudged, never a pass.
  v.rows = {Row(1, -1, "not run")};
  ASSERT_TRUE(SummarizeStragglerRows(&v).ok());
  EXPECT_FALSE(v.pass);
  EXPECT_NE(FormatStragglerReport(v).find("UNJUDGED"), std::string::npos);
}

TEST(StragglerPlanTest, JoinRecordJudgesOnlyRunsThatKeptTheirCompute) {
  StragglerRow predicted = Row(0.25, -1);
  predicted.predicted_compute_s = 0.100;
  predicted.compute_limit = 0.05;
  RunRecord record;
  record.step_s = 0.26;
  record.compute_s = 0.104;  // 4 % over: within the limit
  record.straggler_rank = 1;
  record.straggler_share = 0.9;
  StragglerRow row = predicted;
  JoinRecord(&record, &row);
  EXPECT_TRUE(row.judged()) << row.note;
  EXPECT_EQ(row.measured_s, 0.26);
  EXPECT_EQ(row.held_back_by, "rank 1 in 90%");
  record.compute_s = 0.110;  // 10 % over: the box stretched the waits
  row = predicted;
  JoinRecord(&record, &row);
  EXPECT_FALSE(row.judged());
  EXPECT_NE(row.note.find("BOX-BOUND"), std::string::npos) << row.note;
  record.compute_s = 0.1;
  record.emulator_bound = true;
  record.bound_reason = "box CPU";
  row = predicted;
  JoinRecord(&record, &row);
  EXPECT_NE(row.note.find("EMULATOR-BOUND"), std::string::npos);
  record.error = "worker 2 exited 1";
  row = predicted;
  JoinRecord(&record, &row);
  EXPECT_NE(row.note.find("failed"), std::string::npos);
  EXPECT_FALSE(row.judged());
  row = predicted;
  JoinRecord(nullptr, &row);
  EXPECT_EQ(row.note, "not run");
}

}  // namespace
}  // namespace psring::bench

namespace psring::bench {
namespace {

StragglerRow BackupRow(double factor, double quorum_measured, const std::string& note = "") {
  StragglerRow r = Row(0.4, 0.4, note);
  r.condition.exchange = Exchange::kPsOne;
  r.condition.backup_workers = 1;
  r.condition.noise_sigma = 0.3;
  if (factor > 1) {
    r.condition.slow_rank = 1;
    r.condition.factor = factor;
  }
  r.cluster_s = 0.14;
  r.measured_quorum_s = quorum_measured;
  return r;
}

TEST(StragglerPlanTest, BackupCheckComparesTheQuorumWithTheSameRowWithoutTheStraggler) {
  StragglerValidation v;
  v.rows = {BackupRow(4, 0.150), BackupRow(2, 0.200), BackupRow(1, 0.140)};
  ASSERT_TRUE(SummarizeStragglerRows(&v).ok());
  // Factor 2 is below the check's factor: one check, factor 4 against the row without a straggler.
  ASSERT_EQ(v.backup_checks.size(), 1u);
  EXPECT_EQ(v.backup_checks[0].condition, v.rows[0].condition.Name());
  EXPECT_EQ(v.backup_checks[0].baseline, v.rows[2].condition.Name());
  EXPECT_NEAR(v.backup_checks[0].slowdown(), 0.15 / 0.14 - 1, 1e-12);
  // The model's quorum is judged on every judged non-control row with B > 0 (the noise-only row too).
  EXPECT_EQ(v.quorum.count, 3);
  EXPECT_NEAR(v.quorum.max_abs, 0.3, 1e-12);  // predicted 0.14 against measured 0.20
  std::string report = FormatStragglerReport(v);
  EXPECT_NE(report.find("backup-worker check: ps-1 slow 1x4 noise 0.3 B=1 closes a step every 0.1500 s, +7.1 %"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find(": PASS"), std::string::npos) << report;
  // 20 % slower than without the straggler fails; an unjudged baseline gives no check at all.
  v.rows[0].measured_quorum_s = 0.168;
  ASSERT_TRUE(SummarizeStragglerRows(&v).ok());
  ASSERT_EQ(v.backup_checks.size(), 1u);
  EXPECT_NE(FormatStragglerReport(v).find("target <= +15 %: FAIL"), std::string::npos);
  v.rows[2].note = "EMULATOR-BOUND: box CPU";
  ASSERT_TRUE(SummarizeStragglerRows(&v).ok());
  EXPECT_TRUE(v.backup_checks.empty());
}

TEST(StragglerPlanTest, JoinRecordTakesTheQuorumOnlyWithBackupWorkers) {
  RunRecord record;
  record.step_s = 0.40;
  record.quorum_step_s = 0.15;
  StragglerRow row = BackupRow(4, -1);
  JoinRecord(&record, &row);
  EXPECT_EQ(row.measured_quorum_s, 0.15);
  StragglerRow sync = Row(0.4, -1);
  JoinRecord(&record, &sync);
  EXPECT_EQ(sync.measured_quorum_s, -1);
}

}  // namespace
}  // namespace psring::bench
