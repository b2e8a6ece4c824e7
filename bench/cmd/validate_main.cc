// //bench:validate: the frozen model (from //bench:calibrate) against held-out runs: every condition is
// predicted and printed before it runs, then measured; per run predicted vs measured step and exposed
// exchange time, the median and p90 |error|, the tie band and winner accuracy, and a scatter plot
// (bench/PERFORMANCE.md 9.4). Needs root (network namespaces).
//
//   ./bazelw run //bench:validate -- --model=out/calibrate/model.json --quick     # ~10 min on 2 cores
//   ./bazelw run //bench:validate -- --model=out/calibrate/model.json             # full plan, < 40 min
//   ./bazelw run //bench:validate -- --plan=my_plan.json --plan_only             # your own conditions
//
// Writes <out_dir>/validation.txt (the report) and <out_dir>/validation.svg.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "bench/cmd/scaling_flags.h"
#include "bench/cmd/validation.h"
#include "bench/emulator/cluster_flags.h"
#include "bench/model/data_path.h"
#include "bench/model/model_file.h"
#include "common/atomic_file.h"
#include "common/binary_main.h"
#include "common/flags_usage.h"
#include "common/runfiles.h"
#include "common/status_macros.h"

// The single-condition link flags of cluster_flags.cc: validation chooses its held-out conditions.
ABSL_DECLARE_FLAG(std::string, link);
ABSL_DECLARE_FLAG(std::string, latency);
ABSL_DECLARE_FLAG(bool, loopback);

ABSL_FLAG(bool, quick, false,
          "The quick plan (~10 min on 2 cores): gradient 4 MiB at 150 Mbit/s 2 ms (N = 4, 12, run twice for the "
          "noise) and 20 ms (N = 8, 16), ResNet-50 bytes/64 flat and 25 MB buckets at 150 Mbit/s 2 ms (N = 4, 8). "
          "Default, the full plan (< 40 min): adds 1 MiB, N = 2..16, 100 Mbit/s 5 ms at N = 12, 16, VGG-16 and "
          "BERT-base, and ResNet-50 at 20 ms.");
ABSL_FLAG(std::string, plan, "",
          "A held-out plan of your own conditions instead of the built-in ones: a JSON file of sweeps "
          "(link, latency, mode gradient or replay, nodes, model_bytes or workloads + bucket_mb + "
          "bytes_scale), exchanges, noise_sweep and noise_runs; bench/results/plans/example_plan.json is "
          "one. A relative path is taken from where `bazel run` was typed. Not with --quick; --exchanges "
          "and --noise_runs, when given, override the file's.");
ABSL_FLAG(std::vector<std::string>, exchanges, {},
          "Exchanges to validate (winner accuracy compares those given). Empty: the plan's (the built-in "
          "plans: ring, ps-1, ps-colocated, ps-dedicated).");
ABSL_FLAG(int, steps, psring::bench::ValidationPlan().steps, "Measured steps per run.");
ABSL_FLAG(int, warmup_steps, psring::bench::ValidationPlan().warmup_steps, "Unmeasured steps before them.");
ABSL_FLAG(int, ps_servers, psring::bench::ValidationPlan().ps_servers, "K, the server hosts of ps-dedicated.");
ABSL_FLAG(int, noise_runs, 0,
          "How often the plan's noise sweep runs (>= 2 measures the run-to-run noise for the tie band; 1: "
          "the band is 5 %). 0: the plan's (the built-in plans: 2).");
ABSL_FLAG(std::vector<std::string>, sweeps, {},
          "Run only these sweeps of the plan (0-based indexes as --plan_only lists them). Empty: all.");
ABSL_FLAG(std::vector<std::string>, nodes, {},
          "Run only these node counts of each sweep (sweeps left without any are dropped). Empty: the plan's.");
ABSL_FLAG(absl::Duration, time_limit, absl::InfiniteDuration(),
          "Start no sweep that would end past this time from the start (e.g. 9m: a machine lent for a fixed "
          "time), by the model's estimate of the sweep times the pace of the sweeps run so far (1.25 before "
          "any); its conditions are reported \"not run (time limit)\", counted apart from the excluded runs, "
          "and left out of the winner's score. inf: no limit.");
ABSL_FLAG(
    double, time_dilation, 1,
    "Run every sweep with its network K times slower (bench/PERFORMANCE.md 9.31): link rates / K, one-way "
    "latencies, queues and the links' tbf burst x K. The bytes in flight, windows and queue bytes stay "
    "the plan's, each network time is K x as long, and the box's CPU load falls about 1/K: on a box with "
    "fewer cores than the plan's processes, fewer runs are EMULATOR-BOUND. The model is judged on the "
    "dilated conditions (what runs; the report names them); the run takes about K x as long. Gradient "
    "sweeps on the emulated cluster only. 1: none.");
ABSL_FLAG(bool, plan_only, false,
          "Print the held-out plan, the conditions left out because calibration covers them, the model's "
          "estimate of the run time, and its PREDICTED line (90 % intervals, the winner or undetermined) for "
          "every condition, as a run would print them before it starts; run nothing.");

namespace psring::bench {
namespace {

// --plan's path: a relative one is taken from where `bazel run` was typed (it runs in the runfiles tree).
std::string PlanPath() { return FromWhereTyped(absl::GetFlag(FLAGS_plan)); }

// Where the plan comes from, for the report: "FILE" or "the built-in quick plan".
std::string PlanOrigin() {
  if (!absl::GetFlag(FLAGS_plan).empty()) return PlanPath();
  return absl::GetFlag(FLAGS_quick) ? "the built-in quick plan" : "the built-in full plan";
}

absl::StatusOr<ValidationPlan> PlanFromFlags() {
  const bool from_file = !absl::GetFlag(FLAGS_plan).empty();
  if (from_file && absl::GetFlag(FLAGS_quick)) {
    return absl::InvalidArgumentError(
        "--plan and --quick exclude each other: --plan=FILE runs the file's sweeps, --quick the built-in "
        "quick plan; drop one");
  }
  ValidationPlan plan;
  if (from_file) {
    ASSIGN_OR_RETURN(plan, ReadValidationPlanFile(PlanPath()));
  } else {
    plan = absl::GetFlag(FLAGS_quick) ? QuickValidationPlan() : FullValidationPlan();
  }
  const std::vector<std::string> exchanges = absl::GetFlag(FLAGS_exchanges);
  if (!exchanges.empty()) {
    plan.exchanges.clear();
    for (const std::string& name : exchanges) {
      ASSIGN_OR_RETURN(Exchange e, ParseExchange(name));
      plan.exchanges.push_back(e);
    }
  }
  const std::vector<std::string> sweeps = absl::GetFlag(FLAGS_sweeps);
  const std::vector<std::string> nodes = absl::GetFlag(FLAGS_nodes);
  if (!sweeps.empty() || !nodes.empty()) {
    std::vector<HeldOutSweep> kept;
    int noise_sweep = -1;
    for (size_t i = 0; i < plan.sweeps.size(); ++i) {
      if (!sweeps.empty() && std::find(sweeps.begin(), sweeps.end(), absl::StrCat(i)) == sweeps.end()) continue;
      HeldOutSweep sweep = plan.sweeps[i];
      if (!nodes.empty()) {
        sweep.nodes.erase(std::remove_if(sweep.nodes.begin(), sweep.nodes.end(),
                                         [&](int n) {
                                           return std::find(nodes.begin(), nodes.end(), absl::StrCat(n)) ==
                                                  nodes.end();
                                         }),
                          sweep.nodes.end());
      }
      if (sweep.nodes.empty()) continue;
      if (static_cast<int>(i) == plan.noise_sweep) noise_sweep = static_cast<int>(kept.size());
      kept.push_back(sweep);
    }
    if (kept.empty()) {
      return absl::InvalidArgumentError("--sweeps/--nodes leave no sweep to run: see --plan_only for the plan");
    }
    plan.sweeps = kept;
    plan.noise_sweep = std::max(0, noise_sweep);
  }
  plan.steps = absl::GetFlag(FLAGS_steps);
  plan.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  plan.ps_servers = absl::GetFlag(FLAGS_ps_servers);
  if (absl::GetFlag(FLAGS_noise_runs) != 0) plan.noise_runs = absl::GetFlag(FLAGS_noise_runs);
  if (plan.steps < 1 || plan.warmup_steps < 0 || plan.ps_servers < 1 || plan.noise_runs < 1) {
    return absl::InvalidArgumentError("--steps, --ps_servers and --noise_runs must be >= 1, --warmup_steps >= 0");
  }
  return plan;
}

absl::Status Run(const char* argv0) {
  if (absl::GetFlag(FLAGS_link) != ClusterOptions().link || absl::GetFlag(FLAGS_latency) != ClusterOptions().latency ||
      absl::GetFlag(FLAGS_loopback)) {
    return absl::InvalidArgumentError(
        "validate runs its own held-out link conditions: leave --link, --latency and --loopback unset");
  }
  ASSIGN_OR_RETURN(const std::string model_path, ModelFromFlags(argv0));
  if (model_path.empty()) {
    return absl::InvalidArgumentError(
        "validate judges a model: pass --model=FILE (e.g. out/calibrate/model.json), or leave it unset for the "
        "committed one");
  }
  ASSIGN_OR_RETURN(const proto::CostModelFile model, model::ReadModelFile(model_path));
  ASSIGN_OR_RETURN(const ValidationPlan planned, PlanFromFlags());
  const double dilation = absl::GetFlag(FLAGS_time_dilation);
  ClusterOptions cluster = ClusterOptionsFromFlags(argv0);
  ASSIGN_OR_RETURN(const ValidationPlan wanted, DilatePlan(planned, dilation, cluster.queue));
  ASSIGN_OR_RETURN(cluster.burst, DilateDuration(cluster.burst, dilation));
  ASSIGN_OR_RETURN(const HeldOutSelection held_out, SelectHeldOut(wanted, model));
  std::string plan_line = absl::StrCat("# plan: ", PlanOrigin(), "\n");
  if (dilation != 1) {
    absl::StrAppend(&plan_line, "# time dilation x", dilation, ": link rates / ", dilation,
                    ", latencies, queues and the links' burst (", cluster.burst, ") x ", dilation,
                    "; the sweeps below are the dilated conditions, and the model is judged on them\n");
  }
  std::cout << plan_line;
  for (const std::string& r : held_out.rejected) std::cout << "# left out: " << r << "\n";
  for (size_t i = 0; i < held_out.plan.sweeps.size(); ++i) {
    const HeldOutSweep& s = held_out.plan.sweeps[i];
    ASSIGN_OR_RETURN(const double sweep_s, EstimateSweepSeconds(held_out.plan, static_cast<int>(i), model));
    std::cout << "# held-out sweep " << i << ": " << s.Name() << ", N = " << absl::StrJoin(s.nodes, ",")
              << (static_cast<int>(i) == held_out.plan.noise_sweep
                      ? absl::StrCat(" (runs ", held_out.plan.noise_runs, " times for the noise)")
                      : "")
              << absl::StrFormat(", about %.0f s a run", sweep_s) << "\n";
  }
  ASSIGN_OR_RETURN(const double estimate, EstimateValidationSeconds(held_out.plan, model));
  std::cout << absl::StrFormat(
      "# the model's estimate of this plan's run time: %.0f min (%.0f s; model of %s, %s)\n", estimate / 60,
      estimate, model.host(), model.date());
  std::cout << "# " << model::CompareDataPath(model).Describe() << "\n# " << model::DescribeIncastTerm(model)
            << "\n";
  if (absl::GetFlag(FLAGS_plan_only)) {
    // What the model will be judged on, before anything runs: a plan's predictions can be read (or two
    // models' compared) without the emulated cluster.
    return PrintPredictions(held_out.plan, model, cluster.burst, cluster.queue, &std::cout);
  }

  ScalingOptions base;
  base.exchanges = held_out.plan.exchanges;
  RETURN_IF_ERROR(ApplyHarnessFlags(argv0, &base));
  if (dilation != 1 && base.make_cluster) {
    return absl::InvalidArgumentError(
        "--time_dilation slows the emulated cluster's links, and real hosts' links (--launcher) "
        "cannot be slowed: drop one of the two");
  }
  base.cluster.burst = cluster.burst;
  ASSIGN_OR_RETURN(const std::string out_dir, OutDirFromFlags("validate"));
  RETURN_IF_ERROR(MakeDirectories(out_dir));
  ASSIGN_OR_RETURN(const Validation validation, RunValidation(held_out.plan, model, base, &std::cout,
                                                              &std::cerr, absl::GetFlag(FLAGS_time_limit)));
  const std::string report = plan_line + FormatValidationReport(validation);
  std::cout << report;
  RETURN_IF_ERROR(WriteValidationFiles(out_dir, report, validation.rows,
                                       absl::StrFormat("model of %s, %s; %s; usable runs only", model.host(),
                                                       model.date(), validation.summary.band.Describe()),
                                       &std::cout));
  return absl::OkStatus();
}

}  // namespace
}  // namespace psring::bench

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Validates a frozen psring cost model on held-out conditions (link rates, latencies and N that "
      "calibration did not run; replayed ResNet-50/VGG-16/BERT-base flat and bucketed): prints each "
      "prediction before running it, then predicted vs measured per run, the median and p90 |error|, the tie "
      "band and winner accuracy, and writes a scatter plot. Needs root for the namespaces.\n"
      "  ./bazelw run //bench:validate -- --model=out/calibrate/model.json --quick\n"
      "  ./bazelw run //bench:validate -- --plan=my_plan.json --plan_only   # your own conditions",
      {"bench/"});
  return psring::RunMain(argc, argv, "validate",
                         [&](const std::vector<std::string>&) { return psring::bench::Run(argv[0]); });
}
