// End to end: //bench:scaling with the real worker binaries, N = 1 and 2, a tiny gradient, every exchange;
// on namespaces when the test runs as root, on loopback otherwise. Checks the outputs are written and
// well-formed and that every run passed its own correctness check (#wrong = 0).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/core/trace_merge.h"
#include "common/subprocess.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/bench_report.pb.h"
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

// //bench:scaling with the real worker programs and `flags`, run to its end within `timeout`.
absl::StatusOr<ProcessResult> RunScalingTool(const Runfiles& runfiles, const std::vector<std::string>& flags,
                                             absl::Duration timeout) {
  std::vector<std::string> argv = {
      runfiles.Rlocation("psring/bench/scaling"),
      "--ring_worker=" + runfiles.Rlocation("psring/ring/ring_worker"),
      "--ps_server=" + runfiles.Rlocation("psring/ps/server"),
      "--ps_worker=" + runfiles.Rlocation("psring/ps/worker"),
  };
  argv.insert(argv.end(), flags.begin(), flags.end());
  JobOptions options;
  options.timeout = timeout;
  absl::StatusOr<std::vector<ProcessResult>> results = RunJob({{"scaling", argv}}, options);
  if (!results.ok()) return results.status();
  return (*results)[0];
}

TEST(ScalingE2eTest, WritesWellFormedCsvJsonAndSvg) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  const char* tmp = std::getenv("TEST_TMPDIR");
  ASSERT_NE(tmp, nullptr);
  const std::string out_dir = absl::StrCat(tmp, "/scaling_out");

  auto result = RunScalingTool(*runfiles,
                               {
                                   "--nodes=1,2",
                                   "--exchanges=ring,ps-1,ps-colocated,ps-dedicated",
                                   "--ps_servers=2",
                                   "--model_bytes=64K",
                                   "--steps=2",
                                   "--warmup_steps=1",
                                   "--link=1gbit",
                                   "--worker_timeout=30",
                                   "--job_timeout=40",
                                   "--extrapolate=16,1024",
                                   "--out_dir=" + out_dir,
                               },
                               absl::Seconds(50));
  ASSERT_TRUE(result.ok()) << result.status();
  const ProcessResult& r = *result;
  ASSERT_EQ(r.exit_code, 0) << r.stderr_tail << "\n" << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("# exchange ring"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("# Out of bounds values : 0 OK"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("# VERDICT"), std::string::npos);

  // CSV: header, 8 measured rows without error, 2 model rows per exchange with a fit (an exchange whose runs
  // were all EMULATOR-BOUND on a loaded machine has none); same column count everywhere.
  const std::string csv = ReadFile(out_dir + "/scaling.csv");
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  const size_t fitted = std::count_if(lines.begin(), lines.end(),
                                      [](const std::string& l) { return l.rfind("model,", 0) == 0; });
  EXPECT_EQ(fitted % 2, 0u) << csv;
  ASSERT_EQ(lines.size(), 1u + 8u + fitted) << csv;
  const auto columns = std::count(lines[0].begin(), lines[0].end(), ',');
  for (const auto& line : lines) EXPECT_EQ(std::count(line.begin(), line.end(), ','), columns) << line;
  const std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  auto column = [&](const std::string& name) {
    return std::find(header.begin(), header.end(), name) - header.begin();
  };
  ASSERT_LT(column("wrong"), header.size());
  for (size_t i = 1; i <= 8; ++i) {
    EXPECT_EQ(lines[i].rfind("measured,gradient,", 0), 0u) << lines[i];
    std::vector<std::string> fields = absl::StrSplit(lines[i], ',');
    EXPECT_EQ(fields[column("error")], "\"\"") << "run failed: " << lines[i];
    EXPECT_EQ(fields[column("bytes")], "65536") << lines[i];
    EXPECT_EQ(fields[column("wrong")], "0") << lines[i];
    if (fields[column("nodes")] == "2") {
      EXPECT_GT(std::stod(fields[column("step_s")]), 0) << lines[i];
    }
  }

  // SVG: a complete document with both panels, labelled axes and every exchange in the legend.
  const std::string svg = ReadFile(out_dir + "/scaling.svg");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(Count(svg, "<g>"), Count(svg, "</g>"));
  EXPECT_NE(svg.find("S = 64 KiB"), std::string::npos);
  EXPECT_NE(svg.find("time per step (s)"), std::string::npos);
  for (const char* name :
       {"ring measured", "ps-1 measured", "ps-colocated measured", "ps-dedicated measured"}) {
    EXPECT_NE(svg.find(name), std::string::npos) << name;
  }
  EXPECT_EQ(svg.find("nan"), std::string::npos);

  // JSON: the report message, every run successful.
  proto::ScalingReport report;
  google::protobuf::util::JsonParseOptions strict;
  strict.ignore_unknown_fields = false;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(ReadFile(out_dir + "/scaling.json"), &report, strict).ok());
  ASSERT_EQ(report.runs_size(), 8);
  for (const proto::RunReport& run : report.runs())
    EXPECT_TRUE(run.ok()) << run.exchange() << " " << run.error();
}

// The co-located PS at N = 12 puts 24 processes (12 workers, 12 shards) on 2 shared cores: each host's tasks
// wait for a core most of the exchange (88-89 % in two hand runs) while its link carries data about half of
// it, so the box, not the links, binds (at N = 8 it is borderline: 71-77 % against 79-81 %). The run must say
// so everywhere and stay out of the checks (bench/emulator/probes.h). Before 2026-11-29 this was a ring on 4
// Gbit/s links under bbr; a cubic ring there kept the links busy 98 % of the time (the network bound it), and
// at 40 Gbit/s it ran faster than the model's CPU ceiling, so neither is the box's shortfall and the
// invariants rightly marked neither.
TEST(ScalingE2eTest, MarksASaturatedRunEmulatorBound) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for the emulated cluster (loopback runs have no link to saturate)";
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  const std::string out_dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/saturated");
  auto result = RunScalingTool(
      *runfiles,
      {"--nodes=12", "--exchanges=ps-colocated", "--model_bytes=4M", "--steps=3", "--warmup_steps=1",
       "--link=100mbit", "--worker_timeout=60", "--job_timeout=90", "--out_dir=" + out_dir},
      absl::Seconds(150));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->exit_code, 0) << result->stderr_tail << "\n" << result->stdout_text;
  const std::string& out = result->stdout_text;
  EXPECT_NE(out.find("  EMULATOR-BOUND\n"), std::string::npos) << out;
  EXPECT_NE(out.find("# EMULATOR-BOUND rows  : 1"), std::string::npos) << out;
  EXPECT_NE(result->stderr_tail.find("EMULATOR-BOUND (host "), std::string::npos) << result->stderr_tail;
  // Left out of the checks (the model line needs a usable run at S >= 4 MiB) and never named fastest.
  EXPECT_EQ(out.find("model ps-colocated S>=4 MiB"), std::string::npos) << out;
  EXPECT_NE(out.find("    12  -  "), std::string::npos) << out;
  const std::string csv = ReadFile(out_dir + "/scaling.csv");
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 2u) << csv;
  const std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  const auto column = std::find(header.begin(), header.end(), "emulator_bound") - header.begin();
  ASSERT_LT(column, static_cast<long>(header.size())) << lines[0];
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(lines[1], ','))[column], "1") << lines[1];
  proto::ScalingReport report;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ReadFile(out_dir + "/scaling.json"), &report).ok());
  ASSERT_EQ(report.runs_size(), 1);
  EXPECT_TRUE(report.runs(0).emulator_bound());
  EXPECT_GE(report.runs(0).host_stall(), 0.1) << report.runs(0).bound_reason();
  // Recorded, not asserted below 80 %: it read 0.85 once while other tests ran beside it; the rules of
  // bench/emulator/probes.h are checked on fixed data in probes_test.
  EXPECT_GE(report.runs(0).link_util(), 0) << report.runs(0).bound_reason();
  EXPECT_FALSE(report.runs(0).bound_reason().empty());
}

// --verbose shows where a run is: rank 0's line per step, not only the processes' start and end (issue 24).
TEST(ScalingE2eTest, VerboseShowsRankZerosSteps) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  auto result = RunScalingTool(*runfiles,
                               {"--loopback", "--verbose", "--nodes=2", "--exchanges=ring,ps-colocated",
                                "--model_bytes=64K", "--steps=2", "--warmup_steps=1", "--worker_timeout=30",
                                "--job_timeout=40", "--timeline=false",
                                "--out_dir=" + absl::StrCat(std::getenv("TEST_TMPDIR"), "/verbose_out")},
                               absl::Seconds(50));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->exit_code, 0) << result->stderr_tail << "\n" << result->stdout_text;
  for (const char* line : {"ring rank 0 | step [1/3] warm-up | ", "ring rank 0 | step [3/3] measured | ",
                           "ps-colocated rank 0 | step [3/3] measured | "}) {
    EXPECT_NE(result->stderr_tail.find(line), std::string::npos) << line << "\n" << result->stderr_tail;
  }
  EXPECT_EQ(result->stderr_tail.find("rank 1 | step ["), std::string::npos) << result->stderr_tail;
}

TEST(ScalingE2eTest, LoopbackRunsEveryHostOn127001) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  const std::string out_dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/loopback_out");
  auto result = RunScalingTool(
      *runfiles,
      {
          "--loopback",
          "--nodes=2",
          "--exchanges=ring,ps-colocated",  // co-located shards need distinct ports on one address
          "--model_bytes=64K",
          "--steps=2",
          "--warmup_steps=1",
          "--worker_timeout=30",
          "--job_timeout=40",
          "--out_dir=" + out_dir,
      },
      absl::Seconds(50));
  ASSERT_TRUE(result.ok()) << result.status();
  const ProcessResult& r = *result;
  ASSERT_EQ(r.exit_code, 0) << r.stderr_tail << "\n" << r.stdout_text;
  EXPECT_NE(r.stderr_tail.find("no emulated cluster (loopback requested)"), std::string::npos)
      << r.stderr_tail;
  EXPECT_NE(r.stdout_text.find("LOOPBACK"), std::string::npos);
  EXPECT_EQ(r.stdout_text.find("# check"), std::string::npos);  // no acceptance checks without link limits
  const std::string svg = ReadFile(out_dir + "/scaling.svg");
  EXPECT_NE(svg.find("LOOPBACK, not a network"), std::string::npos);
  EXPECT_NE(svg.find("bus bandwidth (MB/s)"), std::string::npos);
}

// Replay mode end to end on loopback (seconds): the MLP profile, flat and bucketed, ring and co-located PS at
// N = 2; every run checked (#wrong = 0), each run's ranks merged into one trace with one pid per rank, and
// the per-workload figures (step time, Gantt chart) written.
TEST(ScalingE2eTest, ReplaysAWorkloadFlatAndBucketedWithMergedTimelines) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  // Replay mode lives in the workers (--workload); without it there is nothing for the harness to drive.
  auto help =
      RunJob({{"help", {runfiles->Rlocation("psring/ring/ring_worker"), "--helpfull"}}}, JobOptions());
  ASSERT_TRUE(help.ok()) << help.status();
  if ((*help)[0].stdout_text.find("-workload") == std::string::npos) {
    GTEST_SKIP() << "ring_worker has no --workload (replay mode) yet";
  }
  const std::string out_dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/replay_out");
  auto result = RunScalingTool(*runfiles,
                               {
                                   "--loopback",
                                   "--nodes=2",
                                   "--exchanges=ring,ps-colocated",
                                   "--workload=mlp",
                                   "--bucket_mb=0,0.25",
                                   "--steps=3",
                                   "--warmup_steps=1",
                                   "--worker_timeout=30",
                                   "--job_timeout=40",
                                   "--out_dir=" + out_dir,
                               },
                               absl::Seconds(100));
  ASSERT_TRUE(result.ok()) << result.status();
  const ProcessResult& r = *result;
  ASSERT_EQ(r.exit_code, 0) << r.stderr_tail << "\n" << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("# workload mlp, exchange ring"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("# VERDICT mlp"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("# MODEL mlp"), std::string::npos);

  const std::string csv = ReadFile(out_dir + "/scaling.csv");
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1u + 4u) << csv;
  const std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  auto column = [&](const std::string& name) {
    return std::find(header.begin(), header.end(), name) - header.begin();
  };
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> fields = absl::StrSplit(lines[i], ',');
    EXPECT_EQ(fields[column("mode")], "replay") << lines[i];
    EXPECT_EQ(fields[column("workload")], "\"mlp\"") << lines[i];
    EXPECT_EQ(fields[column("wrong")], "0") << lines[i];
    EXPECT_EQ(fields[column("error")], "\"\"") << lines[i];
    // The merged trace of the run: valid trace JSON, one pid per rank, the ranks' spans all there.
    std::string timeline = fields[column("timeline")];
    timeline = timeline.substr(1, timeline.size() - 2);
    EXPECT_NE(timeline.find(out_dir + "/timelines/mlp-"), std::string::npos) << timeline;
    auto spans = ReadSpans(ReadFile(timeline));
    ASSERT_TRUE(spans.ok()) << timeline << ": " << spans.status();
    std::set<int> pids;
    for (const TraceSpan& span : *spans) pids.insert(span.pid);
    EXPECT_EQ(pids, (std::set<int>{0, 1})) << timeline;
    // Each measured step marked on the lane of the rank that held it back; no backup workers: the quorum's
    // step is the slowest rank's.
    EXPECT_EQ(Count(ReadFile(timeline), "\"cat\":\"attribution\""), 3) << timeline;
    EXPECT_EQ(fields[column("backup_workers")], "0") << lines[i];
    EXPECT_EQ(fields[column("quorum_step_s")], fields[column("step_s")]) << lines[i];
    for (int rank = 0; rank < 2; ++rank) {
      const std::string rank_file =
          absl::StrCat(timeline.substr(0, timeline.size() - 5), "/rank", rank, ".json");
      auto rank_spans = ReadSpans(ReadFile(rank_file));
      ASSERT_TRUE(rank_spans.ok()) << rank_file;
      EXPECT_EQ(static_cast<size_t>(std::count_if(spans->begin(), spans->end(),
                                                  [rank](const TraceSpan& s) { return s.pid == rank; })),
                rank_spans->size())
          << rank_file;
    }
  }
  const std::string gantt = ReadFile(out_dir + "/gantt-mlp.svg");
  std::string why;
  EXPECT_TRUE(WellFormed(gantt, &why)) << why;
  EXPECT_GT(Count(gantt, "<rect class=\"span\""), 0);
  EXPECT_NE(gantt.find("ps-colocated, N = 2, bucket 0.25 MB"), std::string::npos);
  EXPECT_TRUE(WellFormed(ReadFile(out_dir + "/scaling-mlp.svg"), &why)) << why;
}

}  // namespace
}  // namespace psring::bench
