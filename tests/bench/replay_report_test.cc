// Replay mode's report (bench/report/replay_report.cc) on records synthesised from known compute and a known
// calibrated model (bench/model/sweep_model.h predicts with it): the overlapped-step model, its check, the
// projection, the verdict, the figures and the CSV round trip. The end-to-end run with real workers is in
// scaling_e2e_test.
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "bench/model/cpu_model.h"
#include "bench/model/exchange_topology.h"
#include "bench/model/model_file.h"
#include "bench/model/schedule.h"
#include "bench/model/workload_step.h"
#include "bench/model/sweep_model.h"
#include "bench/report/scaling_report.h"
#include "gtest/gtest.h"
#include "tests/bench/model/synthetic_runs.h"
#include "tests/bench/svg_checks.h"
#include "trainer/workload.h"

namespace psring::bench {
namespace {

constexpr double kLink = 12.5e6;
constexpr double kForward = 0.05, kBackward = 0.10, kOptimizer = 0.01;
constexpr double kBytes = 8e6;  // the workers' S
// 1 ms per message, the whole link, no window or CPU limit.
const model::ExchangeParams kParams = {1e-3, 1, 0, 0};

// The profile: three layers (40, 30, 10 MB of gradients), times on its own device 10x the measured (scaled)
// ones, bytes at full size; the workers replay it with its bytes divided by 10.
proto::Workload Profile() {
  proto::Workload w;
  w.set_name("toy");
  for (const auto& [params, forward_ms, backward_ms] :
       std::vector<std::tuple<int64_t, double, double>>{{10000000, 200, 400}, {7500000, 200, 400}, {2500000, 100, 200}}) {
    proto::WorkloadLayer* l = w.add_layers();
    l->set_params(params);
    l->set_forward_ms(forward_ms);
    l->set_backward_ms(backward_ms);
  }
  return w;
}

// The model's flat exchange of the workers' 8 MB at N.
double FlatExchange(Exchange e, int n) {
  const model::Conditions at{n, 2, kBytes, kLink, 0};
  return model::PredictCollectiveUnchecked(TopologyOf(e), kParams, at).seconds;
}

// `bucket_mb`: the bucketed runs' cap, a size of the real (profile's) model.
ScalingResult Synthetic(double bucket_mb = 2) {
  ScalingResult result;
  result.options.mode = "replay";
  result.options.workloads = {"toy"};
  result.options.bucket_mbs = {0, bucket_mb};
  result.options.exchanges = {Exchange::kRing, Exchange::kPsColocated};
  result.options.nodes = {1, 2, 4};
  result.options.extrapolate_nodes = {16};
  result.options.projection = {25e9 / 8, 5e-6};
  result.emulated = true;
  result.link_bytes_per_second = kLink;
  result.model = model::ModelFileOf({kParams, kParams, kParams, kParams});
  result.options.model_path = "synthetic.json";
  result.workloads["toy"] = Profile();
  for (int n : result.options.nodes) {
    for (Exchange e : result.options.exchanges) {
      for (double mb : result.options.bucket_mbs) {
        RunRecord r;
        r.exchange = e;
        r.nodes = n;
        r.servers = PluginFor(e).Servers(n, 2);
        r.bytes = static_cast<size_t>(kBytes);
        r.steps = 4;
        r.workload = "toy";
        r.bucket_mb = mb;
        r.forward_s = kForward;
        r.backward_s = kBackward;
        r.optimizer_s = kOptimizer;
        r.exchange_s = FlatExchange(e, n);
        r.step_s = kForward + kBackward + kOptimizer + r.exchange_s;  // flat; bucketed set below
        result.records.push_back(r);
      }
    }
  }
  // The bucketed steps as the model has them (their check then passes); the flat ones stay closed-form.
  for (RunRecord& r : result.records) {
    if (r.bucket_mb > 0) r.step_s = ReplayModelSeconds(result, r.exchange, r.nodes, "toy", r.bucket_mb);
  }
  return result;
}

TEST(ReplayReportTest, FlatModelIsComputePlusTheModelsExchange) {
  ScalingResult result = Synthetic();
  for (Exchange e : result.options.exchanges) {
    for (int n : {2, 4, 16}) {
      // The measured compute (not the profile's 10x), the model's exchange of all 8 MB.
      EXPECT_NEAR(ReplayModelSeconds(result, e, n, "toy", 0),
                  kForward + kBackward + kOptimizer + FlatExchange(e, n), 1e-9)
          << ExchangeName(e) << " N=" << n;
    }
  }
  EXPECT_EQ(ReplayModelSeconds(result, Exchange::kRing, 2, "other", 0), -1);  // no profile
  result.model.reset();
  EXPECT_EQ(ReplayModelSeconds(result, Exchange::kRing, 2, "toy", 0), -1);  // no model
}

TEST(ReplayReportTest, BucketsHideExchangeBehindBackward) {
  const ScalingResult result = Synthetic();
  const double flat = ReplayModelSeconds(result, Exchange::kRing, 4, "toy", 0);
  const double bucketed = ReplayModelSeconds(result, Exchange::kRing, 4, "toy", 2);
  // Never better than forward + max(backward, exchange), never worse than flat.
  EXPECT_LT(bucketed, flat);
  EXPECT_GE(bucketed, kForward + kOptimizer + std::max(kBackward, FlatExchange(Exchange::kRing, 4)) - 1e-9);
}

TEST(ReplayReportTest, WorkersGetTheBucketCapsDividedByBytesScaleInReplayModeOnly) {
  ScalingOptions options;
  options.mode = "replay";
  options.bytes_scale = 64;
  EXPECT_EQ(WorkerBucketMb(options, 25), 0.390625);
  EXPECT_EQ(WorkerBucketMb(options, options.first_bucket_mb), 1.0 / 64);  // DDP's 1 MiB first bucket, scaled
  EXPECT_EQ(WorkerBucketMb(options, 0), 0);                               // flat stays flat
  options.mode = "train";  // --bytes_scale scales replayed profiles only
  EXPECT_EQ(WorkerBucketMb(options, 25), 25);
}

TEST(ReplayReportTest, ModelCutsTheScaledLayersWithTheScaledCaps) {
  // The profile's 80 MB replayed as 8 MB (bytes / 10): a 35 MB cap with a 1 MB first bucket groups the real
  // layers (40, 30, 10 MB; last first) as [10] [30 40]. The model must see the workers' buckets: the scaled
  // layers cut with 3.5 MB and 0.1 MB caps, which is the same as a profile at the scaled size with those caps.
  const ScalingResult real = Synthetic(35);
  ScalingResult scaled = Synthetic(3.5);
  scaled.options.first_bucket_mb = 0.1;
  for (proto::WorkloadLayer& l : *scaled.workloads["toy"].mutable_layers()) l.set_params(l.params() / 10);
  for (int n : {2, 4, 16}) {
    EXPECT_DOUBLE_EQ(ReplayModelSeconds(real, Exchange::kRing, n, "toy", 35),
                     ReplayModelSeconds(scaled, Exchange::kRing, n, "toy", 3.5))
        << "N=" << n;
  }
  // The unscaled caps on the scaled layers would group them [1 3] [4] instead: a different step.
  ScalingResult unscaled_caps = Synthetic(35);
  for (proto::WorkloadLayer& l : *unscaled_caps.workloads["toy"].mutable_layers()) l.set_params(l.params() / 10);
  EXPECT_NE(ReplayModelSeconds(real, Exchange::kRing, 4, "toy", 35),
            ReplayModelSeconds(unscaled_caps, Exchange::kRing, 4, "toy", 35));
}

TEST(ReplayReportTest, BucketsAreNamedByTheirRealSize) {
  // DDP's 25 MB under --bytes_scale=64: the workers had 0.390625 MB buckets, every label says 25 MB.
  ScalingResult result = Synthetic(25);
  result.options.bytes_scale = 64;
  std::ostringstream out;
  PrintReport(result, out);
  PrintVerdict(result, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("overlap toy ring N=4 bucket 25 MB"), std::string::npos) << text;
  EXPECT_NE(text.find("ps-colocated 25 MB"), std::string::npos) << text;
  EXPECT_NE(text.find("ring_25MB_s"), std::string::npos) << text;
  EXPECT_EQ(text.find("0.39"), std::string::npos) << text;
  auto figures = ReplayFigures(result);
  ASSERT_TRUE(figures.ok()) << figures.status();
  for (const auto& [name, svg] : *figures) {
    EXPECT_NE(svg.find("25 MB"), std::string::npos) << name;
    EXPECT_EQ(svg.find("0.39"), std::string::npos) << name;
  }
  const std::string csv = ToCsv(result);
  EXPECT_EQ(csv.find("0.39"), std::string::npos) << csv;
}

TEST(ReplayReportTest, ReportHasTablesChecksProjectionAndVerdict) {
  const ScalingResult result = Synthetic();
  std::ostringstream out;
  PrintReport(result, out);
  PrintVerdict(result, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("# workload toy: S = 8.00 MB"), std::string::npos) << text;
  EXPECT_NE(text.find("# workload toy, exchange ring"), std::string::npos);
  EXPECT_NE(text.find("# info model toy ring step (the calibrated model with the measured compute, not fitted on "
                      "these runs): max |error| 0.0% over 4 points"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# PROJECTION (model, NOT measured) of toy onto a cluster with 25 Gbit/s links and 5 us"),
            std::string::npos);
  // Title, header, N = 1, 2, 4, 16, and the bound table at the largest N (model::FormatProjection).
  EXPECT_EQ(Count(text, "\n# PROJECTION "), 1 + 1 + 4 + 1);
  EXPECT_EQ(Count(text, "\n# MODEL "), 1 + 1 + 4);
  EXPECT_NE(text.find("overlap toy ring N=4 bucket 2 MB"), std::string::npos);
  EXPECT_NE(text.find("# VERDICT toy"), std::string::npos);
  EXPECT_NE(text.find("ps-colocated 2 MB"), std::string::npos);
  EXPECT_EQ(text.find("nan"), std::string::npos);
}

// The projection's bound table says whether the target's ports are known; a port buffer the PS's window
// burst exceeds (--project_port_buffer_kb) marks its rows INCAST.
TEST(ReplayReportTest, ProjectionMarksIncastWithATargetPortBuffer) {
  ScalingResult result = Synthetic();
  std::ostringstream lossless;
  PrintReport(result, lossless);
  EXPECT_NE(lossless.str().find("switch ports assumed lossless"), std::string::npos) << lossless.str();
  EXPECT_EQ(lossless.str().find("   INCAST x"), std::string::npos) << lossless.str();
  result.options.projection.port_buffer_bytes = 1000;  // 1 kB: any PS at N = 16 bursts more
  std::ostringstream marked;
  PrintReport(result, marked);
  EXPECT_NE(marked.str().find("switch ports hold 1 kB"), std::string::npos) << marked.str();
  EXPECT_NE(marked.str().find("   INCAST x"), std::string::npos) << marked.str();
}

// The overlap check's ideal comes from the flat twin's exchange: when the box bound that run, the bucketed
// run has nothing trustworthy to be judged against, and the line says so instead of passing or failing.
TEST(ReplayReportTest, OverlapIsNotJudgedAgainstAnEmulatorBoundFlatRun) {
  ScalingResult result = Synthetic();
  for (RunRecord& r : result.records) {
    if (r.exchange == Exchange::kRing && r.nodes == 4 && r.bucket_mb == 0) {
      r.emulator_bound = true;
      r.bound_reason = "runnable tasks waited for a core 31% of the measured time";
    }
  }
  std::ostringstream out;
  PrintReport(result, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("# skip overlap toy ring N=4 bucket 2 MB: its flat run is EMULATOR-BOUND (runnable tasks "
                      "waited for a core 31%"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("overlap toy ring N=4 bucket 2 MB: step"), std::string::npos) << text;
  EXPECT_NE(text.find("overlap toy ring N=2 bucket 2 MB: step"), std::string::npos) << text;
}

// A bucketed step 3 % over the 1.15 x ideal bound: FAIL when its steps were steady, no verdict when they
// spread by 5 % (a rerun could land on either side), FAIL again when it misses by more than the spread.
TEST(ReplayReportTest, OverlapCheckAllowsForTheMeasuredStepNoise) {
  for (const auto& [over, spread, want] :
       std::vector<std::tuple<double, double, std::string>>{{1.03, 0.0, ": FAIL"},
                                                            {1.03, 0.05, "no verdict"},
                                                            {1.08, 0.05, ": FAIL"}}) {
    ScalingResult result = Synthetic();
    // Make N=2 ring balanced (compute ~ its flat exchange) and its bucketed step miss the ideal bound.
    for (RunRecord& r : result.records) {
      if (r.exchange == Exchange::kRing && r.nodes == 2 && r.bucket_mb == 0) r.exchange_s = kForward + kBackward;
    }
    for (RunRecord& r : result.records) {
      if (r.exchange != Exchange::kRing || r.nodes != 2 || r.bucket_mb <= 0) continue;
      const double ideal = r.forward_s + std::max(r.backward_s, kForward + kBackward) + r.optimizer_s;
      r.step_s = 1.15 * ideal * over;
      r.step_spread = spread;
    }
    std::ostringstream out;
    PrintReport(result, out);
    const std::string text = out.str();
    const size_t line = text.find("overlap toy ring N=2 bucket 2 MB");
    ASSERT_NE(line, std::string::npos) << text;
    const std::string rest = text.substr(line, text.find('\n', line) - line);
    EXPECT_NE(rest.find(want), std::string::npos) << rest;
  }
}

TEST(ReplayReportTest, ProjectionUsesTheProfilesOwnComputeAndSize) {
  ScalingResult result = Synthetic();
  std::ostringstream out;
  PrintReport(result, out);
  // Ring at N = 2, flat, on 25 Gbit/s with 5 us: the profile's own forward and backward (0.5 + 1.0 s) and its
  // 80 MB, from the model directly.
  absl::StatusOr<model::StepShape> shape = model::WorkloadStep(Profile(), 0, 1);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_NEAR(shape->forward_s + shape->backward_s, 1.5, 1e-12);
  model::Conditions at;
  at.nodes = 2;
  at.link_bytes_per_second = 25e9 / 8;
  at.latency_s = 5e-6;
  absl::StatusOr<model::StepTime> expected = model::PredictStep(model::Topology::kRing, kParams, at, *shape);
  ASSERT_TRUE(expected.ok()) << expected.status();
  const size_t row = out.str().find("# PROJECTION      2");
  ASSERT_NE(row, std::string::npos) << out.str();
  EXPECT_NEAR(std::stod(out.str().substr(row + 19, 17)), expected->step_s, 1e-4);
  // Without a model there is no projection.
  result.model.reset();
  std::ostringstream none;
  PrintReport(result, none);
  EXPECT_NE(none.str().find("# PROJECTION skipped: no model"), std::string::npos) << none.str();
}

TEST(ReplayReportTest, ProjectionWithTheCalibratedModelUsesTheRealProfileAndItsCeilings) {
  // A frozen model file with a CPU ceiling: the table takes the named preset at its real size with DDP's
  // buckets (resnet50, 2 MB here), the model's parameters (the ceiling included) and the target's one-way
  // latency.
  ScalingResult result = Synthetic();
  absl::StatusOr<proto::Workload> resnet = trainer::LoadWorkload("resnet50");
  ASSERT_TRUE(resnet.ok()) << resnet.status();
  result.options.workloads = {"resnet50"};
  result.workloads = {{"resnet50", *resnet}};
  for (RunRecord& r : result.records) r.workload = "resnet50";
  std::vector<model::ExchangeParams> params;
  for (model::Topology t : model::AllTopologies()) params.push_back(model::TruthFor(t));
  params[0].cpu_bytes_per_second = 1e9;  // the ring: 1 GB/s, below the 3.125 GB/s link
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/model.json";
  ASSERT_TRUE(model::WriteModelFile(path, model::ModelFileOf(params)).ok());
  result.options.model_path = path;
  absl::StatusOr<ScalingResult> read = AnalyzeSweep(result);  // the model and the profile from their files
  ASSERT_TRUE(read.ok()) << read.status();
  std::ostringstream out;
  PrintReport(*read, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("# PROJECTION (model, NOT measured) of resnet50 onto a cluster with 25 Gbit/s links and 5 "
                      "us one-way latency"),
            std::string::npos)
      << text;
  // Ring, N = 2, flat, from the model directly: forward + backward of ResNet-50 + its 102 MB ring, CPU-bound.
  absl::StatusOr<model::StepShape> shape = model::WorkloadStep(*resnet, 0, 1);
  ASSERT_TRUE(shape.ok()) << shape.status();
  model::Conditions at;
  at.nodes = 2;
  at.link_bytes_per_second = 25e9 / 8;
  at.latency_s = 5e-6;
  absl::StatusOr<model::StepTime> expected = model::PredictStep(model::Topology::kRing, params[0], at, *shape);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(expected->bound, model::Bound::kCpu);
  const size_t row = text.find("# PROJECTION      2");
  ASSERT_NE(row, std::string::npos) << text;
  EXPECT_NEAR(std::stod(text.substr(row + 19, 17)), expected->step_s, 1e-4);
  // The per-exchange table names the bound and the ceiling.
  EXPECT_NE(text.find("cpu"), std::string::npos);

  // The target's own CPU (--cpu_model): the file's 0.5 GB/s for the ring replaces the model's 1 GB/s in the
  // projection, and only there.
  proto::CpuModelFile cpu;
  cpu.set_version(model::kCpuModelFileVersion);
  cpu.set_host("target");
  cpu.set_date("2026-11-27");
  cpu.set_cores(16);
  for (model::Topology t : model::AllTopologies()) {
    proto::CpuExchange* e = cpu.add_exchanges();
    e->set_exchange(model::TopologyName(t));
    e->set_cpu_bytes_per_second(t == model::Topology::kRing ? 0.5e9 : 2e9);
  }
  const std::string cpu_path = std::string(getenv("TEST_TMPDIR")) + "/cpu.json";
  ASSERT_TRUE(model::WriteCpuModelFile(cpu_path, cpu).ok());
  result.options.cpu_model_path = cpu_path;
  absl::StatusOr<ScalingResult> target = AnalyzeSweep(result);
  ASSERT_TRUE(target.ok()) << target.status();
  std::ostringstream with_cpu;
  PrintReport(*target, with_cpu);
  params[0].cpu_bytes_per_second = 0.5e9;
  absl::StatusOr<model::StepTime> slower = model::PredictStep(model::Topology::kRing, params[0], at, *shape);
  ASSERT_TRUE(slower.ok()) << slower.status();
  const size_t target_row = with_cpu.str().find("# PROJECTION      2");
  ASSERT_NE(target_row, std::string::npos) << with_cpu.str();
  EXPECT_NEAR(std::stod(with_cpu.str().substr(target_row + 19, 17)), slower->step_s, 1e-4);
  EXPECT_NE(with_cpu.str().find("# CPU ceilings from " + cpu_path + " (target, 2026-11-27)"), std::string::npos)
      << with_cpu.str();
  EXPECT_EQ(ModelSeconds(*target, Exchange::kRing, 2, kBytes), ModelSeconds(*read, Exchange::kRing, 2, kBytes));
  result.options.cpu_model_path.clear();

  // A missing file: the report is not made, and the error names the file.
  result.options.model_path = path + ".missing";
  absl::StatusOr<ScalingResult> missing = AnalyzeSweep(result);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("model.json.missing"), std::string::npos) << missing.status();
}

TEST(ReplayReportTest, FiguresAreWellFormedAndTheProjectionIsMarked) {
  const ScalingResult result = Synthetic();
  auto figures = ReplayFigures(result);
  ASSERT_TRUE(figures.ok()) << figures.status();
  ASSERT_EQ(figures->size(), 2u);  // no timelines: no Gantt chart
  EXPECT_EQ((*figures)[0].first, "scaling-toy.svg");
  EXPECT_EQ((*figures)[1].first, "projection-toy.svg");
  for (const auto& [name, svg] : *figures) {
    std::string why;
    EXPECT_TRUE(WellFormed(svg, &why)) << name << ": " << why;
    EXPECT_EQ(svg.find("nan"), std::string::npos) << name;
  }
  const std::string& projection = (*figures)[1].second;
  EXPECT_NE(projection.find("PROJECTION (model, NOT measured)"), std::string::npos);
  EXPECT_EQ(Count(projection, "<circle"), 0);  // nothing measured on it: dashed lines only
  EXPECT_GT(Count(projection, "stroke-dasharray"), 0);
}

TEST(ReplayReportTest, CsvRoundTripKeepsWorkloadAndBuckets) {
  const ScalingResult result = Synthetic();
  auto records = RecordsFromCsv(ToCsv(result));
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), result.records.size());
  for (size_t i = 0; i < records->size(); ++i) {
    EXPECT_EQ((*records)[i].workload, "toy");
    EXPECT_EQ((*records)[i].bucket_mb, result.records[i].bucket_mb);
    EXPECT_NEAR((*records)[i].forward_s, kForward, 1e-9);
    EXPECT_NEAR((*records)[i].step_s, result.records[i].step_s, 1e-6 * result.records[i].step_s);
  }
}

}  // namespace
}  // namespace psring::bench
