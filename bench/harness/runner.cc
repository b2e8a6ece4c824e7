// One run of the harness: its ports and time limits, the command lines of its processes, the launch, the
// result lines, the link counters and the EMULATOR-BOUND verdict (runner.h).
#include "bench/harness/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/core/attribution.h"
#include "bench/core/job_ports.h"
#include "bench/core/trace_merge.h"
#include "bench/emulator/probes.h"
#include "bench/harness/launch.h"
#include "bench/harness/ps_chunk_rule.h"
#include "bench/harness/result_line.h"
#include "common/atomic_file.h"
#include "common/exit_codes.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace psring::bench {
namespace {

// The last --backup_workers=B among the PS servers' extra flags (0: none or not a number).
int BackupWorkersIn(const std::vector<std::string>& server_args) {
  int backup = 0;
  for (absl::string_view arg : server_args) {
    int value = 0;
    if (absl::ConsumePrefix(&arg, "--backup_workers=") && absl::SimpleAtoi(arg, &value)) backup = value;
  }
  return backup;
}

// One mark per measured step on the lane of the rank ready last, at its ready time moved onto the timelines'
// clock (the workers stamp trace events with the steady clock, ready times with the wall clock).
// With backup workers a step closes without the last ranks, so the mark says "ready last", not "held back".
std::vector<TraceMark> HeldBackMarks(const StepAttribution& a, const std::vector<std::vector<double>>& ready,
                                     int backup_workers) {
  const double steady_minus_unix_us =
      static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::steady_clock::now().time_since_epoch())
                              .count()) -
      static_cast<double>(absl::ToUnixMicros(absl::Now()));
  std::vector<TraceMark> marks;
  for (int s = 0; s < a.steps; ++s) {
    TraceMark mark;
    mark.rank = a.last_rank[s];
    mark.ts_us = ready[mark.rank][s] * 1e6 + steady_minus_unix_us;
    mark.step = s;
    mark.lag_ms = a.lag_s[s] * 1e3;
    mark.name = backup_workers > 0
                    ? absl::StrFormat("ready last for measured step %d (+%.1f ms; backup workers: the step "
                                      "closes without the last %d)",
                                      s, mark.lag_ms, backup_workers)
                    : absl::StrFormat("held measured step %d back (+%.1f ms)", s, mark.lag_ms);
    marks.push_back(std::move(mark));
  }
  return marks;
}

// The rendezvous master's port followed by one port per server for port slot `slot`: fixed and rotating on
// hosts with port spaces of their own (bench/core/job_ports.h), from the kernel on loopback, where every host
// shares the machine's port space with whatever else runs there.
absl::StatusOr<std::vector<int>> RunPorts(bool emulated, int slot, int servers) {
  if (!emulated) return FreeLoopbackPorts(1 + servers);  // Run() retries once if one is taken meanwhile
  return JobPorts(slot, servers);
}

// A generous upper bound of one step's time, for timeouts: the model with a poor effective bandwidth.
double PessimisticStepSeconds(const ScalingOptions& o, const ExchangePlugin& plugin, int nodes, double bytes,
                              double link_bps) {
  const double bandwidth = link_bps > 0 ? link_bps : 100e6;  // loopback on 2 cores: ~100 MB/s is safe
  const CostTerms terms = plugin.Terms(nodes, plugin.Servers(nodes, o.ps_servers), bytes);
  double seconds = 0.05 * terms.messages + 3.0 * terms.link_bytes / bandwidth;
  if (o.mode == "train") seconds += 2.0 * nodes;  // oversubscribed CPU: all workers share the cores
  if (o.mode == "replay") seconds += 5.0;         // the profile's compute: seconds per step at most
  return seconds + 0.5;
}

// The time limits of one run, from the pessimistic step time unless the user set them.
struct RunBudget {
  int worker_timeout_s = 0;  // the workers' --timeout
  absl::Duration job_timeout;
  int total_steps = 0;       // warm-up + measured: what the link counters are divided by
};

RunBudget Budget(const ScalingOptions& o, double step_estimate) {
  RunBudget budget;
  budget.worker_timeout_s =
      o.worker_timeout_s > 0 ? o.worker_timeout_s : static_cast<int>(std::max(60.0, 5 * step_estimate + 30));
  budget.total_steps = o.steps + (o.mode == "train" ? 0 : o.warmup_steps);
  budget.job_timeout =
      absl::Seconds(o.job_timeout_s > 0 ? o.job_timeout_s : 90 + 3 * step_estimate * (budget.total_steps + 1));
  return budget;
}

// Every host link's bytes, sent and received, host by host (empty on loopback or when unreadable): one read of
// the switch ports' counters.
std::vector<int64_t> LinkByteCounters(const Cluster& cluster) {
  std::vector<int64_t> counters;
  if (!cluster.emulated()) return counters;
  absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> all = cluster.AllHostLinkBytes();
  if (!all.ok()) return counters;
  for (const auto& [sent, received] : *all) {
    counters.push_back(sent);
    counters.push_back(received);
  }
  return counters;
}

// The bytes each host's link moved during a job (namespaces only).
class LinkCounters {
 public:
  explicit LinkCounters(const Cluster* cluster) : cluster_(cluster), before_(LinkByteCounters(*cluster)) {}

  // Bytes per step through the busiest host link direction since construction (0: no counters).
  double BusiestPerStep(int steps) const {
    const std::vector<int64_t> now = LinkByteCounters(*cluster_);
    if (now.size() != before_.size()) return 0;
    int64_t busiest = 0;
    for (size_t i = 0; i < now.size(); ++i) busiest = std::max(busiest, now[i] - before_[i]);
    return static_cast<double>(busiest) / steps;
  }

 private:
  const Cluster* cluster_;
  const std::vector<int64_t> before_;
};

// "ring N=4 bucket 25 MB": a run as the merged trace names its processes.
std::string RunLabel(const RunRecord& r) {
  std::string label = absl::StrCat(r.workload.empty() ? "" : r.workload + " ", ExchangeName(r.exchange), " N=", r.nodes);
  if (r.bucket_mb >= 0) absl::StrAppend(&label, r.bucket_mb == 0 ? " flat" : absl::StrCat(" bucket ", r.bucket_mb, " MB"));
  return label;
}

bool AnyExitedWith(const std::vector<ProcessResult>& results, int code) {
  return std::any_of(results.begin(), results.end(), [code](const ProcessResult& r) { return r.exit_code == code; });
}

std::string Tail(const std::string& text, size_t bytes) {
  return text.substr(text.size() > bytes ? text.size() - bytes : 0);
}

}  // namespace

class Runner::Impl {
 public:
  // `profiles`: workload name -> what the workers get as --workload (a scaled copy's path; absent: the name).
  Impl(const ScalingOptions& options, Cluster* cluster, std::ostream* progress,
       std::map<std::string, std::string> profiles)
      : o_(options), cluster_(cluster), progress_(progress), profiles_(std::move(profiles)) {}

  // `workload` "" and `bucket_mb` -1 outside replay mode and without --bucket_mb.
  RunRecord Run(Exchange exchange, int nodes, size_t bytes, const std::string& workload, double bucket_mb,
                int run_index) {
    RunRecord record;
    record.exchange = exchange;
    record.nodes = nodes;
    record.servers = PluginFor(exchange).Servers(nodes, o_.ps_servers);
    record.bytes = bytes;
    record.workload = workload;
    record.bucket_mb = bucket_mb;
    const absl::Time start = absl::Now();
    absl::Status status = RunJobFor(run_index, &record);
    // A port taken by someone else between our choice and the bind (the binary exits with kExitPortInUse, or
    // choosing ports failed the same way here): once more with other ports. On loopback the kernel picks new
    // ones; on hosts with fixed ports a real host's outgoing connection may hold one (the emulated hosts
    // reserve them), and the retry takes another slot's.
    if (IsPortInUse(status)) {
      *progress_ << " port taken by another process, retrying with new ports..." << std::flush;
      status = RunJobFor(RetrySlot(run_index), &record);
    }
    record.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
    if (!status.ok()) record.error = std::string(status.message());
    return record;
  }

 private:
  // One launch of the run in port slot `port_slot` (bench/core/job_ports.h).
  absl::Status RunJobFor(int port_slot, RunRecord* record) {
    const ExchangePlugin& plugin = PluginFor(record->exchange);
    ASSIGN_OR_RETURN(const LaunchContext context, Context(plugin, record->nodes, port_slot));
    record->ps_chunk_bytes = context.ps_chunk_bytes;
    record->ps_chunk_rule = context.ps_chunk_bytes > 0 ? PsChunksName(o_.ps_chunks) : "";
    record->worker_args = absl::StrJoin(o_.worker_args, " ");
    record->server_args = absl::StrJoin(o_.server_args, " ");
    const RunBudget budget = Budget(o_, PessimisticStepSeconds(o_, plugin, record->nodes, record->bytes,
                                                               cluster_->link_bytes_per_second()));
    const std::string timeline_stem = TimelineStem(*record);
    if (!timeline_stem.empty()) RETURN_IF_ERROR(MakeDirectories(timeline_stem));
    const std::vector<ProcessSpec> specs = Specs(plugin, context, budget, *record, timeline_stem);
    const LinkCounters counters(cluster_);
    ASSIGN_OR_RETURN(const DelayCounters delay_before, DelayCountersNow());
    // Unknown (no shaped links, or tc unreadable): the record keeps -1 drops, and rule (d) judges without.
    const absl::StatusOr<QueueCounters> queues_before = cluster_->ReadQueueCounters();
    RunSampler sampler([this] { return LinkByteCounters(*cluster_); }, kSampleInterval,
                       [this] { return cluster_->HostStallMicros(); });
    const absl::Time job_start = absl::Now();
    ASSIGN_OR_RETURN(const std::vector<ProcessResult> results, Launch(specs, budget));
    sampler.Stop();
    record->link_bytes_per_step = counters.BusiestPerStep(budget.total_steps);
    if (queues_before.ok()) {
      const absl::StatusOr<QueueCounters> queues_after = cluster_->ReadQueueCounters();
      if (queues_after.ok()) {
        record->link_packets = queues_after->packets - queues_before->packets;
        record->link_drops = queues_after->dropped - queues_before->dropped;
      }
    }
    // Workers are the last N processes.
    const std::vector<ProcessResult> workers(results.end() - record->nodes, results.end());
    std::vector<TraceMark> marks;
    RETURN_IF_ERROR(Collect(plugin, workers, record, &marks));
    ASSIGN_OR_RETURN(const DelayCounters delay_after, DelayCountersNow());
    Classify(sampler, job_start, workers, delay_before, delay_after, budget.total_steps, record);
    if (!timeline_stem.empty()) {
      std::vector<std::string> ranks;
      for (int r = 0; r < record->nodes; ++r) ranks.push_back(RankTimeline(timeline_stem, r));
      record->timeline = timeline_stem + ".json";
      // The marks are on the runner's clock, which is the ranks' only when they share this machine.
      if (cluster_->box_cores() <= 0) marks.clear();
      RETURN_IF_ERROR(MergeRankTraceFiles(ranks, RunLabel(*record), record->timeline, marks));
    }
    return absl::OkStatus();
  }

  // The delay program's counters (zeros without one); kUnavailable when it died (no later run can work).
  absl::StatusOr<DelayCounters> DelayCountersNow() const {
    if (cluster_->latency_method() != "nfqueue") return DelayCounters{};
    return cluster_->ReadDelayCounters();
  }

  // Fills the record's CPU, link utilisation and EMULATOR-BOUND verdict over the measured steps' window as
  // the workers report it (else the last steps x step_s seconds before the last worker exited).
  void Classify(const RunSampler& sampler, absl::Time job_start, const std::vector<ProcessResult>& workers,
                const DelayCounters& before, const DelayCounters& after, int total_steps,
                RunRecord* record) const {
    double end_s = 0;
    for (const ProcessResult& w : workers) end_s = std::max(end_s, w.end_s);
    absl::Time to = job_start + absl::Seconds(end_s);
    absl::Time from = to - absl::Seconds(record->steps * record->step_s);
    if (record->measured_start_unix_s > 0 && record->measured_end_unix_s > record->measured_start_unix_s) {
      from = absl::FromUnixMicros(static_cast<int64_t>(record->measured_start_unix_s * 1e6));
      to = absl::FromUnixMicros(static_cast<int64_t>(record->measured_end_unix_s * 1e6));
    }
    if (from < job_start) from = job_start;
    const double link = cluster_->link_bytes_per_second();
    // The hosts' CPU: this box's, which every emulated host shares (sampled here); on real hosts (box_cores()
    // 0: cores of their own) the busiest host as the workers read it over their measured steps (Collect).
    const bool shared_box = cluster_->box_cores() > 0;
    if (shared_box) {
      record->box_cpu = sampler.BusyFraction(from, to);
      record->cpu_stall = sampler.StallFraction(from, to);
    }
    // The busiest link direction over the same window, against what the link could carry in the exchange
    // time of those steps; without link counters (real hosts) a worker's payload sent per step instead.
    // Over the window itself where the exchange fills it (gradient mode), else over the exchange's time.
    const double exchange_time =
        std::min(absl::ToDoubleSeconds(to - from), record->steps * record->exchange_s);
    const std::vector<int64_t> bytes = sampler.CounterDeltas(from, to);
    if (link > 0 && record->exchange_s > 0 && !bytes.empty()) {
      const int64_t busiest = *std::max_element(bytes.begin(), bytes.end());
      if (exchange_time > 0) record->link_util = busiest / (exchange_time * link);
    } else if (!shared_box && link > 0 && record->exchange_s > 0) {
      record->link_util = record->bytes_sent_per_step / (record->exchange_s * link);
    }
    BoundInputs in;
    if (o_.network_link_share && link > 0) {
      in.link_allowed = o_.network_link_share(*record, link, cluster_->latency_seconds());
    }
    // A window of a few sample intervals says nothing about the CPU (a one-node exchange is a memory copy of
    // a millisecond): only the delay program's lateness can mark such a run. Real hosts' CPUs are what the
    // run measures, so only the shared box's hosts are checked for waiting on cores.
    if (shared_box && to - from >= 5 * kSampleInterval) {
      in.link_util = record->link_util;
      in.cpu_stall = record->cpu_stall;
      const HostStall worst = sampler.WorstHostStall(from, to);
      if (worst.host >= 0 && exchange_time > 0) {
        // As a share of the exchange time: replayed compute phases are timed waits, in which no host waits
        // for a core, so the share of the whole window would hide a CPU-bound exchange phase.
        in.host_stall = std::min(1.0, worst.seconds / exchange_time);
        in.stalled_host = worst.host;
        record->host_stall = in.host_stall;
      }
    }
    in.link_packets = record->link_packets;
    in.dropped_packets = record->link_drops;
    // The drops were counted over the whole job (warm-up included), the round trip is the configured one.
    if (record->link_drops > 0 && total_steps > 0 && record->exchange_s > 0) {
      in.loss_time_share = std::min(1.0, static_cast<double>(record->link_drops) / total_steps * 2 *
                                             cluster_->latency_seconds() / record->exchange_s);
    }
    in.delayed_packets = after.packets - before.packets;
    in.late_packets = after.late_over_1ms - before.late_over_1ms;
    const BoundVerdict verdict = ClassifyRun(in);
    record->emulator_bound = verdict.emulator_bound;
    record->bound_reason = verdict.reason;
    record->kept_reason = verdict.kept;
  }

  // <timeline_dir>/<run>, the stem of the run's rank files and of their merge; "" without timelines.
  std::string TimelineStem(const RunRecord& r) const {
    if (o_.timeline_dir.empty() || o_.mode == "gradient") return "";
    std::string name = absl::StrCat(r.workload.empty() ? o_.mode : r.workload, "-", ExchangeName(r.exchange), "-N",
                                    r.nodes);
    if (r.bucket_mb >= 0) absl::StrAppend(&name, "-bucket", r.bucket_mb);
    // A workload given as a path: keep the file name only.
    std::replace(name.begin(), name.end(), '/', '_');
    return absl::StrCat(o_.timeline_dir, "/", name);
  }

  static std::string RankTimeline(const std::string& stem, int rank) {
    return absl::StrCat(stem, "/rank", rank, ".json");
  }

  absl::StatusOr<LaunchContext> Context(const ExchangePlugin& plugin, int nodes, int port_slot) const {
    LaunchContext context;
    context.cluster = cluster_;
    context.binaries = &o_.binaries;
    context.placement = plugin.Place(nodes, o_.ps_servers);
    ASSIGN_OR_RETURN(
        std::vector<int> ports,
        RunPorts(cluster_->emulated(), port_slot, static_cast<int>(context.placement.server_hosts.size())));
    context.master_port = ports[0];
    context.server_ports.assign(ports.begin() + 1, ports.end());
    context.ps_mode = o_.ps_mode;
    context.server_args = o_.server_args;
    if (o_.ps_chunks != PsChunks::kHarness && plugin.family() == Family::kParameterServer) {
      const double link = cluster_->link_bytes_per_second();
      const double latency = cluster_->latency_seconds();
      const int fan_in = PsFanIn(context.placement);
      context.ps_chunk_bytes = o_.ps_chunks == PsChunks::kBdp
                                   ? BdpChunkBytes(link, latency, fan_in)
                                   : CappedChunkBytes(link, latency, fan_in, cluster_->port_buffer_bytes(),
                                                      plugin.id() == Exchange::kPsColocated);
      // Before the user's flags: theirs come later and win.
      if (context.ps_chunk_bytes > 0) {
        context.server_args.insert(context.server_args.begin(),
                                   absl::StrCat("--chunk_bytes=", context.ps_chunk_bytes));
      }
    }
    return context;
  }

  // The flags every worker gets after its exchange's own: rendezvous, limits, and what to exchange.
  std::vector<std::string> SharedWorkerFlags(const LaunchContext& context, const RunBudget& budget,
                                             const RunRecord& record) const {
    const size_t bytes = record.bytes;
    std::vector<std::string> flags = {
        absl::StrCat("--world_size=", context.nodes()), "--local_rank=0",
        absl::StrCat("--master_addr=", cluster_->HostAddress(0)), absl::StrCat("--master_port=", context.master_port),
        absl::StrCat("--timeout=", budget.worker_timeout_s), absl::StrCat("--max_steps=", o_.steps)};
    if (o_.mode == "gradient") {
      flags.push_back(absl::StrCat("--model_bytes=", bytes));
      flags.push_back(absl::StrCat("--warmup_steps=", o_.warmup_steps));
    } else if (o_.mode == "replay") {
      auto profile = profiles_.find(record.workload);
      flags.push_back(absl::StrCat("--workload=", profile != profiles_.end() ? profile->second : record.workload));
      flags.push_back(absl::StrCat("--warmup_steps=", o_.warmup_steps));
      flags.insert(flags.end(), o_.workload_args.begin(), o_.workload_args.end());
    } else {
      flags.insert(flags.end(), {"--model_bytes=0", "--epochs=1000000", "--evaluate=false",
                                 absl::StrCat("--dataset=", o_.dataset), absl::StrCat("--batch_size=", o_.batch_size),
                                 absl::StrCat("--hidden=", o_.hidden)});
      if (!o_.data_dir.empty()) flags.push_back(absl::StrCat("--data_dir=", o_.data_dir));
    }
    if (record.bucket_mb >= 0) flags.push_back(absl::StrCat("--bucket_mb=", WorkerBucketMb(o_, record.bucket_mb)));
    if (record.bucket_mb > 0) {
      flags.push_back(absl::StrCat("--first_bucket_mb=", WorkerBucketMb(o_, o_.first_bucket_mb)));
    }
    // --verbose: rank 0's line per step shows where a run is (ranks print nothing else while it goes well).
    flags.push_back(o_.verbose ? "--log_every=1" : "--log_every=0");
    // After the launcher's own --chunk_bytes (WorkerArgv comes first), before the user's.
    if (context.ps_chunk_bytes > 0) flags.push_back(absl::StrCat("--chunk_bytes=", context.ps_chunk_bytes));
    flags.insert(flags.end(), o_.worker_args.begin(), o_.worker_args.end());
    return flags;
  }

  // Servers first (services), then the N workers.
  std::vector<ProcessSpec> Specs(const ExchangePlugin& plugin, const LaunchContext& context, const RunBudget& budget,
                                 const RunRecord& record, const std::string& timeline_stem) const {
    std::vector<ProcessSpec> specs;
    const ExchangeLauncher& launcher = LauncherFor(plugin.id());
    const Placement& placement = context.placement;
    for (size_t k = 0; k < placement.server_hosts.size(); ++k) {
      specs.push_back({absl::StrCat(plugin.name(), " server ", k),
                       cluster_->Command(placement.server_hosts[k], launcher.ServerArgv(context, k)),
                       /*service=*/true, launcher.server_ready_text()});
    }
    const std::vector<std::string> shared = SharedWorkerFlags(context, budget, record);
    for (int r = 0; r < context.nodes(); ++r) {
      std::vector<std::string> argv = launcher.WorkerArgv(context, r);
      argv.push_back(absl::StrCat("--rank=", r));
      // The worker puts its rank for "{rank}" (trainer/worker_main.cc --timeline).
      if (!timeline_stem.empty()) argv.push_back("--timeline=" + timeline_stem + "/rank{rank}.json");
      argv.insert(argv.end(), shared.begin(), shared.end());
      specs.push_back({absl::StrCat(plugin.name(), " rank ", r), cluster_->Command(placement.worker_hosts[r], argv),
                       /*service=*/false});
    }
    return specs;
  }

  // Runs the job; a port clash (exit code kExitPortInUse) comes back marked for IsPortInUse.
  absl::StatusOr<std::vector<ProcessResult>> Launch(const std::vector<ProcessSpec>& specs,
                                                    const RunBudget& budget) const {
    JobOptions job;
    job.timeout = budget.job_timeout;
    job.service_grace = absl::Seconds(std::max(10, budget.worker_timeout_s / 4));
    job.on_heartbeat = [this] { *progress_ << "." << std::flush; };
    if (o_.verbose) {
      const absl::Time job_start = absl::Now();
      job.on_stderr_line = [this, job_start](const std::string& process, const std::string& line) {
        *progress_ << absl::StrFormat("\n    %7.2fs %s | %s", absl::ToDoubleSeconds(absl::Now() - job_start),
                                      process, line)
                   << std::flush;
      };
    }
    ASSIGN_OR_RETURN(std::vector<ProcessResult> results, RunJob(specs, job));
    if (o_.verbose) {
      for (const ProcessResult& pr : results) {
        *progress_ << absl::StrFormat("\n    %s: ran from %.2fs to %.2fs, exit %d", pr.name, pr.start_s, pr.end_s,
                                      pr.exit_code);
      }
      *progress_ << "\n   ";
    }
    const absl::Status status = JobStatus(results);
    if (!status.ok() && AnyExitedWith(results, kExitPortInUse)) return PortInUseError(status.message());
    RETURN_IF_ERROR(status);
    return results;
  }

  // The workers' result lines: per-step means over ranks (the step time of the slowest rank), and in `marks`
  // (when given) one timeline mark per measured step on the rank that held it back.
  absl::Status Collect(const ExchangePlugin& plugin, const std::vector<ProcessResult>& workers,
                       RunRecord* record, std::vector<TraceMark>* marks) const {
    const int n = record->nodes;
    std::vector<std::vector<double>> ready(n);  // per rank: when each measured step's gradient was complete
    double compute_sum = 0, exchange_sum = 0, forward_sum = 0, backward_sum = 0, exposed_sum = 0;
    for (int r = 0; r < n; ++r) {
      ASSIGN_OR_RETURN(const ResultLines lines, ExtractResults(workers[r].stdout_text));
      if (lines.workers.empty()) {
        return absl::InternalError(absl::StrCat(workers[r].name, " printed no PSRING_RESULT worker line; stdout ends: ",
                                                Tail(workers[r].stdout_text, 500)));
      }
      const proto::WorkerResult& worker = lines.workers.back();
      const double steps = std::max(1, worker.has_steps() ? worker.steps() : o_.steps);
      record->steps = static_cast<int>(steps);
      record->step_s = std::max(record->step_s, worker.step_s());
      record->rank_step_s.push_back(worker.step_s());
      record->step_spread = std::max(record->step_spread, worker.step_spread());
      compute_sum += worker.compute_s() / steps;
      exchange_sum += worker.exchange_s() / steps;
      forward_sum += worker.forward_s() / steps;
      backward_sum += worker.backward_s() / steps;
      exposed_sum += worker.exposed_exchange_s() / steps;
      record->wrong += static_cast<int64_t>(worker.wrong());
      ready[r].assign(worker.step_ready_unix_s().begin(), worker.step_ready_unix_s().end());
      if (worker.measured_start_unix_s() > 0 &&
          (record->measured_start_unix_s == 0 || worker.measured_start_unix_s() < record->measured_start_unix_s)) {
        record->measured_start_unix_s = worker.measured_start_unix_s();
      }
      record->measured_end_unix_s = std::max(record->measured_end_unix_s, worker.measured_end_unix_s());
      if (cluster_->box_cores() <= 0) {  // real hosts: the busiest host the workers saw (-1: none reported)
        record->box_cpu = std::max(record->box_cpu, worker.host_cpu_busy());
        record->cpu_stall = std::max(record->cpu_stall, worker.host_cpu_stall());
      }
      record->bytes_sent_per_step =
          std::max<int64_t>(record->bytes_sent_per_step, static_cast<int64_t>(worker.bytes_sent() / steps));
      if (r == 0) {
        record->test_accuracy = worker.test_accuracy();
        for (const proto::EvalPoint& e : worker.evals()) {
          record->evaluations.push_back({e.step(), e.wall_s(), e.accuracy()});
        }
        record->buckets = static_cast<int>(worker.buckets());
        if (worker.bytes() > 0) record->bytes = static_cast<size_t>(worker.bytes());
      }
    }
    // Throughput from the step time, the same way for every exchange (train mode: N batches per step).
    if (o_.mode == "train" && record->step_s > 0) record->samples_per_s = n * o_.batch_size / record->step_s;
    record->compute_s = compute_sum / n;
    record->exchange_s = exchange_sum / n;
    record->forward_s = forward_sum / n;
    record->backward_s = backward_sum / n;
    record->exposed_s = exposed_sum / n;
    record->backup_workers = plugin.family() == Family::kParameterServer ? BackupWorkersIn(o_.server_args) : 0;
    record->quorum_step_s = QuorumStepSeconds(record->rank_step_s, record->backup_workers);
    const StepAttribution attribution = AttributeSteps(ready);
    if (marks != nullptr) *marks = HeldBackMarks(attribution, ready, record->backup_workers);
    record->straggler_rank = attribution.straggler;
    record->straggler_share = attribution.share;
    record->straggler_lag_s = attribution.median_lag_s;
    record->algbw = record->exchange_s > 0 ? record->bytes / record->exchange_s : 0;
    record->busbw = record->algbw * plugin.BusFactor(n);
    return absl::OkStatus();
  }

  const ScalingOptions& o_;
  Cluster* cluster_;
  std::ostream* progress_;
  const std::map<std::string, std::string> profiles_;
};

Runner::Runner(const ScalingOptions& options, Cluster* cluster, std::ostream* progress,
               std::map<std::string, std::string> profiles)
    : impl_(std::make_unique<Impl>(options, cluster, progress, std::move(profiles))) {}

Runner::~Runner() = default;

RunRecord Runner::Run(Exchange exchange, int nodes, size_t bytes, const std::string& workload, double bucket_mb,
                      int run_index) {
  return impl_->Run(exchange, nodes, bytes, workload, bucket_mb, run_index);
}

}  // namespace psring::bench
