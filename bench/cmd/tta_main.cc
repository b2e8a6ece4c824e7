// //bench:time_to_accuracy: wall time and steps to a target test accuracy of the MLP on Fashion-MNIST for
// the ring, the sync PS, the sync PS with backup workers and the async PS at bounded staleness, at several N,
// with one straggler at several factors (issue 35, item 3). The grid and the report are bench/tta/.
//
//   ./bazelw run //bench:time_to_accuracy -- --n=4 --factors=1,2 --reps=1 --exchanges=ring,ps-async1
//
// Loopback by default (every rank on this machine, unshaped links); --emulate runs on the emulated cluster
// with the link flags, --launcher on real hosts (bench/cmd/launcher_flags.h).
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/cmd/scaling_flags.h"
#include "bench/emulator/cluster.h"
#include "bench/tta/grid.h"
#include "bench/tta/report.h"
#include "bench/tta/sweep.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"

namespace {

const psring::bench::tta::TtaOptions& Defaults() {
  static const auto* const defaults = new psring::bench::tta::TtaOptions();
  return *defaults;
}

template <typename T>
std::vector<std::string> Strings(const std::vector<T>& values) {
  std::vector<std::string> out;
  for (const T& v : values) out.push_back(absl::StrCat(v));
  return out;
}

}  // namespace

ABSL_FLAG(std::vector<std::string>, exchanges, Defaults().exchanges,
          "Comma-separated exchanges: ring (TCP ring allreduce), ps-sync (one PS shard, a step averages all N "
          "pushes), ps-backupB (sync with B backup workers: a step averages the first N-B pushes, late ones are "
          "dropped), ps-asyncS (async, bounded staleness S: pushes applied on arrival).");
ABSL_FLAG(std::vector<std::string>, n, Strings(Defaults().nodes), "Comma-separated worker counts N (2..64).");
ABSL_FLAG(std::vector<std::string>, factors, Strings(Defaults().factors),
          "Comma-separated straggler factors: F > 1 makes the last rank's compute F times as long "
          "(--straggler=N-1:F on the workers); 1: no straggler.");
ABSL_FLAG(int, reps, Defaults().reps,
          "Runs per cell (same seed); the table shows their median with the min .. max spread.");
ABSL_FLAG(double, target, Defaults().target,
          "Target test accuracy as a fraction (0.85 = 85 %) on the held-out subset; every rank stops at the "
          "first evaluation that reaches it.");
ABSL_FLAG(int, max_steps, Defaults().max_steps,
          "Steps after which a run that has not reached the target stops (it then reports its best accuracy "
          "and no time).");
ABSL_FLAG(int, eval_every, Defaults().eval_every,
          "Steps between evaluations of the model on the held-out subset (also before the first step and after "
          "the last); the resolution of steps to the target.");
ABSL_FLAG(int, eval_samples, Defaults().eval_samples,
          "Test images in the held-out subset (the first ones of the test set; at most 10000 for Fashion-MNIST).");
ABSL_FLAG(uint64_t, seed, Defaults().seed, "The workers' --seed in every run: initial model and data order.");
ABSL_FLAG(std::string, dataset, Defaults().base.dataset,
          "fashion-mnist, or synthetic (generated data: fast, for tests; its accuracies mean little).");
ABSL_FLAG(std::string, data_dir, Defaults().base.data_dir, "Fashion-MNIST directory (empty: the workers' default).");
ABSL_FLAG(int, batch_size, Defaults().base.batch_size, "Batch size per worker.");
ABSL_FLAG(std::string, hidden, Defaults().base.hidden, "Hidden layer widths of the MLP.");
ABSL_FLAG(std::vector<std::string>, worker_args, {},
          "Extra comma-separated flags for every worker, e.g. --worker_args=--lr=0.05 (the trainer's defaults "
          "otherwise: lr 0.03, momentum 0.9).");
ABSL_FLAG(double, job_timeout, 0,
          "Limit in seconds for each run, after which its processes are killed and the run is recorded as "
          "failed (0: 120 + --max_steps).");
ABSL_FLAG(bool, emulate, false,
          "Run on the emulated cluster (network namespaces with --link, --latency; needs CAP_NET_ADMIN) "
          "instead of loopback.");
ABSL_FLAG(std::string, out, "",
          "Stem of the output files <out>.txt (the table), .json (cells, runs and their curves), .csv (the "
          "curves) and .svg (accuracy against wall time). Empty: <out_dir>/time_to_accuracy_<UTC date>.");

namespace psring::bench::tta {
namespace {

template <typename T>
absl::StatusOr<std::vector<T>> Numbers(const std::string& flag, const std::vector<std::string>& texts) {
  std::vector<T> values;
  for (const std::string& t : texts) {
    T value;
    bool ok;
    if constexpr (std::is_same_v<T, int>) {
      ok = absl::SimpleAtoi(t, &value);
    } else {
      ok = absl::SimpleAtod(t, &value);
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", t, "' is not a number"));
    values.push_back(value);
  }
  return values;
}

absl::StatusOr<TtaOptions> OptionsFromFlags(const char* argv0) {
  TtaOptions o;
  o.exchanges = absl::GetFlag(FLAGS_exchanges);
  ASSIGN_OR_RETURN(o.nodes, Numbers<int>("n", absl::GetFlag(FLAGS_n)));
  ASSIGN_OR_RETURN(o.factors, Numbers<double>("factors", absl::GetFlag(FLAGS_factors)));
  o.reps = absl::GetFlag(FLAGS_reps);
  o.target = absl::GetFlag(FLAGS_target);
  o.max_steps = absl::GetFlag(FLAGS_max_steps);
  o.eval_every = absl::GetFlag(FLAGS_eval_every);
  o.eval_samples = absl::GetFlag(FLAGS_eval_samples);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.base.dataset = absl::GetFlag(FLAGS_dataset);
  o.base.data_dir = absl::GetFlag(FLAGS_data_dir);
  o.base.batch_size = absl::GetFlag(FLAGS_batch_size);
  o.base.hidden = absl::GetFlag(FLAGS_hidden);
  o.base.worker_args = absl::GetFlag(FLAGS_worker_args);
  o.base.job_timeout_s = absl::GetFlag(FLAGS_job_timeout);
  ASSIGN_OR_RETURN(const std::vector<Variant> variants, ParseVariants(o.exchanges));
  o.base.exchanges.clear();
  for (const Variant& v : variants) o.base.exchanges.push_back(v.exchange);
  RETURN_IF_ERROR(ApplyHarnessFlags(argv0, &o.base));
  // A --launcher's real hosts stay as they are; otherwise loopback unless --emulate.
  if (!o.base.make_cluster) o.base.cluster.force_loopback = !absl::GetFlag(FLAGS_emulate);
  RETURN_IF_ERROR(PlanGrid(o).status());
  return o;
}

// The cluster for the largest run of the grid.
absl::StatusOr<std::unique_ptr<Cluster>> MakeCluster(const TtaOptions& o) {
  ClusterOptions options = o.base.cluster;
  options.hosts = 0;
  for (int n : o.nodes) {
    for (Exchange e : o.base.exchanges) {
      options.hosts = std::max(options.hosts, PluginFor(e).Place(n, o.base.ps_servers).HostsUsed());
    }
  }
  if (o.base.make_cluster) return o.base.make_cluster(options);
  ASSIGN_OR_RETURN(std::unique_ptr<EmulatedCluster> cluster, EmulatedCluster::Create(options));
  return std::unique_ptr<Cluster>(std::move(cluster));
}

absl::Status Main(const char* argv0) {
  ASSIGN_OR_RETURN(const TtaOptions options, OptionsFromFlags(argv0));
  std::string stem = absl::GetFlag(FLAGS_out);
  if (stem.empty()) {
    ASSIGN_OR_RETURN(const std::string dir, OutDirFromFlags("time_to_accuracy"));
    stem = absl::StrCat(dir, "/time_to_accuracy_", absl::FormatTime("%Y-%m-%d", absl::Now(), absl::UTCTimeZone()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Cluster> cluster, MakeCluster(options));
  const std::string setting =
      cluster->emulated() ? absl::StrCat(cluster->label(), ": ", cluster->Describe())
                          : absl::StrFormat("loopback: every process on this machine (%g cores shared), unshaped links",
                                            cluster->box_cores());
  const std::string header = ReportHeader(options, setting);
  std::cout << header << std::flush;
  absl::StatusOr<std::vector<TtaRun>> runs = RunGrid(options, cluster.get(), &std::cerr);
  const absl::Status destroyed = cluster->Destroy();
  if (!destroyed.ok()) std::cerr << "# WARNING: cluster teardown: " << destroyed.message() << "\n";
  if (!runs.ok()) return runs.status();
  const std::vector<TtaCell> cells = MedianCells(*runs);
  std::cout << FormatTable(cells, options.target) << std::flush;
  RETURN_IF_ERROR(WriteReportFiles(stem, options, setting, *runs, cells));
  std::cout << "# wrote " << stem << ".{txt,json,csv,svg}\n";
  return absl::OkStatus();
}

}  // namespace
}  // namespace psring::bench::tta

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Time to a target test accuracy: trains the MLP on Fashion-MNIST with each exchange (ring, sync PS, sync "
      "PS with backup workers, async PS at bounded staleness) at each N, with and without one straggler, "
      "until rank 0's evaluation on held-out test images reaches --target (or --max_steps). Prints a table of "
      "the median of --reps runs per cell (wall time and steps to the target, final accuracy, s/step) and "
      "writes JSON, CSV and an SVG of accuracy against wall time. Loopback unless --emulate (the emulated "
      "cluster) or --launcher (real hosts). Of the shared harness flags, the program paths (--ring_worker, "
      "--ps_server, --ps_worker), --verbose, --out_dir, the launcher flags and the link flags (with --emulate) "
      "apply; the model flags do not.\n"
      "  ./bazelw run //bench:time_to_accuracy -- --n=4 --factors=1,2 --reps=1 --exchanges=ring,ps-async1",
      {"bench/"});
  psring::ParseFlags(argc, argv);
  const absl::Status status = psring::bench::tta::Main(argv[0]);
  if (!status.ok()) std::cerr << "time_to_accuracy: " << status.message() << "\n";
  return status.ok() ? 0 : 1;
}
