// The time-to-accuracy grid and report (bench/tta/grid.h, report.h) on hand-made records: variants and cells,
// time and steps to the target from the evaluations, a run that never reaches it (no time anywhere, its best
// accuracy instead), medians with their spread, and well-formed JSON and SVG.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "bench/tta/grid.h"
#include "bench/tta/report.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/bench/svg_checks.h"

namespace psring::bench::tta {
namespace {

RunRecord Record(const std::vector<std::pair<int, double>>& curve, double seconds_per_step) {
  RunRecord r;
  for (const auto& [step, accuracy] : curve) r.evaluations.push_back({step, step * seconds_per_step, accuracy});
  r.step_s = seconds_per_step;
  r.test_accuracy = curve.back().second - 0.001;
  r.straggler_rank = 3;
  return r;
}

Cell RingCell(int nodes, double factor) {
  absl::StatusOr<std::vector<Variant>> v = ParseVariants({"ring"});
  EXPECT_TRUE(v.ok());
  return {(*v)[0], nodes, factor};
}

TEST(TtaGridTest, ParsesVariants) {
  absl::StatusOr<std::vector<Variant>> v = ParseVariants({"ring", "ps-sync", "ps-backup1", "ps-async4"});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0].exchange, Exchange::kRing);
  EXPECT_EQ((*v)[1].exchange, Exchange::kPsOne);
  EXPECT_EQ((*v)[1].ps_mode, "sync");
  EXPECT_TRUE((*v)[1].server_args.empty());
  EXPECT_EQ((*v)[2].server_args, std::vector<std::string>{"--backup_workers=1"});
  EXPECT_EQ((*v)[2].backup_workers, 1);
  EXPECT_EQ((*v)[3].ps_mode, "async");
  EXPECT_EQ((*v)[3].server_args, std::vector<std::string>{"--staleness=4"});
  for (const char* bad : {"ps-async0", "ps-backup", "allreduce", "ps-asyncx"}) {
    absl::StatusOr<std::vector<Variant>> p = ParseVariants({bad});
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(p.status().message(), bad)) << p.status();
  }
}

TEST(TtaGridTest, PlansCellsAndTheStraggler) {
  absl::StatusOr<std::vector<Variant>> v = ParseVariants({"ring", "ps-backup1"});
  ASSERT_TRUE(v.ok());
  absl::StatusOr<std::vector<Cell>> cells = PlanCells(*v, {4, 8}, {1, 2.5});
  ASSERT_TRUE(cells.ok()) << cells.status();
  ASSERT_EQ(cells->size(), 8u);
  EXPECT_EQ((*cells)[0].variant.name, "ring");
  EXPECT_EQ((*cells)[1].variant.name, "ps-backup1");
  EXPECT_EQ((*cells)[2].factor, 2.5);
  EXPECT_EQ((*cells)[4].nodes, 8);
  EXPECT_TRUE(StragglerArgs((*cells)[0]).empty());
  EXPECT_EQ(StragglerArgs((*cells)[6]), std::vector<std::string>{"--straggler=7:2.5"});
  absl::StatusOr<std::vector<Variant>> many = ParseVariants({"ps-backup4"});
  EXPECT_EQ(PlanCells(*many, {4}, {1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanCells(*v, {4}, {0.5}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanCells(*v, {1}, {1}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TtaGridTest, TimeAndStepsToTheTargetComeFromTheFirstEvaluationThatReachesIt) {
  const RunRecord record = Record({{0, 0.1}, {25, 0.8}, {50, 0.86}, {75, 0.84}, {100, 0.87}}, 0.02);
  const TtaRun run = SummarizeRun(RingCell(4, 1), 1, record, 0.85);
  ASSERT_TRUE(run.ok()) << run.error;
  EXPECT_TRUE(run.reached);
  EXPECT_EQ(run.steps_to_target, 50);
  EXPECT_DOUBLE_EQ(run.wall_to_target_s, 1.0);
  EXPECT_DOUBLE_EQ(run.best_accuracy, 0.87);
  EXPECT_EQ(run.steps, 100);

  const TtaRun never = SummarizeRun(RingCell(4, 1), 1, record, 0.9);
  EXPECT_FALSE(never.reached);
  EXPECT_EQ(never.steps_to_target, -1);
  EXPECT_EQ(never.wall_to_target_s, -1);
  EXPECT_DOUBLE_EQ(never.best_accuracy, 0.87);

  RunRecord failed;
  failed.error = "rank 2 exited 1";
  EXPECT_EQ(SummarizeRun(RingCell(4, 1), 1, failed, 0.85).error, "rank 2 exited 1");
  EXPECT_FALSE(SummarizeRun(RingCell(4, 1), 1, RunRecord{}, 0.85).ok()) << "no evaluations: not a valid run";
}

TEST(TtaGridTest, CellsAreMediansWithSpreadOverTheRunsThatReachedTheTarget) {
  std::vector<TtaRun> runs;
  // Cell A: three runs reaching the target at 3, 1 and 2 s (steps 150, 50, 100).
  for (const auto& [rep, spp] : std::vector<std::pair<int, double>>{{1, 0.03}, {2, 0.01}, {3, 0.02}}) {
    runs.push_back(SummarizeRun(RingCell(4, 4), rep, Record({{0, 0.1}, {100, 0.9}}, spp), 0.85));
  }
  // Cell B: two of three reach it.
  runs.push_back(SummarizeRun(RingCell(8, 1), 1, Record({{0, 0.1}, {100, 0.9}}, 0.01), 0.85));
  runs.push_back(SummarizeRun(RingCell(8, 1), 2, Record({{0, 0.1}, {100, 0.8}}, 0.01), 0.85));
  runs.push_back(SummarizeRun(RingCell(8, 1), 3, Record({{0, 0.1}, {100, 0.95}}, 0.03), 0.85));
  const std::vector<TtaCell> cells = MedianCells(runs);
  ASSERT_EQ(cells.size(), 2u);
  const TtaCell& a = cells[0];
  EXPECT_EQ(a.runs, 3);
  EXPECT_EQ(a.reached, 3);
  EXPECT_DOUBLE_EQ(a.wall_to_target_s.median, 2.0);
  EXPECT_DOUBLE_EQ(a.wall_to_target_s.min, 1.0);
  EXPECT_DOUBLE_EQ(a.wall_to_target_s.max, 3.0);
  EXPECT_EQ(a.median_rep, 3);
  EXPECT_EQ(a.straggler_named, 3) << "the records name rank 3, the last of N = 4";
  const TtaCell& b = cells[1];
  EXPECT_EQ(b.reached, 2);
  EXPECT_EQ(b.wall_to_target_s.count, 2);
  EXPECT_DOUBLE_EQ(b.wall_to_target_s.median, 2.0);  // (1 + 3) / 2
  EXPECT_DOUBLE_EQ(b.best_accuracy.max, 0.95);
  EXPECT_EQ(b.straggler_named, 0) << "no straggler at factor 1";
}

TEST(TtaReportTest, ARunThatNeverReachesTheTargetHasNoTime) {
  std::vector<TtaRun> runs = {
      SummarizeRun(RingCell(4, 2), 1, Record({{0, 0.1}, {100, 0.8312}}, 0.01), 0.85),
      SummarizeRun(RingCell(4, 1), 1, Record({{0, 0.1}, {50, 0.86}}, 0.01), 0.85),
  };
  const std::vector<TtaCell> cells = MedianCells(runs);
  const std::string table = FormatTable(cells, 0.85);
  EXPECT_TRUE(absl::StrContains(table, "never")) << table;
  EXPECT_TRUE(absl::StrContains(table, "83.12%")) << table;
  EXPECT_TRUE(absl::StrContains(table, "ring N=4 factor 2 (1/1, best 83.12%)")) << table;
  EXPECT_TRUE(absl::StrContains(table, "0.50")) << "the other cell's time " << table;

  TtaOptions options;
  const std::string json = ToJson(options, runs, cells);
  EXPECT_TRUE(absl::StrContains(json, R"("reached":false,"steps_to_target":null,"wall_to_target_s":null)")) << json;
  google::protobuf::Struct parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json;

  const std::string csv = CurvesCsv(runs);
  EXPECT_EQ(Count(csv, "\n"), 5);  // header + 4 evaluations
  EXPECT_TRUE(absl::StrContains(csv, "ring,4,2,1,100,1.000000,0.831200")) << csv;

  const std::string svg = RenderCurves(runs, cells, 0.85, "t");
  std::string why;
  EXPECT_TRUE(WellFormed(svg, &why)) << why;
  EXPECT_TRUE(absl::StrContains(svg, "target 85.0%"));
  EXPECT_TRUE(absl::StrContains(svg, "N = 4, straggler x2"));
}

}  // namespace
}  // namespace psring::bench::tta
