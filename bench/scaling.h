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
#include <vector>

#include "absl/status/statusor.h"
#include "bench/cluster.h"
#include "bench/cost_model.h"
#include "bench/exchanges.h"
#include "bench/plot.h"

namespace psring::bench {

struct ScalingOptions {
  std::vector<int> nodes = {1, 2, 4, 8};
  std::vector<Exchange> exchanges = AllExchanges();
  std::string mode = "gradient";            // gradient (synthetic S-byte buffer) | train (the MLP)
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
  int steps = 0;
  double step_s = 0;           // slowest rank's mean wall time per step
  double compute_s = 0;        // mean over ranks
  double exchange_s = 0;       // mean over ranks
  double samples_per_s = 0;    // train mode: N * batch_size / step_s, global throughput
  double algbw = 0;            // bytes/s = S / exchange_s
  double busbw = 0;            // bytes/s = algbw * 2(N-1)/N
  double link_bytes_per_step = 0;  // busiest host link direction, from interface counters (0: unknown)
  int64_t bytes_sent_per_step = 0;  // worker payload, max over ranks (as the workers count it)
  int64_t wrong = 0;
  double test_accuracy = -1;
  double wall_s = 0;           // the whole job, start-up included
  std::string error;           // non-empty: the run failed, figures are not valid
  bool ok() const { return error.empty(); }
};

struct ScalingResult {
  ScalingOptions options;
  bool emulated = false;
  std::string fallback_reason;
  double link_bytes_per_second = 0;  // 0: unlimited / unknown
  double stream_bytes_per_second = 0;  // one TCP stream between two hosts, measured at start (0: not measured)
  std::vector<RunRecord> records;
  std::map<Exchange, ModelFit> fits;  // exchanges with at least one usable point
};

absl::StatusOr<ScalingResult> RunScaling(const ScalingOptions& options, std::ostream* progress);

// Fits alpha and beta per exchange from the successful records (fills result->fits).
void FitModels(ScalingResult* result);

// Model time per step (seconds) of `exchange` at N nodes for S bytes, or -1 without a fit.
double ModelSeconds(const ScalingResult& result, Exchange exchange, int nodes, double bytes);

// The nccl-tests-style tables (one per exchange; measured vs model), the fitted parameters, the model's
// extrapolation (marked as such) and the acceptance checks.
void PrintReport(const ScalingResult& result, std::ostream& out);

// Per N, the fastest exchange and how much slower each other one is.
void PrintVerdict(const ScalingResult& result, std::ostream& out);

std::string ToCsv(const ScalingResult& result);
// scaling.json: proto/bench_report.proto's ScalingReport in protobuf's JSON mapping.
absl::StatusOr<std::string> ToJson(const ScalingResult& result);
// The measured runs of a scaling.csv (columns found by name), to re-render a report without re-measuring.
absl::StatusOr<std::vector<RunRecord>> RecordsFromCsv(const std::string& csv);
// Step time vs N and efficiency vs N, measured points and model curves, at S = `bytes`.
Figure MakeFigure(const ScalingResult& result, size_t bytes);

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
