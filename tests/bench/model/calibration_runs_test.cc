// Saved calibration runs: the file round-trips every condition, a refit of them is the fit of the runs
// themselves and carries the runs' data path, and a bad file is refused with the run named.
#include "bench/model/calibration_runs.h"

#include <fstream>

#include "bench/model/data_path.h"
#include "bench/model/model_file.h"
#include "gtest/gtest.h"
#include "tests/bench/model/synthetic_runs.h"
#include "tests/testing/temp_dir.h"

namespace psring::bench::model {
namespace {

using ::psring::testing::FreshTempPath;

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

TEST(CalibrationRunsTest, RoundTripsEveryRun) {
  std::vector<MeasuredRun> runs = SyntheticRuns();
  runs[0].conditions.link_burst_bytes = 12345;
  runs[1].conditions.box_cores = 2;
  const std::string path = FreshTempPath("runs_round_trip.json");
  ASSERT_TRUE(
      WriteCalibrationRuns(path, runs,
                           {"box", "2026-12-01T00:00:00+00:00", "quick", "cubic, slow start after idle off"})
          .ok());
  absl::StatusOr<SavedRuns> saved = ReadCalibrationRuns(path);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->file.host(), "box");
  EXPECT_EQ(saved->file.hosts_tcp(), "cubic, slow start after idle off");
  EXPECT_EQ(saved->file.date(), "2026-12-01T00:00:00+00:00");
  EXPECT_EQ(saved->file.data_path_fingerprint(), kDataPathFingerprint);
  ASSERT_EQ(saved->runs.size(), runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    SCOPED_TRACE(i);
    const MeasuredRun& a = runs[i];
    const MeasuredRun& b = saved->runs[i];
    EXPECT_EQ(a.topology, b.topology);
    EXPECT_EQ(a.conditions.nodes, b.conditions.nodes);
    EXPECT_EQ(a.conditions.servers, b.conditions.servers);
    EXPECT_EQ(a.conditions.bytes, b.conditions.bytes);
    EXPECT_EQ(a.conditions.link_bytes_per_second, b.conditions.link_bytes_per_second);
    EXPECT_EQ(a.conditions.latency_s, b.conditions.latency_s);
    EXPECT_EQ(a.conditions.link_burst_bytes, b.conditions.link_burst_bytes);
    EXPECT_EQ(a.conditions.box_cores, b.conditions.box_cores);
    EXPECT_EQ(a.seconds, b.seconds);
  }
}

TEST(CalibrationRunsTest, RefitIsTheFitOfTheRunsWithTheirDataPath) {
  const std::vector<MeasuredRun> runs = SyntheticRuns();
  const std::string path = FreshTempPath("runs_refit.json");
  ASSERT_TRUE(
      WriteCalibrationRuns(path, runs,
                           {"box", "2026-12-01T00:00:00+00:00", "quick", "cubic, slow start after idle off"})
          .ok());
  absl::StatusOr<SavedRuns> saved = ReadCalibrationRuns(path);
  ASSERT_TRUE(saved.ok()) << saved.status();
  // As if measured by other code: the refit must name that code, not this build's.
  saved->file.set_data_path_fingerprint("0123456789abcdef");
  absl::StatusOr<proto::CostModelFile> refit = RefitModel(*saved, path);
  ASSERT_TRUE(refit.ok()) << refit.status();
  absl::StatusOr<proto::CostModelFile> direct = FitModel(runs, {"box", "2026-12-01T00:00:00+00:00", "quick"});
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(refit->data_path_fingerprint(), "0123456789abcdef");
  EXPECT_EQ(refit->host(), "box");
  EXPECT_EQ(refit->hosts_tcp(), "cubic, slow start after idle off") << "the TCP the runs were measured under";
  EXPECT_NE(refit->note().find("refit of the runs in"), std::string::npos) << refit->note();
  for (Topology t : AllTopologies()) {
    SCOPED_TRACE(TopologyName(t));
    absl::StatusOr<ExchangeParams> a = ParamsOf(*refit, t);
    absl::StatusOr<ExchangeParams> b = ParamsOf(*direct, t);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->efficiency, b->efficiency);
    EXPECT_EQ(a->window_bytes, b->window_bytes);
    EXPECT_EQ(a->cpu_bytes_per_second, b->cpu_bytes_per_second);
    EXPECT_EQ(a->software_s, b->software_s);
  }
  EXPECT_FALSE(CompareDataPath(*refit).current);
}

// --refit=a.json,b.json: a supplementary sweep merged with a calibration, only from one host, one data path
// and one TCP of the emulated hosts.
TEST(CalibrationRunsTest, MergesRunsOfOneHostAndDataPath) {
  const std::vector<MeasuredRun> runs = SyntheticRuns();
  SavedRuns a, b;
  a.file.set_host("box");
  a.file.set_date("2026-12-01T00:00:00+00:00");
  a.file.set_data_path_fingerprint("0123456789abcdef");
  a.file.set_note("quick");
  a.file.set_hosts_tcp("cubic, slow start after idle off");
  b.file = a.file;
  b.file.set_date("2026-12-02T00:00:00+00:00");
  b.file.set_note("N = 12, 16");
  a.runs.assign(runs.begin(), runs.begin() + 10);
  b.runs.assign(runs.begin() + 10, runs.end());
  absl::StatusOr<SavedRuns> merged = MergeSavedRuns({a, b}, {"a.json", "b.json"});
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(merged->runs.size(), runs.size());
  EXPECT_EQ(merged->runs[10].seconds, runs[10].seconds);
  EXPECT_EQ(merged->file.date(), "2026-12-02T00:00:00+00:00");
  EXPECT_EQ(merged->file.data_path_fingerprint(), "0123456789abcdef");
  EXPECT_NE(merged->file.note().find("b.json: N = 12, 16"), std::string::npos) << merged->file.note();

  SavedRuns other_host = b;
  other_host.file.set_host("bigger");
  absl::Status status = MergeSavedRuns({a, other_host}, {"a.json", "c.json"}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("c.json was measured on host 'bigger'"), std::string::npos) << status;
  SavedRuns other_code = b;
  other_code.file.set_data_path_fingerprint("fedcba9876543210");
  status = MergeSavedRuns({a, other_code}, {"a.json", "d.json"}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("recalibrate"), std::string::npos) << status;
  SavedRuns other_tcp = b;
  other_tcp.file.set_hosts_tcp("bbr, slow start after idle on");
  status = MergeSavedRuns({a, other_tcp}, {"a.json", "e.json"}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("e.json was measured with the hosts' TCP 'bbr, slow start after idle on'"),
            std::string::npos)
      << status;
  EXPECT_EQ(MergeSavedRuns({}, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CalibrationRunsTest, RefusesBadFiles) {
  EXPECT_EQ(ReadCalibrationRuns(FreshTempPath("no_such_runs.json")).status().code(),
            absl::StatusCode::kNotFound);
  const std::string path = FreshTempPath("bad_runs.json");
  WriteText(path, "{\"version\": 1, \"runs\": [");
  EXPECT_EQ(ReadCalibrationRuns(path).status().code(), absl::StatusCode::kInvalidArgument);
  WriteText(path, "{\"version\": 2, \"runs\": []}");
  EXPECT_NE(ReadCalibrationRuns(path).status().message().find("version 2"), std::string::npos);
  WriteText(path, R"({"version": 1, "runs": [{"exchange": "ring", "nodes": 2, "bytes": 4, "seconds": 1},
                                            {"exchange": "tree", "nodes": 2, "bytes": 4, "seconds": 1}]})");
  absl::Status status = ReadCalibrationRuns(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("run 1 (tree)"), std::string::npos) << status;
  WriteText(path, R"({"version": 1, "runs": [{"exchange": "ps-1", "nodes": 2, "bytes": 4, "seconds": 0}]})");
  status = ReadCalibrationRuns(path).status();
  EXPECT_NE(status.message().find("run 0 (ps-1): measured time 0"), std::string::npos) << status;
  WriteText(path, R"({"version": 1, "runs": [{"exchange": "ps-1", "nodes": 0, "bytes": 4, "seconds": 1}]})");
  EXPECT_EQ(ReadCalibrationRuns(path).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psring::bench::model
