// //bench:compare, the main job: with no arguments, a scaled-down sweep that finishes in minutes on a 2-core
// machine, then a verdict per node count: which exchange is faster and by how much.
//
//   1. gradient exchange of S = 4 MiB (the model's size class where bandwidth dominates), N = 1, 2, 4, 8,
//      ring / ps-1 / ps-colocated / ps-dedicated (K = 2), 5 measured steps after 1 warm-up;
//   2. training the default MLP on Fashion-MNIST (real gradients, ~1 MiB) for 20 steps, same N and exchanges;
//   3. replaying a real model profile (ResNet-50) with its per-layer gradients and compute, same N and
//      exchanges, without and with overlap (flat and DDP's 25 MB buckets), its bytes scaled down by one
//      factor (kReplayBytesScale) so the emulated 100 Mbit/s links stand for a faster real network
//      (bench/PERFORMANCE.md 7.6); part 5 projects it;
//   4. how far to trust the model: the frozen cost model (--model; default the calibration of psring's
//      development machine committed under bench/results/; the one model every part's model figures come
//      from) predicts a few conditions it never saw (another
//      link rate and latency; gradient N = 8 and ResNet-50 flat and bucketed at N = 4), each printed before
//      it runs; then predicted vs measured, the error against issue 21's targets and winner accuracy;
//   5. the same model's projection of ResNet-50 (25 MB buckets, N = 8) onto --project_link with each
//      exchange's CPU ceiling (the calibration host's, or --cpu_model's) and binding bound, and its crossover
//      maps (SVG);
//   6. stragglers: one slow rank (rank 1 at twice its compute, log-normal noise 0.3 on every rank), N = 4,
//      ring and ps-1 on loopback, the straggler model's prediction printed before the runs, then its error
//      and verdict (about 40 s; bench/cmd/straggler_validation.h).
//
// Outputs go to <out_dir>/gradient, <out_dir>/train and <out_dir>/replay (CSV, JSON, SVG; replay also the
// merged timelines and the Gantt chart), <out_dir>/held_out (validation.txt, validation.svg) and
// <out_dir>/maps (the crossover maps). Full sweeps: //bench:scaling, //bench:calibrate, //bench:validate.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/model/cpu_model.h"
#include "bench/model/data_path.h"
#include "bench/model/model_file.h"
#include "bench/report/crossover_report.h"
#include "bench/cmd/pipeline.h"
#include "bench/harness/sweep.h"
#include "bench/cmd/scaling_flags.h"
#include "bench/cmd/straggler_validation.h"
#include "bench/cmd/validation.h"
#include "common/atomic_file.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"

ABSL_FLAG(bool, gradient, true, "Compare the exchanges on a 4 MiB gradient exchange (part 1).");
ABSL_FLAG(bool, train, true, "Also compare the exchanges while training the MLP (part 2).");
ABSL_FLAG(bool, replay, true,
          "Also compare them replaying the ResNet-50 profile without and with overlap (part 3).");
ABSL_FLAG(bool, held_out, true,
          "Part 4: run a few conditions the model never saw (150 Mbit/s, 2 ms) and show its error and winner "
          "accuracy (about 2 minutes).");
ABSL_FLAG(bool, stragglers, true,
          "Part 6: one straggler (rank 1 at 2x compute, noise 0.3), N = 4, ring and ps-1 on loopback: the straggler "
          "model's prediction against the runs, and its verdict (about 40 s).");


namespace psring::bench {
namespace {

// Part 1; part 2 is the same with mode train and 20 steps.
ScalingOptions GradientPart() {
  ScalingOptions gradient;
  gradient.nodes = {1, 2, 4, 8};
  gradient.model_bytes = {4u << 20};
  gradient.steps = 5;
  gradient.warmup_steps = 1;
  return gradient;
}

// Part 3: ResNet-50 replayed with every exchange, flat and with DDP's 25 MB buckets. Its gradient bytes are
// divided by kReplayBytesScale (the harness divides the bucket caps alike, so the buckets stay DDP's), its
// compute kept:
// on 100 Mbit/s links that is the real model on links kReplayBytesScale times faster (6.4 Gbit/s), and
// compute (200 ms) and the exchange are of the same order, where overlap matters (bench/PERFORMANCE.md 7.6).
constexpr double kReplayBytesScale = 64;

// The cluster parts 3 and 5 project onto: --project_link/--project_latency, else 25 Gbit/s with 5 us.
ProjectionTarget CompareProjection(const ScalingOptions& base) {
  if (base.projection.link_bytes_per_second > 0) return base.projection;
  return {25e9 / 8, 5e-6, base.projection.port_buffer_bytes};
}

ScalingOptions ReplayPart(const ScalingOptions& base, const std::string& out_dir) {
  ScalingOptions replay = base;
  replay.workloads = {"resnet50"};
  replay.bytes_scale = kReplayBytesScale;
  replay.bucket_mbs = {0, 25};
  replay.steps = 3;
  replay.warmup_steps = 1;
  replay.timeline_dir = out_dir + "/timelines";
  replay.projection = ProjectionTarget{};  // part 5 projects
  return replay;
}

// Part 4's held-out conditions: a link rate and a latency calibration never ran (SelectHeldOut drops any it
// covers), the 4 MiB gradient exchange at N = 8, and ResNet-50 (bytes / 64) flat and with 25 MB buckets at
// N = 4: three conditions, twelve runs, 8 measured steps each (119 s; the whole job 11 min on the 2-core
// box). One run each: the tie band is its 5 % floor.
ValidationPlan HeldOutPart() {
  ValidationPlan plan;
  HeldOutSweep gradient;
  gradient.link = "150mbit";
  gradient.latency = "2ms";
  gradient.nodes = {8};
  gradient.sizes = {4u << 20};
  plan.sweeps.push_back(gradient);
  HeldOutSweep replay;
  replay.link = "150mbit";
  replay.latency = "2ms";
  replay.nodes = {4};
  replay.workloads = {"resnet50"};
  replay.bytes_scale = kReplayBytesScale;
  replay.bucket_mbs = {0, 25};
  plan.sweeps.push_back(replay);
  plan.noise_runs = 1;
  return plan;
}

// Parts 4 and 5 (see the top of the file).
absl::Status ModelParts(const ScalingOptions& base, const std::string& out_dir) {
  const std::string& path = base.model_path;
  ASSIGN_OR_RETURN(const proto::CostModelFile model, model::ReadModelFile(path));
  const std::string which = absl::StrFormat(
      "the frozen model of %s, %s (%s)", model.host(), model.date(),
      path.find(kCommittedModelRunfile + std::string("psring/").size()) != std::string::npos
          ? "committed with psring, calibrated on its development machine: run //bench:calibrate for yours"
          : path);
  absl::Status status = absl::OkStatus();
  if (absl::GetFlag(FLAGS_held_out)) {
    std::cout << "#\n# PART 4: how far to trust the model: " << which
              << ", on conditions it never saw (each predicted before it runs)\n";
    std::cout << "# " << model::CompareDataPath(model).Describe() << "\n# "
              << model::DescribeIncastTerm(model) << "\n";
    ASSIGN_OR_RETURN(const HeldOutSelection held_out, SelectHeldOut(HeldOutPart(), model));
    for (const std::string& r : held_out.rejected) std::cout << "# left out (calibration covers it): " << r << "\n";
    ScalingOptions o = base;
    o.timeline_dir.clear();
    absl::StatusOr<Validation> v = RunValidation(held_out.plan, model, o, &std::cout, &std::cerr);
    if (!v.ok()) {
      status = v.status();
      std::cout << "# held-out part FAILED: " << v.status().message() << "\n";
    } else {
      const std::string dir = out_dir + "/held_out";
      RETURN_IF_ERROR(MakeDirectories(dir));
      const std::string report = FormatValidationReport(*v);
      std::cout << report << FormatHeldOutChecks(v->summary);
      RETURN_IF_ERROR(WriteValidationFiles(
          dir, report, v->rows,
          absl::StrFormat("model of %s, %s; held-out part of //bench:compare", model.host(), model.date()),
          &std::cout));
    }
  }
  std::cout << "#\n# PART 5: what " << which << " projects for ResNet-50 (real size, 25 MB buckets)\n";
  model::CrossoverReportOptions maps;
  maps.workload = "resnet50";
  maps.bucket_mb = 25;
  maps.target.nodes = 8;
  maps.target.servers = base.ps_servers;
  const ProjectionTarget projection = CompareProjection(base);
  maps.target.link_bytes_per_second = projection.link_bytes_per_second;
  maps.target.latency_s = projection.latency_s;
  maps.target.port_buffer_bytes = projection.port_buffer_bytes;
  maps.map_latency_s = projection.latency_s;
  maps.out_dir = out_dir + "/maps";
  RETURN_IF_ERROR(MakeDirectories(maps.out_dir));
  ASSIGN_OR_RETURN(const proto::CostModelFile projected,
                   model::ModelForTarget(model, base.cpu_model_path, base.window_round_us, &maps.cpu_source));
  ASSIGN_OR_RETURN(const model::CrossoverReport crossover, model::WriteCrossoverReport(projected, maps, {}));
  std::cout << crossover.text;
  return status;
}

absl::Status Main(const char* argv0) {
  ASSIGN_OR_RETURN(const std::string out_dir, OutDirFromFlags("compare"));
  ScalingOptions gradient = GradientPart();
  RETURN_IF_ERROR(ApplyHarnessFlags(argv0, &gradient));
  absl::Status status = absl::OkStatus();
  if (absl::GetFlag(FLAGS_gradient)) {
    std::cout << "# PART 1: gradient exchange, S = 4 MiB\n";
    status = RunAndReport(gradient, absl::StrCat(out_dir, "/gradient"));
  }

  if (absl::GetFlag(FLAGS_train)) {
    ScalingOptions train = gradient;
    train.mode = "train";
    train.steps = 20;
    std::cout << "#\n# PART 2: training the MLP (Fashion-MNIST, batch 128 per worker)\n";
    absl::Status second = RunAndReport(train, absl::StrCat(out_dir, "/train"));
    if (status.ok()) status = second;
  }
  if (absl::GetFlag(FLAGS_replay)) {
    const std::string replay_dir = absl::StrCat(out_dir, "/replay");
    std::cout << "#\n# PART 3: replaying ResNet-50 (its layers' gradients and compute, scaled), flat and with "
                 "25 MB buckets overlapped with backward\n";
    absl::Status third = RunAndReport(ReplayPart(gradient, replay_dir), replay_dir);
    if (status.ok()) status = third;
  }
  if (!gradient.model_path.empty()) {
    absl::Status fourth = ModelParts(gradient, out_dir);
    if (status.ok()) status = fourth;
  }
  if (absl::GetFlag(FLAGS_stragglers) && !gradient.model_path.empty()) {
    std::cout << "#\n# PART 6: stragglers: rank 1 at 2x its compute (noise 0.3 on every rank), N = 4, ring and "
                 "ps-1 on loopback; the straggler model predicts each run before it goes\n";
    std::cout.flush();
    absl::StatusOr<proto::CostModelFile> model = model::ReadModelFile(gradient.model_path);
    absl::StatusOr<StragglerPartResult> part =
        model.ok() ? RunStragglerPart(*model, gradient, &std::cerr) : absl::StatusOr<StragglerPartResult>(model.status());
    if (!part.ok()) {
      std::cout << "# straggler part FAILED: " << part.status().message() << "\n";
      if (status.ok()) status = part.status();
    } else {
      std::cout << part->report;
    }
  }
  return status;
}

}  // namespace
}  // namespace psring::bench

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "The main comparison of psring: PS vs ring allreduce at N = 1, 2, 4, 8 on an emulated 100 Mbit/s cluster "
      "(gradient exchange of 4 MiB, training the MLP, then replaying ResNet-50 without and with overlap), each "
      "part ending with a verdict table. No arguments needed.",
      {"bench/"});
  psring::ParseFlags(argc, argv);
  absl::Status status = psring::bench::Main(argv[0]);
  if (!status.ok()) std::cerr << "compare: " << status.message() << "\n";
  return status.ok() ? 0 : 1;
}
