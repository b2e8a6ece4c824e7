// The scaling harness: runs the real worker binaries (ring and parameter server) on an emulated cluster for
// several node counts, collects their PSRING_RESULT lines, fits the alpha-beta model and reports.
//
//   ScalingOptions options;                 // defaults: N = 1,2,4,8; all exchanges; S = 16 MiB; 100mbit
//   options.binaries = {ring_worker, ps_server, ps_worker};   // paths (bench/scaling_flags.h finds them)
//   ASSIGN_OR_RETURN(ScalingResult result, RunScaling(options, &std::cerr));   // progress on stderr
//   PrintReport(result, std::cout);                                             // tables, fit, model
//   RETURN_IF_ERROR(WriteOutputs(result, "/tmp/psring-scaling", &files));       // CSV, JSON, SVG
//
// One run = one exchange at one N (and one S): N worker processes, each in host i's namespace, plus the PS
// servers where the exchange's plug-in (bench/exchanges.h) places them. This driver owns what every exchange
// shares: the loop over N, exchanges and S, the emulated cluster, the launch, the result lines, the fit, the
// tables (scaling_report.cc) and the plots. A run that fails is recorded with its error and the others go on.
// Every launched job has a timeout after which its process groups are killed. bench/PERFORMANCE.md defines
// every figure.
//
// Blocking: RunScaling blocks for the whole sweep (minutes). Not thread-safe: it owns the emulated cluster.
#ifndef PSRING_BENCH_SCALING_H_
#define PSRING_BENCH_SCALING_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/cluster.h"
#include "bench/cost_model.h"
#include "bench/exchanges.h"
#include "bench/plot.h"
#include "proto/workload.pb.h"
#include "trainer/exchange.h"

namespace psring::bench {

struct ScalingOptions {
  std::vector<int> nodes = {1, 2, 4, 8};
  std::vector<Exchange> exchanges = AllExchanges();
  // gradient (synthetic S-byte buffer) | train (the MLP) | replay (a model profile: set by RunScaling when
  // `workloads` is not empty)
  std::string mode = "gradient";
  std::vector<size_t> model_bytes = {16u << 20};  // S values, gradient mode
  int steps = 10;                           // measured steps per run
  int warmup_steps = 2;                     // gradient mode: unmeasured steps first
  int ps_servers = 2;                       // K for ps-dedicated
  std::string ps_mode = "sync";             // the servers' --mode
  // The emulated links: link, delay, queue, force_loopback. The driver sets hosts to what the sweep needs.
  ClusterOptions cluster;
  BinaryPaths binaries;                     // the programs the exchanges launch
  // Training mode (the MLP of trainer/).
  std::string dataset = "fashion-mnist";
  std::string data_dir;                     // "" = the workers' default
  int batch_size = 128;                     // per worker
  std::string hidden = "256,256";
  // Compute time per step assumed for the scaling efficiency in gradient mode (0: show bandwidth efficiency
  // busbw / B instead). Train mode uses the measured compute time.
  double compute_ms = 0;
  // Replay mode: the workers replay these model profiles (presets like resnet50, or profile files) with
  // their real gradient sizes and timed compute (workers' --workload); one sweep per workload.
  std::vector<std::string> workloads;
  std::vector<std::string> workload_args;   // flags for replaying workers only (e.g. --compute_scale)
  // Replay mode: every layer's parameter count divided by this (>= 1; the workers replay a scaled copy of the
  // profile). With compute unchanged, 100 Mbit/s links and bytes / k stand for k x faster links with the
  // real bytes (bench/PERFORMANCE.md 7.6). The bucket caps below are the real model's: the workers get them
  // divided by bytes_scale too (WorkerBucketMb), so the buckets hold the same layers as the real model's.
  double bytes_scale = 1;
  // --bucket_mb values to sweep (train and replay modes; empty: the workers' default). 0 = one flat exchange
  // after backward; > 0 = buckets of that many MiB overlapped with backward. Records, labels, tables and
  // plots name a bucket by this real size ("25 MB" under bytes_scale 64).
  std::vector<double> bucket_mbs;
  // --first_bucket_mb: the first bucket's cap (real MiB, like bucket_mbs; DDP's default 1).
  double first_bucket_mb = trainer::kDefaultFirstBucketMb;
  // Non-empty (train and replay modes; the workers must know --timeline): every worker writes
  // --timeline=<dir>/<run>/rank<r>.json and the harness merges each run's ranks into <dir>/<run>.json (one
  // pid per rank).
  std::string timeline_dir;
  // The cluster to project the fitted model onto (link 0: no projection).
  ProjectionTarget projection;
  std::vector<std::string> worker_args;     // extra flags for every worker
  std::vector<std::string> server_args;     // extra flags for every PS server
  int worker_timeout_s = 0;                 // workers' --timeout (0: from the size and link)
  double job_timeout_s = 0;                 // limit per launched job (0: from the size and link)
  std::vector<int> extrapolate_nodes = {16, 32, 64, 128, 256, 512, 1024};
  bool verbose = false;                     // echo every process's stderr, time-stamped, while it runs
};

// One exchange at one N and one S. Times are per step.
struct RunRecord {
  Exchange exchange = Exchange::kRing;
  int nodes = 0;
  int servers = 0;
  size_t bytes = 0;            // S as the workers report it
  std::string workload;        // replay mode: the profile; "" otherwise
  double bucket_mb = -1;       // the --bucket_mb the run used (-1: not given, the workers' default)
  int buckets = 0;             // gradient buckets per step as the workers report it (0: not reported)
  int steps = 0;
  double step_s = 0;           // slowest rank's mean wall time per step
  double compute_s = 0;        // mean over ranks
  double exchange_s = 0;       // mean over ranks: the exchange's own time (all buckets)
  double forward_s = 0;        // train/replay modes, mean over ranks (0: not reported)
  double backward_s = 0;
  double optimizer_s = 0;
  double exposed_s = 0;        // the time the training thread waited for the exchange, mean over ranks
  std::string timeline;        // the merged trace of the run's ranks ("" without --timeline)
  double samples_per_s = 0;    // train mode: N * batch_size / step_s, global throughput
  double algbw = 0;            // bytes/s = S / exchange_s
  double busbw = 0;            // bytes/s = algbw * 2(N-1)/N
  double link_bytes_per_step = 0;  // busiest host link direction, from interface counters (0: unknown)
  int64_t bytes_sent_per_step = 0;  // worker payload, max over ranks (as the workers count it)
  int64_t wrong = 0;
  double test_accuracy = -1;
  double wall_s = 0;           // the whole job, start-up included
  std::string error;           // non-empty: the run failed, figures are not valid
  // What bound the run (bench/probes.h): the box's CPU busy fraction over the measured steps (-1: unknown),
  // the busiest link direction's utilisation over the exchange time (-1: unknown), and the verdict.
  double box_cpu = -1;
  double link_util = -1;
  // The largest step-to-step spread over the ranks ((slowest - fastest) / median of a rank's measured
  // steps; 0: one step or not reported): the noise the checks allow for.
  double step_spread = 0;
  // The share of the window in which some runnable task waited for a core (PSI "some"; -1: unknown).
  double cpu_stall = -1;
  // The measured steps' window on the wall clock (Unix seconds; 0: the workers did not say): earliest start
  // and latest end over the ranks.
  double measured_start_unix_s = 0;
  double measured_end_unix_s = 0;
  bool emulator_bound = false;
  std::string bound_reason;    // why it is EMULATOR-BOUND ("" otherwise)
  bool ok() const { return error.empty(); }
  // A run the fits and checks may use: it succeeded and the network, not the emulating box, bound it.
  bool usable() const { return ok() && !emulator_bound; }
};

struct ScalingResult {
  ScalingOptions options;
  bool emulated = false;
  std::string fallback_reason;
  double link_bytes_per_second = 0;  // 0: unlimited / unknown
  double stream_bytes_per_second = 0;  // one TCP stream between two hosts, measured at start (0: not measured)
  double latency_s = 0;                // configured one-way latency (0: none)
  std::string latency_method;          // "netem", "nfqueue" or "" (bench/cluster.h)
  double rtt_s = 0;                    // the link check's TCP round trip between two hosts (0: not measured)
  std::vector<RunRecord> records;
  std::map<Exchange, ModelFit> fits;  // exchanges with at least one usable point (flat exchanges only)
  // Replay mode: each workload's profile (forward order; its own gradient bytes and device compute times),
  // for the model of overlapped steps and the projection.
  std::map<std::string, std::vector<LayerCost>> workload_layers;
};

absl::StatusOr<ScalingResult> RunScaling(const ScalingOptions& options, std::ostream* progress);

// A bucket cap as the workers get it: `real_mb` (a --bucket_mb or --first_bucket_mb of the real model) divided
// by --bytes_scale in replay mode, where the workers replay the scaled copy; unchanged otherwise.
double WorkerBucketMb(const ScalingOptions& options, double real_mb);

// Replay mode: each of result->options.workloads' profiles (trainer/workload.h: a preset or a file) into
// result->workload_layers, at its own size and device compute. kNotFound / kInvalidArgument from the loader.
absl::Status LoadWorkloadLayers(ScalingResult* result);

// What replaying workers get under --bytes_scale: every layer's parameter count divided by `bytes_scale`
// (rounded, at least 1), compute unchanged; the workload itself when bytes_scale is 1.
proto::Workload ScaledWorkload(proto::Workload workload, double bytes_scale);

// Fits alpha and beta per exchange from the successful records (fills result->fits).
void FitModels(ScalingResult* result);

// Model time per step (seconds) of `exchange` at N nodes for S bytes, or -1 without a fit.
double ModelSeconds(const ScalingResult& result, Exchange exchange, int nodes, double bytes);

// The nccl-tests-style tables (one per exchange; measured vs model), the fitted parameters, the model's
// extrapolation (marked as such) and the acceptance checks.
void PrintReport(const ScalingResult& result, std::ostream& out);

// Per N, the fastest exchange and how much slower each other one is.
void PrintVerdict(const ScalingResult& result, std::ostream& out);

// Replay mode (replay_report.cc): the model's step time (s) of `workload` with `exchange` at N, flat
// (bucket_mb 0) or bucketed, from the exchange's fit, the workers' measured compute and the profile's
// layers (bench/cost_model.h OverlapStep); -1 without a fit, a profile or measured compute.
double ReplayModelSeconds(const ScalingResult& result, Exchange exchange, int nodes, const std::string& workload,
                          double bucket_mb);
// Per workload: tables, # MODEL, # PROJECTION, # check and overlap lines.
void PrintReplayReport(const ScalingResult& result, std::ostream& out);
// Per workload and N, the fastest exchange and bucket setting and how much slower the others are.
void PrintReplayVerdict(const ScalingResult& result, std::ostream& out);
// File name -> SVG: scaling-<workload>.svg, projection-<workload>.svg (with a projection target) and
// gantt-<workload>.svg (with timelines).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReplayFigures(const ScalingResult& result);

std::string ToCsv(const ScalingResult& result);
// scaling.json: proto/bench_report.proto's ScalingReport in protobuf's JSON mapping.
absl::StatusOr<std::string> ToJson(const ScalingResult& result);
// The measured runs of a scaling.csv (columns found by name), to re-render a report without re-measuring.
absl::StatusOr<std::vector<RunRecord>> RecordsFromCsv(const std::string& csv);
// Step time vs N and efficiency vs N, measured points and model curves, at S = `bytes`.
Figure MakeFigure(const ScalingResult& result, size_t bytes);

// Creates `dir` and its parents (mkdir -p); kPermissionDenied naming the part that failed.
absl::Status MakeDirectories(const std::string& dir);

// Writes scaling.csv, scaling.json and scaling.svg (at the largest S) into `dir` (created if missing);
// appends the paths to `written`.
absl::Status WriteOutputs(const ScalingResult& result, const std::string& dir, std::vector<std::string>* written);

// The driver's end: runs the sweep (progress on stderr), prints the report and the verdict on stdout and
// writes the files into `out_dir`. Non-OK when a run failed or a result had wrong elements, so scripts see it.
absl::Status RunAndReport(const ScalingOptions& options, const std::string& out_dir);

// The same report and files from the measured rows of an earlier run's scaling.csv (nothing is launched); the
// options give the mode, link, K and extrapolation the figures are computed with.
absl::Status ReportFromCsv(const ScalingOptions& options, const std::string& csv_path, const std::string& out_dir);

}  // namespace psring::bench

#endif  // PSRING_BENCH_SCALING_H_
