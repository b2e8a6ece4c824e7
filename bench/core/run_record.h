// What a bench run is and what it measured, as plain data every room shares: the options of a sweep, one
// record per run (one exchange at one N and one S, or one workload and bucket cap), and the sweep's result
// (the cluster it ran on and its records). The harness (bench/harness/) fills them; the model
// (bench/model/) fits and predicts from them; the reports (bench/report/) print and draw them.
#ifndef PSRING_BENCH_CORE_RUN_RECORD_H_
#define PSRING_BENCH_CORE_RUN_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/core/cluster.h"
#include "bench/core/exchange.h"
#include "bench/core/links.h"
#include "proto/workload.pb.h"
#include "trainer/exchange.h"

namespace psring::bench {

// --ps_chunks: how the harness sizes the PS's messages (bench/harness/ps_chunk_rule.h). kHarness keeps
// launch.cc's chunks, the ones the calibrated model knows; kBdp and kCapped size them by the link.
enum class PsChunks { kHarness, kBdp, kCapped };

// "harness", "bdp" or "capped": the flag's value.
inline const char* PsChunksName(PsChunks rule) {
  switch (rule) {
    case PsChunks::kHarness:
      return "harness";
    case PsChunks::kBdp:
      return "bdp";
    case PsChunks::kCapped:
      return "capped";
  }
  return "harness";
}

// A target cluster for the projection (the calibrated model of ScalingOptions::model_path at the workload's
// real size, each exchange capped by its CPU ceiling measured on the calibration host).
struct ProjectionTarget {
  double link_bytes_per_second = 0;  // per host and direction, e.g. 25 Gbit/s = 3.125e9
  double latency_s = 0;              // one-way host to host
  // What one of its switch ports can queue (bytes); 0: not known. Marks a PS whose window burst into a
  // server's port exceeds it INCAST (bench/model/collective.h IncastOf); no time depends on it.
  double port_buffer_bytes = 0;
};

struct RunRecord;

// The share of a run's exchange time in which the network alone lets the busiest link carry data: the
// calibrated model's wire time over its time with the window and latency bounds but no CPU or software terms,
// at the run's conditions (N, S, the link rate in bytes/s and the one-way latency); in (0, 1].
// bench/model/link_share.h builds one from a model file.
using NetworkLinkShare = std::function<double(const RunRecord& run, double link_bytes_per_second, double latency_s)>;

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
  // The cluster the sweep runs on (bench/core/cluster.h), given `cluster` with the hosts the sweep needs;
  // empty: the emulated cluster (bench/emulator/cluster.h).
  ClusterFactory make_cluster;
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
  // The frozen calibrated model (bench/model/, a //bench:calibrate JSON file) every model figure of the
  // reports comes from: each run's predicted time at its own conditions, the extrapolation, the projection.
  // "": no model figures.
  std::string model_path;
  // A host's measured CPU ceilings (bench/model/cpu_model.proto, //bench:calibrate --cpu_only) the projection
  // uses instead of the model file's; "": the calibration host's. The sweep's own predictions keep the model's.
  std::string cpu_model_path;
  // The target host's PS window round in microseconds (model_file.h WithWindowRoundFlag) the projection uses
  // instead of the model file's; < 0: the model file's (the calibration host's). The sweep's own predictions
  // keep the model's.
  double window_round_us = -1;
  // The cluster to project the model onto (link 0: no projection).
  ProjectionTarget projection;
  std::vector<std::string> worker_args;     // extra flags for every worker
  std::vector<std::string> server_args;     // extra flags for every PS server
  // --ps_chunks=bdp or capped: every PS run's chunk sized by the link (bench/harness/ps_chunk_rule.h) instead
  // of the harness's; not the calibrated default, so the model's columns of those runs are marked NOT
  // COMPARABLE.
  PsChunks ps_chunks = PsChunks::kHarness;
  int worker_timeout_s = 0;                 // workers' --timeout (0: from the size and link)
  double job_timeout_s = 0;                 // limit per launched job (0: from the size and link)
  std::vector<int> extrapolate_nodes = {16, 32, 64, 128, 256, 512, 1024};
  bool verbose = false;                     // echo every process's stderr, time-stamped, while it runs
  // Empty: 1 (the network alone could keep the link busy). Else the EMULATOR-BOUND rule blames the box for an
  // idle link only when the link carried data for less than kLinkUsed of this share (bench/emulator/probes.h):
  // a window-bound PS at 20-50 ms leaves the link idle by itself, which is a network condition, not the box.
  NetworkLinkShare network_link_share;
};

// One exchange at one N and one S. Times are per step.
struct RunRecord {
  // "measured"; "model" for a row the model predicted (bench/model/sweep_model.h PredictedRecords): the same
  // record, so files, tables and plots serve both, and a validation is a join of the two.
  std::string source = "measured";
  Exchange exchange = Exchange::kRing;
  int nodes = 0;
  int servers = 0;
  size_t bytes = 0;            // S as the workers report it
  std::string workload;        // replay mode: the profile; "" otherwise
  double bucket_mb = -1;       // the --bucket_mb the run used (-1: not given, the workers' default)
  int buckets = 0;             // gradient buckets per step as the workers report it (0: not reported)
  int steps = 0;
  double step_s = 0;           // slowest rank's mean wall time per step
  // Each rank's own mean wall time per step (index = rank; empty: not collected). With the PS's backup
  // workers B (--backup_workers among the server flags) a step closes once the first N - B pushes are in, so
  // the job advances at the (N-B)-th fastest rank's pace: quorum_step_s, the time between step closes
  // (= step_s without backup workers).
  std::vector<double> rank_step_s;
  int backup_workers = 0;
  int64_t ps_chunk_bytes = 0;  // --ps_chunks=bdp/capped: the PS processes' --chunk_bytes (0: the harness's)
  std::string ps_chunk_rule;   // the --ps_chunks value that set ps_chunk_bytes ("" where it is 0)
  // The sweep's --worker_args and --server_args as this run got them, space-joined: a re-rendered report
  // marks the runs whose transport flags the calibrated model does not know.
  std::string worker_args;
  std::string server_args;
  double quorum_step_s = 0;
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
  // The worst emulated host's wait for a core as a share of the exchange time (its cgroup's PSI "some";
  // bench/emulator/host_cgroups.h); -1: unknown (real hosts, or no per-host groups).
  double host_stall = -1;
  // The measured steps' window on the wall clock (Unix seconds; 0: the workers did not say): earliest start
  // and latest end over the ranks.
  double measured_start_unix_s = 0;
  double measured_end_unix_s = 0;
  // The emulated links' queues over the whole job (set-up and warm-up included; Cluster::ReadQueueCounters):
  // packets they sent and packets they dropped full (-1: unknown, e.g. real hosts or loopback). Drops are
  // the network's (incast into one port), a cost the model, which assumes a lossless network, does not have.
  int64_t link_packets = 0;
  int64_t link_drops = -1;
  // Whether the links dropped >= kLossyDropShare of their packets: loss the model, which assumes a lossless
  // network, has no term for (calibration fits no such run; validation judges and shows them apart).
  bool lossy() const { return LinkDropShare() >= kLossyDropShare; }
  // link_drops / (link_packets + link_drops); -1 unknown.
  double LinkDropShare() const { return DropShare(link_packets, link_drops); }
  bool emulator_bound = false;
  std::string bound_reason;    // why it is EMULATOR-BOUND ("" otherwise)
  // Why a run whose hosts waited for a core while its link fell short was kept: the waits cannot explain the
  // shortfall (bench/emulator/probes.h BoundVerdict::kept; "" otherwise).
  std::string kept_reason;
  // The rank ready last in more than half the measured steps, by the workers' ready times
  // (bench/core/attribution.h; -1: none stands out), that share, and its median lag behind the median rank.
  int straggler_rank = -1;
  double straggler_share = 0;
  double straggler_lag_s = 0;
  // Train mode with the workers' --eval_every (trainer/eval_held_out.h): rank 0's evaluations of the held-out
  // test subset in order (steps done, seconds since the first step with evaluation pauses left out, accuracy);
  // empty otherwise.
  struct Evaluation {
    int step = 0;
    double wall_s = 0;
    double accuracy = 0;
  };
  std::vector<Evaluation> evaluations;
  bool ok() const { return error.empty(); }
  // A run the fits and checks may use: it succeeded and the network, not the emulating box, bound it.
  bool usable() const { return ok() && !emulator_bound; }
};

struct SweepResult {
  ScalingOptions options;
  bool emulated = false;
  std::string fallback_reason;
  double link_bytes_per_second = 0;  // 0: unlimited / unknown
  double stream_bytes_per_second = 0;  // one TCP stream between two hosts, measured at start (0: not measured)
  double latency_s = 0;                // configured one-way latency (0: none)
  std::string latency_method;          // "netem", "nfqueue" or "" (bench/core/cluster.h)
  double rtt_s = 0;                    // the link check's TCP round trip between two hosts (0: not measured)
  double box_cores = 0;                // the cores all the sweep's processes shared (0: hosts of their own)
  // Real hosts through a launcher (bench/hosts/): what they are ("" on the emulated cluster) and their
  // measured link matrix ("# " lines). latency_method is then "measured" and the link its slowest pair.
  std::string hosts_description;
  std::string link_matrix;
  // The hosts' TCP (Cluster::HostsTcp), "" where unknown.
  std::string hosts_tcp;
  std::vector<RunRecord> records;
};

// A bucket cap as the workers get it: `real_mb` (a --bucket_mb or --first_bucket_mb of the real model) divided
// by --bytes_scale in replay mode, where the workers replay the scaled copy; unchanged otherwise.
double WorkerBucketMb(const ScalingOptions& options, double real_mb);

// What replaying workers get under --bytes_scale: every layer's parameter count divided by `bytes_scale`
// (rounded, at least 1), compute unchanged; the workload itself when bytes_scale is 1.
proto::Workload ScaledWorkload(proto::Workload workload, double bytes_scale);

}  // namespace psring::bench

#endif  // PSRING_BENCH_CORE_RUN_RECORD_H_
