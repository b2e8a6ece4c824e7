// //bench:crossover_maps: a frozen model file and a workload in, the projection table and two crossover maps
// out (a model, never a measurement; bench/PERFORMANCE.md 9.5).
//
//   bazel run //bench:crossover_maps -- --model=/path/model.json --workload=resnet50 --out_dir=/tmp
//
// writes <out_dir>/crossover-<workload>-link-latency.svg (1-400 Gbit/s x 1 us-10 ms at --nodes) and
// crossover-<workload>-nodes-link.svg (N = 2..1024 x 1-400 Gbit/s at --map_latency_us), and prints the
// projection at --project_link_gbit and --project_latency_us. --cpu_model=FILE (//bench:calibrate --cpu_only)
// projects with that host's CPU ceilings instead of the calibration host's. --straggler_factor=F (and/or
// --straggler_noise=SIGMA, --backup_workers=B) adds the straggler axis (bench/model/straggler_model.h): the
// projection with one rank's compute x F, and a text map of the slow rank's factor x link rate at --nodes.
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/core/links.h"
#include "bench/model/cpu_model.h"
#include "bench/model/crossover.h"
#include "bench/model/model_file.h"
#include "bench/model/project.h"
#include "bench/model/straggler_model.h"
#include "bench/model/workload_step.h"
#include "bench/report/crossover_report.h"
#include "bench/report/crossover_svg.h"
#include "common/atomic_file.h"
#include "common/binary_main.h"
#include "common/flags_usage.h"
#include "common/runfiles.h"
#include "common/status_macros.h"
#include "trainer/workload.h"

ABSL_FLAG(std::string, model, "", "The frozen model file (JSON, bench/model/cost_model_file.proto). Required.");
ABSL_FLAG(std::string, workload, "resnet50", "A preset (resnet50, vgg16, bert_base, mlp) or a profile path.");
ABSL_FLAG(int, nodes, 8, "Workers N of the link x latency map and of the projection.");
ABSL_FLAG(int, servers, 2, "PS hosts K of ps-dedicated.");
ABSL_FLAG(double, bucket_mb, 25, "Bucket cap in MiB (DDP's default 25); 0 = flat, one exchange after backward.");
ABSL_FLAG(double, first_bucket_mb, 1, "The first bucket's cap in MiB (DDP's 1).");
ABSL_FLAG(double, cpu_speedup, 1, "The target host's CPU speed over the calibration host's (scales C).");
ABSL_FLAG(double, project_link_gbit, 25, "Link rate of the printed projection, Gbit/s per host and direction.");
ABSL_FLAG(double, project_latency_us, 5, "One-way latency of the printed projection, microseconds.");
ABSL_FLAG(double, map_latency_us, 5, "One-way latency of the N x link rate map, microseconds.");
ABSL_FLAG(
    double, port_buffer_kb, 0,
    "What one switch port of the target can queue, kB (e.g. 2000 for a 2 MB share of a shallow-buffered "
    "switch). With it the projection and the maps mark a PS whose window burst into a server's port exceeds "
    "it INCAST, and add the incast term's cost where the round trip through the port is >= 10 ms (below it "
    "the model is likely too fast there; bench/PERFORMANCE.md 9.23, 9.24). 0: not known, ports assumed "
    "lossless, nothing marked.");
ABSL_FLAG(std::string, out_dir, ".",
          "Where the SVG maps go (under `bazel run`, relative to where it was typed).");
ABSL_FLAG(std::string, cpu_model, "",
          "A host's measured CPU ceilings (JSON from //bench:calibrate --cpu_only): the projection and the maps use "
          "them instead of the model file's (the calibration host's); --cpu_speedup then scales them.");
ABSL_FLAG(double, window_round_us, -1, psring::bench::model::kWindowRoundFlagHelp);

ABSL_FLAG(
    double, straggler_factor, 1,
    "One rank's compute takes this factor (>= 1) times as long (trainer's --straggler): > 1 adds the "
    "straggler "
    "projection at the --project_* target and a map of the slow rank's factor (1..max(8, F)) x link rate at "
    "--nodes and --map_latency_us.");
ABSL_FLAG(
    double, straggler_noise, 0,
    "Log-normal sigma of every rank's per-step stretch (trainer's --step_noise) in the straggler part; > 0 "
    "alone also adds it.");
ABSL_FLAG(
    int, backup_workers, 0,
    "Backup workers B of the sync PS in the straggler part (0: none); the PS exchanges are then compared by "
    "their quorum's step.");

namespace psring::bench::model {
namespace {

// The straggler part: the projection with the injected straggler, then the factor x link rate map.
absl::Status PrintStragglerPart(const proto::CostModelFile& model, const CrossoverReportOptions& o) {
  const double factor = absl::GetFlag(FLAGS_straggler_factor);
  const double sigma = absl::GetFlag(FLAGS_straggler_noise);
  const int backup = absl::GetFlag(FLAGS_backup_workers);
  if (!(factor >= 1) || !(sigma >= 0) || backup < 0 || backup >= o.target.nodes) {
    return absl::InvalidArgumentError(absl::StrCat("--straggler_factor=", factor,
                                                   " --straggler_noise=", sigma, " --backup_workers=", backup,
                                                   ": need factor >= 1, sigma >= 0, 0 <= B < --nodes"));
  }
  ASSIGN_OR_RETURN(const proto::Workload workload, trainer::LoadWorkload(o.workload));
  ASSIGN_OR_RETURN(const StepShape shape, WorkloadStep(workload, o.bucket_mb, o.first_bucket_mb));
  std::cout << absl::StrFormat(
      "# straggler projection (a model, not measured): N = %d, %s, %s; rank 0's compute x %g, every rank's x "
      "max(1, exp(%g Z))%s\n",
      o.target.nodes, FormatLinkRate(o.target.link_bytes_per_second), FormatLatency(o.target.latency_s),
      factor, sigma,
      backup > 0 ? absl::StrFormat("; PS with %d backup worker(s): their quorum's step", backup) : "");
  std::cout << absl::StrFormat("# %-14s %14s %14s %10s\n", "exchange", "no_straggler_s", "straggler_s",
                               "slower");
  for (Topology t : AllTopologies()) {
    ASSIGN_OR_RETURN(const ExchangeParams params, ParamsOf(model, t));
    StragglerConditions s;
    s.injected.slow_rank = factor > 1 ? 0 : -1;
    s.injected.factor = factor;
    s.injected.noise_sigma = sigma;
    const bool quorum = backup > 0 && t != Topology::kRing;
    if (quorum) {
      s.rule = StepRule::kBackup;
      s.backup_workers = backup;
    }
    ASSIGN_OR_RETURN(const StragglerStep step, PredictStragglerStep(t, params, o.target, shape, s));
    const double with = quorum ? step.cluster_step_s : step.step_s;
    std::cout << absl::StrFormat("# %-14s %14.4f %14.4f %9.2fx\n", TopologyName(t), step.unperturbed_step_s,
                                 with, with / step.unperturbed_step_s);
  }
  std::vector<double> factors = {1, 1.5, 2, 3, 4, 6, 8};
  if (factor > 8) factors.push_back(factor);
  ASSIGN_OR_RETURN(const std::vector<double> links, LogSpaced(125e6, 50e9, 8));
  Conditions base = o.target;
  base.latency_s = o.map_latency_s;
  ASSIGN_OR_RETURN(const StragglerCrossoverMap map,
                   StragglerLinkMap(model, shape, base, factors, links, sigma, backup));
  std::cout << FormatStragglerMap(map);
  if (o.out_dir.empty()) return absl::OkStatus();
  const std::string svg_path = absl::StrCat(o.out_dir, "/crossover-", workload.name(), "-straggler-link.svg");
  const std::string title = absl::StrFormat(
      "fastest exchange with one straggler, N = %d, latency %s%s", base.nodes, FormatLatency(base.latency_s),
      backup > 0 ? absl::StrFormat(", PS with %d backup worker(s)", backup) : "");
  const std::string subtitle = absl::StrFormat(
      "%s; every rank's compute x max(1, exp(%g Z)); model calibrated on %s (%s); CPU ceilings %s x %g",
      workload.name(), sigma, model.host(), model.date(),
      o.cpu_source.empty() ? "of the calibration host" : "from " + o.cpu_source, o.target.cpu_speedup);
  RETURN_IF_ERROR(WriteFileAtomically(svg_path, RenderCrossoverSvg(AsCrossoverMap(map), title, subtitle, {})));
  std::cout << "# straggler crossover map (model, not measured): " << svg_path << "\n";
  return absl::OkStatus();
}

absl::Status Run() {
  const std::string model_path = FromWhereTyped(absl::GetFlag(FLAGS_model));
  if (model_path.empty()) {
    return absl::InvalidArgumentError("--model is required: the path of a model file from //bench:calibrate");
  }
  ASSIGN_OR_RETURN(proto::CostModelFile model, ReadModelFile(model_path));
  CrossoverReportOptions o;
  ASSIGN_OR_RETURN(model, ModelForTarget(model, FromWhereTyped(absl::GetFlag(FLAGS_cpu_model)),
                                         absl::GetFlag(FLAGS_window_round_us), &o.cpu_source));
  o.workload = absl::GetFlag(FLAGS_workload);
  o.bucket_mb = absl::GetFlag(FLAGS_bucket_mb);
  o.first_bucket_mb = absl::GetFlag(FLAGS_first_bucket_mb);
  o.target.nodes = absl::GetFlag(FLAGS_nodes);
  o.target.servers = absl::GetFlag(FLAGS_servers);
  o.target.cpu_speedup = absl::GetFlag(FLAGS_cpu_speedup);
  o.target.link_bytes_per_second = absl::GetFlag(FLAGS_project_link_gbit) * 1e9 / 8;
  o.target.latency_s = absl::GetFlag(FLAGS_project_latency_us) * 1e-6;
  o.map_latency_s = absl::GetFlag(FLAGS_map_latency_us) * 1e-6;
  ASSIGN_OR_RETURN(o.target.port_buffer_bytes,
                   PortBufferBytes(absl::GetFlag(FLAGS_port_buffer_kb), "--port_buffer_kb"));
  o.out_dir = FromWhereTyped(absl::GetFlag(FLAGS_out_dir));
  ASSIGN_OR_RETURN(const CrossoverReport report, WriteCrossoverReport(model, o, {}));
  std::cout << report.text;
  if (absl::GetFlag(FLAGS_straggler_factor) != 1 || absl::GetFlag(FLAGS_straggler_noise) != 0 ||
      absl::GetFlag(FLAGS_backup_workers) != 0) {
    RETURN_IF_ERROR(PrintStragglerPart(model, o));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace psring::bench::model

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Projects a frozen psring cost model onto a target cluster for one workload and draws the crossover maps "
      "(which exchange the model predicts fastest over link rate x latency and N x link rate; with "
      "--straggler_factor/--straggler_noise/--backup_workers also one straggler's factor x link rate).\n"
      "  bazel run //bench:crossover_maps -- --model=model.json --workload=resnet50 --nodes=8 --out_dir=/tmp",
      {"bench/"});
  return psring::RunMain(argc, argv, "crossover_maps",
                         [](const std::vector<std::string>&) { return psring::bench::model::Run(); });
}
