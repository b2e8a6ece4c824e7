// //bench:calibrate: the cost model's own sweep (gradient mode, sizes x N x link rates x latencies x the four
// exchanges, plus loopback runs that measure each exchange's CPU ceiling), fitted once and frozen into a
// model file (bench/PERFORMANCE.md 9.3). Needs root (network namespaces) for the link conditions.
//
//   ./bazelw run //bench:calibrate -- --quick                       # ~10 min on 2 cores
//   ./bazelw run //bench:calibrate                                  # the default plan, < 25 min
//   ./bazelw run //bench:calibrate -- --quick --nodes=2 --sizes=1M --links=100mbit --latencies=5ms
//   ./bazelw run //bench:calibrate -- --cpu_only                    # this host's CPU ceilings, < 2 min
//   ./bazelw run //bench:calibrate -- --quick --runs_out=/tmp/runs.json   # also save the fitted runs
//   ./bazelw run //bench:calibrate -- --refit=/tmp/runs.json --model_out=/tmp/m.json   # refit, no runs
//
// Writes <out_dir>/model.json (or --model_out) and prints the parameters with their errors and coverage;
// --cpu_only writes <out_dir>/cpu_model.json (bench/model/cpu_model.proto) and prints the ceilings.
#include <unistd.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/cmd/calibration.h"
#include "bench/cmd/scaling_flags.h"
#include "bench/core/cluster.h"
#include "bench/core/exchange.h"
#include "bench/model/calibration_runs.h"
#include "bench/model/cpu_model.h"
#include "bench/model/data_path.h"
#include "bench/model/exchange_topology.h"
#include "bench/model/link_share.h"
#include "bench/model/model_file.h"
#include "bench/report/table.h"
#include "common/atomic_file.h"
#include "common/binary_main.h"
#include "common/flags_usage.h"
#include "common/host_cpu.h"
#include "common/status_macros.h"

// The single-condition link flags of cluster_flags.cc: calibration sweeps its own (--links, --latencies).
ABSL_DECLARE_FLAG(std::string, link);
ABSL_DECLARE_FLAG(std::string, latency);
ABSL_DECLARE_FLAG(bool, loopback);

ABSL_FLAG(bool, quick, false,
          "The quick plan (~10 min on 2 cores): S = 1,4 MiB x N = 2,4,8 x 100,200 Mbit/s x 1,5 ms, loopback "
          "S = 16,64 MiB x N = 2,4. Default plan (< 25 min): adds S = 16 MiB at N = 2,4 on every link and "
          "loopback S = 16,64,100 MiB x N = 2,4,8.");
ABSL_FLAG(std::vector<std::string>, links, {},
          "Comma-separated link rates (tc units, e.g. 100mbit,200mbit). Non-empty: replaces the plan's link "
          "conditions by links x --latencies x --sizes x --nodes (the others from the plan where empty).");
ABSL_FLAG(std::vector<std::string>, latencies, {},
          "Comma-separated one-way latencies (e.g. 1ms,5ms; 0 for none). See --links.");
ABSL_FLAG(std::vector<std::string>, sizes, {}, "Comma-separated gradient sizes S (e.g. 1M,4M). See --links.");
ABSL_FLAG(std::vector<std::string>, nodes, {}, "Comma-separated worker counts N (e.g. 2,4,8). See --links.");
ABSL_FLAG(bool, cpu_runs, true,
          "Also run the loopback condition (every host on 127.0.0.1, unlimited links) that measures each "
          "exchange's CPU ceiling. Without it the file has no CPU ceilings (projections are then unbounded).");
ABSL_FLAG(std::vector<std::string>, loopback_sizes, {},
          "Sizes of the loopback condition (real sizes, e.g. 16M,64M,100M). Empty: the plan's.");
ABSL_FLAG(std::vector<std::string>, loopback_nodes, {}, "Node counts of the loopback condition. Empty: the plan's.");
ABSL_FLAG(
    std::vector<std::string>, exchanges, psring::bench::ExchangeNames(psring::bench::AllExchanges()),
    "Exchanges to calibrate. The model file needs all four; fewer make a supplementary sweep: its usable "
    "runs are written to --runs_out and not fitted, to be refitted merged with a full calibration's "
    "(--refit=FULL,THIS; exit 0, or an error where no run is usable).");
ABSL_FLAG(int, steps, psring::bench::CalibrationPlan().steps, "Measured steps per run.");
ABSL_FLAG(int, warmup_steps, psring::bench::CalibrationPlan().warmup_steps, "Unmeasured steps before them.");
ABSL_FLAG(int, ps_servers, psring::bench::CalibrationPlan().ps_servers, "K, the server hosts of ps-dedicated.");
ABSL_FLAG(bool, plan_only, false, "Print the plan and its estimated run time, run nothing.");
ABSL_FLAG(
    absl::Duration, time_limit, absl::InfiniteDuration(),
    "Start no condition that would end past this time from the start (e.g. 9m: a machine lent for a fixed "
    "time), by the plan's estimate of it times the pace of the conditions run so far (1.25 before any); "
    "the report lists those not run, the runs file keeps what ran (--refit merges it with others), and "
    "the fit is over it. inf: no limit.");
ABSL_FLAG(std::string, model_out, "",
          "Where the model file goes. Default: <out_dir>/model.json (--cpu_only: <out_dir>/cpu_model.json).");
ABSL_FLAG(std::string, host, "",
          "The calibration host's name in the file (its CPU ceilings hold for it). Default: the hostname.");
ABSL_FLAG(std::string, note, "", "Free text stored in the file (default: the plan and the runs' counts).");
ABSL_FLAG(std::string, runs_out, "",
          "Also write the runs the fit used (their conditions and measured exchange times, and the data path "
          "that measured them; JSON, bench/model/cost_model_file.proto CalibrationRunsFile) to this file, so "
          "--refit can fit them again. Default: <out_dir>/runs.json beside the model.");
ABSL_FLAG(
    std::string, refit, "",
    "Run nothing: fit the runs of this file (written by --runs_out) again, print the parameters and write "
    "the model (--model_out, default <out_dir>/model.json) with the runs' host, date and data path. For "
    "a change of the fit or of the model's terms; every other plan flag is ignored. Several files, "
    "comma-separated (a supplementary sweep beside a calibration), are fitted as one; they must come from "
    "one host and one data path. With --runs_out the runs fitted are written there as one file.");
ABSL_FLAG(
    bool, residuals, false,
    "After the report, print every fitted run against the fitted model (measured, predicted, signed error, "
    "bound) and each exchange's signed median error: where the model leans one way. Works with --refit.");
ABSL_FLAG(bool, cpu_only, false,
          "Measure only this host's CPU ceilings (< 2 min on 2 cores, no root): loopback runs at N = 1 .. min(cores, "
          "4) per exchange with no more processes than cores (the smallest N that moves bytes always), each run's "
          "ceiling from the model's CPU term inverted (the --model file's software term taken off), their median "
          "and spread. Writes <out_dir>/cpu_model.json (or --model_out) for --cpu_model=FILE of crossover_maps, "
          "compare and scaling. Sizes: --loopback_sizes (default 16M,64M); --steps, --warmup_steps, --exchanges, "
          "--ps_servers apply.");

namespace psring::bench {
namespace {

absl::StatusOr<std::vector<int>> ParseNodes(const std::vector<std::string>& items, const char* flag) {
  std::vector<int> out;
  for (const std::string& item : items) {
    int v = 0;
    if (!absl::SimpleAtoi(item, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", item, "' is not a node count >= 1"));
    }
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<std::vector<size_t>> ParseSizes(const std::vector<std::string>& items, const char* flag) {
  std::vector<size_t> out;
  for (const std::string& item : items) {
    const size_t bytes = ParseSize(item);
    if (bytes < 4) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": bad size '", item, "' (use e.g. 4M)"));
    out.push_back(bytes);
  }
  return out;
}

// The preset with the flags' overrides.
absl::StatusOr<CalibrationPlan> PlanFromFlags() {
  CalibrationPlan plan = absl::GetFlag(FLAGS_quick) ? QuickCalibrationPlan() : DefaultCalibrationPlan();
  std::vector<CalibrationCondition> links, loopback;
  for (const CalibrationCondition& c : plan.conditions) (c.loopback ? loopback : links).push_back(c);

  std::vector<std::string> rates = absl::GetFlag(FLAGS_links);
  std::vector<std::string> latencies = absl::GetFlag(FLAGS_latencies);
  ASSIGN_OR_RETURN(std::vector<size_t> sizes, ParseSizes(absl::GetFlag(FLAGS_sizes), "sizes"));
  ASSIGN_OR_RETURN(std::vector<int> nodes, ParseNodes(absl::GetFlag(FLAGS_nodes), "nodes"));
  if (!rates.empty() || !latencies.empty() || !sizes.empty() || !nodes.empty()) {
    // A grid of the flags; what a flag leaves empty comes from the plan's first link condition.
    const CalibrationCondition& first = links.front();
    if (rates.empty()) rates = {"100mbit", "200mbit"};
    if (latencies.empty()) latencies = {"1ms", "5ms"};
    if (sizes.empty()) sizes = first.sizes;
    if (nodes.empty()) nodes = first.nodes;
    links.clear();
    for (const std::string& rate : rates) {
      for (const std::string& latency : latencies) links.push_back({rate, latency, false, sizes, nodes});
    }
  }
  ASSIGN_OR_RETURN(std::vector<size_t> loop_sizes, ParseSizes(absl::GetFlag(FLAGS_loopback_sizes), "loopback_sizes"));
  ASSIGN_OR_RETURN(std::vector<int> loop_nodes, ParseNodes(absl::GetFlag(FLAGS_loopback_nodes), "loopback_nodes"));
  for (CalibrationCondition& c : loopback) {
    if (!loop_sizes.empty()) c.sizes = loop_sizes;
    if (!loop_nodes.empty()) c.nodes = loop_nodes;
  }
  plan.conditions = links;
  if (absl::GetFlag(FLAGS_cpu_runs)) plan.conditions.insert(plan.conditions.end(), loopback.begin(), loopback.end());
  plan.exchanges.clear();
  for (const std::string& name : absl::GetFlag(FLAGS_exchanges)) {
    ASSIGN_OR_RETURN(Exchange e, ParseExchange(name));
    plan.exchanges.push_back(e);
  }
  plan.steps = absl::GetFlag(FLAGS_steps);
  plan.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  plan.ps_servers = absl::GetFlag(FLAGS_ps_servers);
  RETURN_IF_ERROR(ValidatePlan(plan));
  return plan;
}

std::string HostName() {
  const std::string flag = absl::GetFlag(FLAGS_host);
  if (!flag.empty()) return flag;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown-host";
  return name;
}

// The loopback runs of --cpu_only larger N would need more cores than a small host has; 4 bound the time.
constexpr int kCpuMaxNodes = 4;
// Above this share of the box busy before the runs start, --cpu_only warns that others' load lowers the ceilings.
constexpr double kQuietBusy = 0.1;

std::string Now() { return absl::FormatTime("%Y-%m-%dT%H:%M:%S%Ez", absl::Now(), absl::LocalTimeZone()); }

absl::Status RunCpuOnly(const ScalingOptions& base, const std::string& out_dir) {
  ASSIGN_OR_RETURN(std::vector<size_t> sizes, ParseSizes(absl::GetFlag(FLAGS_loopback_sizes), "loopback_sizes"));
  if (sizes.empty()) sizes = {16u << 20, 64u << 20};
  std::vector<model::Topology> topologies;
  for (Exchange e : base.exchanges) topologies.push_back(TopologyOf(e));
  const int cores = static_cast<int>(BoxCores());
  const model::CpuPlan plan = model::PlanCpuRuns(topologies, cores, kCpuMaxNodes, absl::GetFlag(FLAGS_ps_servers));
  const int steps = absl::GetFlag(FLAGS_steps), warmup = absl::GetFlag(FLAGS_warmup_steps);
  std::cerr << absl::StrFormat("# cpu-only: this host's CPU, %d cores: %d loopback runs x %d sizes, %d+%d steps\n",
                               cores, plan.runs.size(), sizes.size(), warmup, steps);
  for (size_t t = 0; t < plan.topologies.size(); ++t) {
    for (const std::string& note : plan.notes[t]) {
      std::cerr << "# cpu-only: " << model::TopologyName(plan.topologies[t]) << " " << note << "\n";
    }
  }
  if (absl::GetFlag(FLAGS_plan_only)) return absl::OkStatus();
  // Other processes' load lowers every ceiling: look before measuring, and keep what was seen in the file.
  const HostCpuReading before = ReadHostCpu();
  absl::SleepFor(absl::Seconds(2));
  const double busy = HostCpuBetween(before, ReadHostCpu()).busy;
  const std::string load = busy >= 0 ? absl::StrFormat("box %.0f%% busy before the runs", 100 * busy) : "";
  if (busy > kQuietBusy) {
    std::cerr << "# cpu-only: WARNING: " << load
              << " (other processes): the ceilings measured now are too low; measure on a quiet host\n";
  }
  std::optional<proto::CostModelFile> model;
  if (!base.model_path.empty()) {
    ASSIGN_OR_RETURN(model, model::ReadModelFile(base.model_path));
  }
  model::CpuHostInfo info{HostName(), Now(), cores, absl::GetFlag(FLAGS_note)};
  if (info.note.empty()) {
    info.note = absl::StrFormat(
        "//bench:calibrate --cpu_only: loopback, S = %s bytes, %d+%d steps; software term from %s; %s",
        absl::StrJoin(sizes, ","), warmup, steps,
        model.has_value() ? absl::StrCat("the model of ", model->host(), ", ", model->date()) : "none (--model=none)",
        load);
  }
  ASSIGN_OR_RETURN(const proto::CpuModelFile cpu,
                   RunCpuCalibration(plan, sizes, steps, warmup, base, model.has_value() ? &*model : nullptr, info,
                                     &std::cerr));
  std::string out = absl::GetFlag(FLAGS_model_out);
  if (out.empty()) {
    RETURN_IF_ERROR(MakeDirectories(out_dir));
    out = out_dir + "/cpu_model.json";
  }
  RETURN_IF_ERROR(model::WriteCpuModelFile(out, cpu));
  std::cout << model::FormatCpuModel(cpu) << "# cpu model file: " << out
            << "\n# project with this host's CPU: crossover_maps/compare/scaling --cpu_model=" << out << "\n";
  return absl::OkStatus();
}

// --model_out, or <out_dir>/model.json (the directory made).
absl::StatusOr<std::string> ModelOutFromFlags() {
  std::string model_out = absl::GetFlag(FLAGS_model_out);
  if (model_out.empty()) {
    ASSIGN_OR_RETURN(const std::string out_dir, OutDirFromFlags("calibrate"));
    RETURN_IF_ERROR(MakeDirectories(out_dir));
    model_out = out_dir + "/model.json";
  }
  return model_out;
}

// What a fresh fit leaves out (bench/PERFORMANCE.md 9.24): the incast term is fitted on held-out reports.
constexpr char kNoIncastTerm[] =
    "# without the incast term (a synchronous PS's loss at a port its window burst overflows): fit it on "
    "validation reports of shallow-queue runs with //bench:fit_incast --model=<this file> --reports=... "
    "--out=...\n";

// --refit: the saved runs fitted again, nothing run.
absl::Status Refit(const std::string& paths) {
  const std::vector<std::string> origins = absl::StrSplit(paths, ',', absl::SkipWhitespace());
  std::vector<model::SavedRuns> parts;
  for (const std::string& p : origins) {
    ASSIGN_OR_RETURN(model::SavedRuns part, model::ReadCalibrationRuns(p));
    parts.push_back(std::move(part));
  }
  ASSIGN_OR_RETURN(const model::SavedRuns saved, model::MergeSavedRuns(parts, origins));
  const std::string path = absl::StrJoin(origins, ",");
  Calibration calibration;
  ASSIGN_OR_RETURN(calibration.file, model::RefitModel(saved, path));
  calibration.runs = saved.runs;
  calibration.total_runs = static_cast<int>(saved.runs.size());
  std::cout << "# refit of " << saved.runs.size() << " saved runs measured on " << saved.file.host() << ", "
            << saved.file.date() << " (data path " << saved.file.data_path_fingerprint() << ")\n";
  std::cout << FormatCalibration(calibration);
  if (absl::GetFlag(FLAGS_residuals)) std::cout << FormatResiduals(calibration);
  ASSIGN_OR_RETURN(const std::string model_out, ModelOutFromFlags());
  RETURN_IF_ERROR(model::WriteModelFile(model_out, calibration.file));
  std::cout << "# model file: " << model_out << "\n" << kNoIncastTerm;
  // With --runs_out the runs fitted (several files merged) are written as one file, their data path kept.
  if (const std::string runs_out = absl::GetFlag(FLAGS_runs_out); !runs_out.empty()) {
    RETURN_IF_ERROR(model::WriteSavedRuns(runs_out, saved));
    std::cout << "# runs file: " << runs_out << " (" << saved.runs.size() << " runs)\n";
  }
  return absl::OkStatus();
}

absl::Status Run(const char* argv0) {
  if (absl::GetFlag(FLAGS_link) != ClusterOptions().link || absl::GetFlag(FLAGS_latency) != ClusterOptions().latency ||
      absl::GetFlag(FLAGS_loopback)) {
    return absl::InvalidArgumentError(
        "calibrate sweeps its own link conditions: use --links=... and --latencies=... (and --cpu_runs for the "
        "loopback condition) instead of --link/--latency/--loopback");
  }
  if (!absl::GetFlag(FLAGS_refit).empty()) return Refit(absl::GetFlag(FLAGS_refit));
  ASSIGN_OR_RETURN(const CalibrationPlan plan, PlanFromFlags());
  ScalingOptions base;
  base.exchanges = plan.exchanges;
  RETURN_IF_ERROR(ApplyHarnessFlags(argv0, &base));
  if (absl::GetFlag(FLAGS_cpu_only)) {
    ASSIGN_OR_RETURN(const std::string out_dir, OutDirFromFlags("calibrate"));
    return RunCpuOnly(base, out_dir);
  }
  int runs = 0;
  for (const CalibrationCondition& c : plan.conditions) {
    runs += static_cast<int>(c.sizes.size() * c.nodes.size() * plan.exchanges.size());
    std::cerr << "# plan: " << c.Name() << "\n";
  }
  std::cerr << absl::StrFormat("# calibration: %d conditions, %d runs, %d+%d steps each; estimated %.0f min\n",
                               plan.conditions.size(), runs, plan.warmup_steps, plan.steps,
                               EstimateSeconds(plan) / 60);
  if (absl::GetFlag(FLAGS_plan_only)) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::string model_out, ModelOutFromFlags());
  model::FileInfo info;
  info.host = HostName();
  info.date = Now();
  info.note = absl::GetFlag(FLAGS_note);
  if (info.note.empty()) {
    info.note = absl::StrFormat("//bench:calibrate%s: %d conditions, %d runs, %d+%d steps, K = %d",
                                absl::GetFlag(FLAGS_quick) ? " --quick" : "", plan.conditions.size(), runs,
                                plan.warmup_steps, plan.steps, plan.ps_servers);
  }
  // Which runs the box bound is judged against the previous model's window and latency bounds (--model,
  // default the committed one): the model being fitted cannot judge its own runs.
  if (!base.model_path.empty()) {
    ASSIGN_OR_RETURN(const proto::CostModelFile previous, model::ReadModelFile(base.model_path));
    base.network_link_share = model::NetworkLinkShareOf(previous, plan.ps_servers);
  }
  // The runs are saved before the fit: a sweep whose fit fails (one exchange without a usable run) keeps its
  // measurements for a refit merged with other runs (--refit=a.json,b.json).
  std::string runs_out = absl::GetFlag(FLAGS_runs_out);
  if (runs_out.empty()) runs_out = model_out.substr(0, model_out.find_last_of('/') + 1) + "runs.json";
  const auto keep_runs = [&](const std::vector<model::MeasuredRun>& runs,
                             const model::FileInfo& fitted) -> absl::Status {
    RETURN_IF_ERROR(model::WriteCalibrationRuns(runs_out, runs, fitted));
    std::cout << "# runs file: " << runs_out;
    // A supplementary sweep's runs fit only merged with a full calibration's (said below).
    if (!IsSupplementary(plan))
      std::cout << " (fit them again: //bench:calibrate --refit=" << runs_out << ")";
    std::cout << std::endl;
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(const Calibration calibration,
                   RunCalibration(plan, base, info, &std::cerr, keep_runs, absl::GetFlag(FLAGS_time_limit)));
  if (!calibration.fitted) {
    std::cout << absl::StrFormat(
        "# supplementary sweep (--exchanges=%s, not every exchange): %d usable run(s) of %d (%d failed, %d "
        "EMULATOR-BOUND dropped) kept in %s; no model file written, as a model needs every exchange: fit "
        "them "
        "with a full calibration's runs, e.g. //bench:calibrate --refit=bench/results/committed_runs.json,%s "
        "--model_out=FILE\n",
        absl::StrJoin(ExchangeNames(plan.exchanges), ","), calibration.runs.size(), calibration.total_runs,
        calibration.failed, calibration.emulator_bound, runs_out, runs_out);
    return absl::OkStatus();
  }
  std::cout << FormatCalibration(calibration);
  if (absl::GetFlag(FLAGS_residuals)) std::cout << FormatResiduals(calibration);
  proto::CostModelFile file = calibration.file;
  model::RecordDataPath(file);  // which PS/ring code these parameters were fitted on
  RETURN_IF_ERROR(model::WriteModelFile(model_out, file));
  std::cout << "# model file: " << model_out << "\n" << kNoIncastTerm;
  return absl::OkStatus();
}

}  // namespace
}  // namespace psring::bench

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Calibrates psring's cost model on this machine: a gradient-mode sweep (sizes x N x link rates x "
      "latencies x ring, ps-1, ps-colocated, ps-dedicated, each link condition on a fresh emulated cluster) plus "
      "loopback runs for the CPU ceilings; drops failed and EMULATOR-BOUND runs, fits once and writes the frozen "
      "model file (JSON). Needs root for the namespaces. Progress on stderr, the parameters on stdout.\n"
      "  ./bazelw run //bench:calibrate -- --quick --model_out=/tmp/model.json",
      {"bench/"});
  return psring::RunMain(argc, argv, "calibrate",
                         [&](const std::vector<std::string>&) { return psring::bench::Run(argv[0]); });
}
