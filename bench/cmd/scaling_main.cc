// //bench:scaling: step time, algbw/busbw and bytes per host of the ring and the parameter server for a list of
// node counts on an emulated cluster, beside the calibrated model's prediction of each run and its
// extrapolation. See bench/PERFORMANCE.md.
//
//   ./bazelw run //bench:scaling -- --nodes=2,4,8 --exchanges=ring,ps-1 --model_bytes=4M,16M
//
// The sweep's flags are defined here with ScalingOptions's defaults; the links' and the programs' are shared
// with //bench:compare (cluster_flags.cc, scaling_flags.cc).
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/cmd/pipeline.h"
#include "bench/cmd/scaling_flags.h"
#include "bench/harness/ps_chunk_rule.h"
#include "bench/harness/sweep.h"
#include "bench/report/table.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"

namespace {

template <typename T>
std::vector<std::string> Strings(const std::vector<T>& values) {
  std::vector<std::string> out;
  for (const T& v : values) out.push_back(absl::StrCat(v));
  return out;
}

// Sizes as --model_bytes takes them, e.g. 16777216 -> "16M".
std::vector<std::string> SizeStrings(const std::vector<size_t>& sizes) {
  std::vector<std::string> out;
  for (size_t bytes : sizes) {
    const char* suffix = "";
    for (const char* unit : {"K", "M", "G"}) {
      if (bytes < 1024 || bytes % 1024 != 0) break;
      bytes /= 1024;
      suffix = unit;
    }
    out.push_back(absl::StrCat(bytes, suffix));
  }
  return out;
}

// The flags' defaults (never destroyed: flags may be read until exit).
const psring::bench::ScalingOptions& Defaults() {
  static const auto* const defaults = new psring::bench::ScalingOptions();
  return *defaults;
}

}  // namespace

ABSL_FLAG(std::vector<std::string>, nodes, Strings(Defaults().nodes), "Comma-separated worker counts N to run.");
ABSL_FLAG(std::vector<std::string>, exchanges, psring::bench::ExchangeNames(Defaults().exchanges),
          "Comma-separated exchanges: ring (TCP ring allreduce), ps-1 (one PS shard on a host of its own), "
          "ps-colocated (K = N shards, shard i on worker host i), ps-dedicated (K = --ps_servers shards on "
          "hosts of their own).");
ABSL_FLAG(std::string, mode, Defaults().mode,
          "gradient: workers exchange a synthetic buffer of --model_bytes (no model); train: workers train the "
          "MLP (trainer/) and exchange its real gradients; replay: set by --workload.");
ABSL_FLAG(std::vector<std::string>, model_bytes, SizeStrings(Defaults().model_bytes),
          "Comma-separated gradient sizes S for gradient mode, in bytes or with K/M/G suffixes (binary units).");
ABSL_FLAG(int, steps, Defaults().steps, "Measured exchange (or training) steps per run.");
ABSL_FLAG(int, warmup_steps, Defaults().warmup_steps,
          "Unmeasured steps before the measured ones (gradient and replay modes).");
ABSL_FLAG(int, ps_servers, Defaults().ps_servers, "K, the number of dedicated server hosts of ps-dedicated.");
ABSL_FLAG(std::string, ps_mode, Defaults().ps_mode, "The PS servers' --mode: sync, or async (bounded staleness).");
ABSL_FLAG(std::string, dataset, Defaults().dataset, "Train mode: fashion-mnist or synthetic.");
ABSL_FLAG(std::string, data_dir, Defaults().data_dir,
          "Train mode: Fashion-MNIST directory (empty: the workers' default).");
ABSL_FLAG(int, batch_size, Defaults().batch_size, "Train mode: batch size per worker.");
ABSL_FLAG(std::string, hidden, Defaults().hidden, "Train mode: hidden layer widths of the MLP.");
ABSL_FLAG(double, compute_ms, Defaults().compute_ms,
          "Gradient mode: compute time per step to assume for the scaling-efficiency panel (0: plot the "
          "bandwidth efficiency busbw/B instead).");
ABSL_FLAG(std::vector<std::string>, workload, Defaults().workloads,
          "Replay mode: comma-separated model profiles to replay (presets resnet50, vgg16, bert_base, mlp, or "
          "profile files; bench/workloads/): the workers allocate the model's real per-layer gradients, run its "
          "forward and backward as timed waits and exchange the gradients layer by layer. Overrides --mode.");
ABSL_FLAG(std::vector<std::string>, bucket_mb, {},
          "Comma-separated gradient bucket caps in MiB to sweep (train and replay modes), e.g. 0,25: 0 = one "
          "flat exchange after backward, > 0 = DDP-style buckets overlapped with backward. Empty: the workers' "
          "default. Sizes of the real model: with --bytes_scale=k the workers get --bucket_mb / k, and tables, "
          "labels and plots show the cap given here.");
ABSL_FLAG(double, first_bucket_mb, Defaults().first_bucket_mb,
          "The first bucket's cap in MiB with --bucket_mb > 0 (PyTorch DDP's: 1), a size of the real model "
          "like --bucket_mb: with --bytes_scale=k the workers get --first_bucket_mb / k.");
ABSL_FLAG(std::vector<std::string>, workload_args, Defaults().workload_args,
          "Extra comma-separated flags for replaying workers only, e.g. the workload's scale flag.");
ABSL_FLAG(double, bytes_scale, Defaults().bytes_scale,
          "Replay mode: divide every layer's parameter count by this (>= 1), so a model's exchange fits the "
          "emulated links: bytes / k on 100 Mbit/s stand for the real bytes on k x 100 Mbit/s (with the "
          "compute unchanged; --workload_args=--compute_scale=c scales the compute). --bucket_mb and "
          "--first_bucket_mb are divided by it alike, so the buckets hold the real model's layers; the "
          "projection uses the profile's real size.");
ABSL_FLAG(bool, timeline, true,
          "Replay mode: every worker writes a per-rank timeline (--timeline) and the harness merges each run's "
          "ranks into <out_dir>/timelines/<run>.json (Chrome trace-event JSON, one process per rank; open it in "
          "ui.perfetto.dev) and draws one step of each exchange in gantt-<workload>.svg.");
ABSL_FLAG(std::vector<std::string>, worker_args, Defaults().worker_args,
          "Extra comma-separated flags passed to every worker, e.g. --worker_args=--lr=0.1. A transport flag "
          "(--chunk_bytes, --push_window_bytes, --receive_window_bytes, --max_lead_bytes) marks the model's "
          "columns MODEL NOT COMPARABLE: the model was calibrated with the harness's own values.");
ABSL_FLAG(
    std::vector<std::string>, server_args, Defaults().server_args,
    "Extra comma-separated flags passed to every PS server, e.g. --server_args=--receive_window_bytes=0 "
    "(gRPC's adaptive HTTP/2 window instead of the fixed 4 MiB stream windows, which leave each connection "
    "at 64 KiB: PS steps up to 2x faster at 5 ms one-way, up to 12x at 20-40 ms; bench/PERFORMANCE.md 9.36). "
    "Transport flags mark the model's columns as --worker_args's do.");
ABSL_FLAG(
    std::string, ps_chunks, "harness",
    "How the PS's messages are sized: 'harness' (the calibrated default: 32 KiB chunks on links up to "
    "1 Gbit/s, against incast at 1-5 ms), 'bdp' (each chunk sized by one connection's share of a server "
    "link's bandwidth-delay product, B x 2L / fan-in, rounded to a power of two within 32 KiB-2 MiB; "
    "only links up to 1 Gbit/s with a latency change) or 'capped' ('bdp' kept within what the servers' "
    "ports and links hold: the largest power of two C with fan-in x (64 KiB + C) <= B x 2L + the port's "
    "queue and burst, and for the co-located PS only where B x 2L / (N - 1) >= 192 KiB; emulated links, or "
    "real hosts with --port_buffer_kb). A connection's HTTP/2 window grows by the message a server reads, so "
    "on 200 Mbit/s links at 20-40 ms one-way the PS with 'bdp' ran 1.3-7.7x faster than with 'harness' "
    "(N = 2-8, the gain falling with N), but on 50 Mbit/s links it slowed the co-located PS at N = 5 by "
    "7-18 %, and where its power-of-two rounding overshoots the servers' ports it drops packets and slows; "
    "'capped' ran 0.52-0.97x the step of 'harness' on six held-out conditions at 30-50 ms, N = 5-7, with "
    "claims written before the runs (bench/harness/ps_chunk_rule.h, bench/PERFORMANCE.md 9.37-9.40). 'bdp' "
    "and 'capped' mark the rows of the PS runs they gave a chunk MODEL NOT COMPARABLE and leave them out of "
    "the model lines (the model was calibrated with the "
    "harness's chunks); scaling.csv/json keep each run's chunk and rule (ps_chunk_bytes, ps_chunk_rule).");
ABSL_FLAG(int, worker_timeout, Defaults().worker_timeout_s,
          "Workers' --timeout in seconds (0: derived from S and the link rate).");
ABSL_FLAG(double, job_timeout, Defaults().job_timeout_s,
          "Limit in seconds for each launched job, after which its processes are killed (0: derived from S, "
          "the link rate and the steps).");
ABSL_FLAG(std::string, from_csv, "",
          "Launch nothing: re-fit, re-print and re-plot the measured rows of this earlier scaling.csv with the "
          "other flags (--link, --mode, --ps_servers, --extrapolate, --out_dir).");
ABSL_FLAG(std::vector<std::string>, extrapolate, Strings(Defaults().extrapolate_nodes),
          "Node counts for the model's extrapolation (printed and plotted as model, not measured).");

namespace psring::bench {
namespace {

absl::StatusOr<std::vector<int>> ParseIntList(const std::vector<std::string>& items, const std::string& flag) {
  std::vector<int> values;
  for (const auto& item : items) {
    int v = 0;
    if (!absl::SimpleAtoi(item, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", item, "' is not an integer"));
    }
    values.push_back(v);
  }
  return values;
}

absl::StatusOr<std::vector<size_t>> ParseSizes(const std::vector<std::string>& items) {
  std::vector<size_t> sizes;
  for (const auto& text : items) {
    const size_t bytes = ParseSize(text);
    if (bytes == 0) return absl::InvalidArgumentError("--model_bytes: bad size '" + text + "' (use e.g. 4M)");
    sizes.push_back(bytes);
  }
  return sizes;
}

absl::StatusOr<ScalingOptions> SweepOptionsFromFlags() {
  ScalingOptions o;
  ASSIGN_OR_RETURN(o.nodes, ParseIntList(absl::GetFlag(FLAGS_nodes), "nodes"));
  ASSIGN_OR_RETURN(o.extrapolate_nodes, ParseIntList(absl::GetFlag(FLAGS_extrapolate), "extrapolate"));
  o.exchanges.clear();
  for (const auto& name : absl::GetFlag(FLAGS_exchanges)) {
    ASSIGN_OR_RETURN(Exchange e, ParseExchange(name));
    o.exchanges.push_back(e);
  }
  ASSIGN_OR_RETURN(o.model_bytes, ParseSizes(absl::GetFlag(FLAGS_model_bytes)));
  o.mode = absl::GetFlag(FLAGS_mode);
  o.steps = absl::GetFlag(FLAGS_steps);
  o.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  o.ps_servers = absl::GetFlag(FLAGS_ps_servers);
  o.ps_mode = absl::GetFlag(FLAGS_ps_mode);
  o.dataset = absl::GetFlag(FLAGS_dataset);
  o.data_dir = absl::GetFlag(FLAGS_data_dir);
  o.batch_size = absl::GetFlag(FLAGS_batch_size);
  o.hidden = absl::GetFlag(FLAGS_hidden);
  o.compute_ms = absl::GetFlag(FLAGS_compute_ms);
  o.workloads = absl::GetFlag(FLAGS_workload);
  o.workload_args = absl::GetFlag(FLAGS_workload_args);
  o.bytes_scale = absl::GetFlag(FLAGS_bytes_scale);
  for (const std::string& item : absl::GetFlag(FLAGS_bucket_mb)) {
    double mb = 0;
    if (!absl::SimpleAtod(item, &mb)) {
      return absl::InvalidArgumentError(absl::StrCat("--bucket_mb: '", item, "' is not a number of MiB"));
    }
    o.bucket_mbs.push_back(mb);
  }
  o.first_bucket_mb = absl::GetFlag(FLAGS_first_bucket_mb);
  o.worker_args = absl::GetFlag(FLAGS_worker_args);
  o.server_args = absl::GetFlag(FLAGS_server_args);
  ASSIGN_OR_RETURN(o.ps_chunks, ParsePsChunks(absl::GetFlag(FLAGS_ps_chunks)));
  o.worker_timeout_s = absl::GetFlag(FLAGS_worker_timeout);
  o.job_timeout_s = absl::GetFlag(FLAGS_job_timeout);
  return o;
}

absl::Status Main(const char* argv0) {
  ASSIGN_OR_RETURN(ScalingOptions options, SweepOptionsFromFlags());
  const std::string from_csv = absl::GetFlag(FLAGS_from_csv);
  if (!from_csv.empty()) {
    options.exchanges.clear();  // no programs needed; the exchanges are those in the CSV
    RETURN_IF_ERROR(ApplyHarnessFlags(argv0, &options));
    ASSIGN_OR_RETURN(const std::string csv_out_dir, OutDirFromFlags("scaling"));
    return ReportFromCsv(options, from_csv, csv_out_dir);
  }
  RETURN_IF_ERROR(ApplyHarnessFlags(argv0, &options));
  ASSIGN_OR_RETURN(const std::string out_dir, OutDirFromFlags("scaling"));
  if (absl::GetFlag(FLAGS_timeline) && !options.workloads.empty()) options.timeline_dir = out_dir + "/timelines";
  return RunAndReport(options, out_dir);
}

}  // namespace
}  // namespace psring::bench

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Scaling sweep of the ring allreduce and the parameter server on an emulated cluster (network namespaces "
      "with tc-limited links; loopback without root). Prints nccl-tests-style tables beside the calibrated "
      "model's predictions (--model) and its extrapolation, and writes CSV, JSON and an SVG plot. See "
      "bench/PERFORMANCE.md.",
      {"bench/"});
  psring::ParseFlags(argc, argv);
  absl::Status status = psring::bench::Main(argv[0]);
  if (!status.ok()) std::cerr << "scaling: " << status.message() << "\n";
  return status.ok() ? 0 : 1;
}
