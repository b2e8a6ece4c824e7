#include "bench/scaling.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/report.h"
#include "bench/result_line.h"
#include "common/subprocess.h"
#include "common/socket.h"
#include "common/status_macros.h"

namespace psring::bench {
namespace {

// In the namespaces every run gets fresh fixed ports (rendezvous master, servers K ports from kServerPort): a
// port of the previous run may still be in TIME_WAIT there, but nothing else runs in those port spaces. On
// loopback all hosts share the machine's port space with whatever else runs (other tests, other jobs'
// ephemeral client ports), so there the kernel picks free ports (FreeLoopbackPorts) instead.
constexpr int kMasterPort = 29500;
constexpr int kServerPort = 50051;
constexpr int kPortStride = 300;  // > the most servers of one run (N <= 256)
constexpr int kPortRotation = 16;  // runs before a port is used again
constexpr int kSlowLinkChunkBytes = 32 << 10;         // PS --chunk_bytes on links of 1 Gbit/s or less
constexpr int kSlowLinkPushWindowBytes = 128 << 10;  // PS worker --push_window_bytes there

// The rendezvous master's port followed by one port per server for run `run_index`: fixed and rotating in
// the namespaces, from the kernel on loopback (see above).
absl::StatusOr<std::vector<int>> RunPorts(bool emulated, int run_index, int servers) {
  if (!emulated) return FreeLoopbackPorts(1 + servers);  // Run() retries once if one is taken meanwhile
  const int offset = (run_index % kPortRotation) * kPortStride;
  std::vector<int> ports = {kMasterPort + offset};
  for (int k = 0; k < servers; ++k) ports.push_back(kServerPort + offset + k);
  return ports;
}

// A run that failed because a port was taken by someone else between our choice and the bind.
bool PortClash(const absl::Status& status) {
  return absl::StrContains(status.message(), "Address already in use") ||
         absl::StrContains(status.message(), "port is in use") ||
         absl::StrContains(status.message(), "port in use");
}

std::string FormatBytes(double bytes) {
  if (bytes >= (1 << 30)) return absl::StrFormat("%gGiB", bytes / (1 << 30));
  if (bytes >= (1 << 20)) return absl::StrFormat("%gMiB", bytes / (1 << 20));
  if (bytes >= (1 << 10)) return absl::StrFormat("%gKiB", bytes / (1 << 10));
  return absl::StrFormat("%gB", bytes);
}

struct Placement {
  std::vector<int> worker_hosts;  // host of rank r
  std::vector<int> server_hosts;  // host of shard k
};

Placement Place(Exchange exchange, int nodes, int dedicated_servers) {
  Placement p;
  for (int r = 0; r < nodes; ++r) p.worker_hosts.push_back(r);
  switch (exchange) {
    case Exchange::kRing: break;
    case Exchange::kPsOne: p.server_hosts = {nodes}; break;
    case Exchange::kPsColocated: p.server_hosts = p.worker_hosts; break;
    case Exchange::kPsDedicated:
      for (int k = 0; k < dedicated_servers; ++k) p.server_hosts.push_back(nodes + k);
      break;
  }
  return p;
}

// A generous upper bound of one step's time, for timeouts: the model with a poor effective bandwidth.
double PessimisticStepSeconds(const ScalingOptions& o, Exchange e, int nodes, double bytes, double link_bps) {
  const double bandwidth = link_bps > 0 ? link_bps : 100e6;  // loopback on 2 cores: ~100 MB/s is safe
  const int servers = ServerCount(e, nodes, o.ps_servers);
  double seconds = 0.05 * LatencyTerms(e, nodes, servers) + 3.0 * BusiestLinkBytes(e, nodes, servers, bytes) /
                                                                  bandwidth;
  if (o.mode == "train") seconds += 2.0 * nodes;  // oversubscribed CPU: all workers share the cores
  return seconds + 0.5;
}

class Runner {
 public:
  Runner(const ScalingOptions& options, EmulatedCluster* cluster, std::ostream* progress)
      : o_(options), cluster_(cluster), progress_(progress) {}

  RunRecord Run(Exchange exchange, int nodes, size_t bytes, int run_index) {
    RunRecord record;
    record.exchange = exchange;
    record.nodes = nodes;
    record.servers = ServerCount(exchange, nodes, o_.ps_servers);
    record.bytes = bytes;
    const absl::Time start = absl::Now();
    absl::Status status = RunJobFor(run_index, &record);
    if (!status.ok() && !cluster_->emulated() && PortClash(status)) {
      *progress_ << " port taken by another process, retrying with new ports..." << std::flush;
      status = RunJobFor(run_index, &record);  // loopback ports are new on every call
    }
    record.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
    if (!status.ok()) record.error = std::string(status.message());
    return record;
  }

 private:
  absl::Status RunJobFor(int run_index, RunRecord* record) {
    const Exchange e = record->exchange;
    const int n = record->nodes;
    const Placement placement = Place(e, n, o_.ps_servers);
    ASSIGN_OR_RETURN(const std::vector<int> ports,
                     RunPorts(cluster_->emulated(), run_index, static_cast<int>(placement.server_hosts.size())));
    const int master_port = ports[0];
    const double step_estimate = PessimisticStepSeconds(o_, e, n, record->bytes, cluster_->link_bytes_per_second());
    const int worker_timeout =
        o_.worker_timeout_s > 0 ? o_.worker_timeout_s : static_cast<int>(std::max(60.0, 5 * step_estimate + 30));
    const int total_steps = o_.steps + (o_.mode == "gradient" ? o_.warmup_steps : 0);

    std::vector<std::string> common = {
        absl::StrCat("--world_size=", n), "--local_rank=0",
        absl::StrCat("--master_addr=", cluster_->HostAddress(0)), absl::StrCat("--master_port=", master_port),
        absl::StrCat("--timeout=", worker_timeout), absl::StrCat("--max_steps=", o_.steps)};
    if (o_.mode == "gradient") {
      common.push_back(absl::StrCat("--model_bytes=", record->bytes));
      common.push_back(absl::StrCat("--warmup_steps=", o_.warmup_steps));
    } else {
      common.insert(common.end(), {"--model_bytes=0", "--epochs=1000000", "--log_every=0", "--evaluate=false",
                                   absl::StrCat("--dataset=", o_.dataset),
                                   absl::StrCat("--batch_size=", o_.batch_size),
                                   absl::StrCat("--hidden=", o_.hidden)});
      if (!o_.data_dir.empty()) common.push_back(absl::StrCat("--data_dir=", o_.data_dir));
    }
    common.insert(common.end(), o_.worker_args.begin(), o_.worker_args.end());

    // PS chunks and push window on slow links. A synchronous step pays about 2*N*chunk/B to fill and drain
    // its pipeline (the first range goes back only once every worker pushed it), and N workers pushing into
    // one server link (incast) keep up to N * push window in flight: with the 1 MiB defaults that is 8 MiB
    // against the 625 KB a 50 ms queue holds at 100 Mbit/s, so tail drops and retransmission timeouts stall
    // the whole step. Measured at N = 8, S = 16 MiB on 100 Mbit/s (N*S/B = 10.74 s, 3-step runs): chunk
    // 128 KiB + window 1 MiB 12.0-12.8 s (965-3496 segments retransmitted), 64 KiB + 1 MiB 11.8-12.0 s,
    // 64 KiB + 128-256 KiB 11.6-11.7 s, 32 KiB + 128 KiB 11.38 s (90 segments); the harness with 32 KiB +
    // 128 KiB: 1.05-1.06 x N*S/B for N = 1, 2, 4, 8 (bench/PERFORMANCE.md 7.1). Faster (or unlimited) links
    // keep the defaults, where fewer, larger messages cost less CPU. Flags in --worker_args/--server_args come
    // later and win.
    // The workers keep gRPC's adaptive HTTP/2 receive window: a fixed 256 KiB one (--receive_window_bytes)
    // slows every exchange whose connections each carry a large share of a link (training the MLP, ps-1 at
    // N = 1: 0.25 against 0.17 s per step).
    std::vector<std::string> ps_args;
    std::vector<std::string> ps_worker_args;
    const double link = cluster_->link_bytes_per_second();
    if (link > 0 && link <= 125e6) {
      ps_args.push_back(absl::StrCat("--chunk_bytes=", kSlowLinkChunkBytes));
      ps_worker_args.push_back(absl::StrCat("--push_window_bytes=", kSlowLinkPushWindowBytes));
    }

    std::vector<ProcessSpec> specs;
    std::vector<std::string> server_addrs;
    for (size_t k = 0; k < placement.server_hosts.size(); ++k) {
      const int host = placement.server_hosts[k];
      const int port = ports[1 + k];
      server_addrs.push_back(absl::StrCat(cluster_->HostAddress(host), ":", port));
      std::vector<std::string> argv = {o_.ps_server,
                                       absl::StrCat("--port=", port),
                                       absl::StrCat("--bind_addr=", cluster_->HostAddress(host)),
                                       absl::StrCat("--workers=", n),
                                       absl::StrCat("--shard=", k),
                                       absl::StrCat("--num_shards=", placement.server_hosts.size()),
                                       absl::StrCat("--mode=", o_.ps_mode)};
      argv.insert(argv.end(), ps_args.begin(), ps_args.end());
      argv.insert(argv.end(), o_.server_args.begin(), o_.server_args.end());
      // The server logs "... listening on ADDR:PORT" once it serves; workers start after that.
      specs.push_back({absl::StrCat(ExchangeName(e), " server ", k), cluster_->Command(host, argv),
                       /*service=*/true, /*ready_text=*/"listening on"});
    }
    for (int r = 0; r < n; ++r) {
      const int host = placement.worker_hosts[r];
      std::vector<std::string> argv;
      if (e == Exchange::kRing) {
        argv = {o_.ring_worker, absl::StrCat("--iface_addr=", cluster_->HostAddress(host))};
      } else {
        argv = {o_.ps_worker, absl::StrCat("--servers=", absl::StrJoin(server_addrs, ",")),
                "--shutdown_servers=true"};
        argv.insert(argv.end(), ps_args.begin(), ps_args.end());
        argv.insert(argv.end(), ps_worker_args.begin(), ps_worker_args.end());
      }
      argv.push_back(absl::StrCat("--rank=", r));
      argv.insert(argv.end(), common.begin(), common.end());
      specs.push_back({absl::StrCat(ExchangeName(e), " rank ", r), cluster_->Command(host, argv), false});
    }

    // Link counters around the job: the bytes each host moved.
    const int hosts_used = std::max(n, placement.server_hosts.empty() ? 0 : *std::max_element(
                                                                                 placement.server_hosts.begin(),
                                                                                 placement.server_hosts.end()) + 1);
    std::vector<std::pair<int64_t, int64_t>> before(hosts_used);
    bool counters = cluster_->emulated();
    for (int h = 0; counters && h < hosts_used; ++h) {
      absl::StatusOr<std::pair<int64_t, int64_t>> c = cluster_->HostLinkBytes(h);
      counters = c.ok();
      if (counters) before[h] = *c;
    }

    JobOptions job;
    job.timeout = absl::Seconds(o_.job_timeout_s > 0 ? o_.job_timeout_s
                                                     : 90 + 3 * step_estimate * (total_steps + 1));
    job.service_grace = absl::Seconds(std::max(10, worker_timeout / 4));
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
    RETURN_IF_ERROR(JobStatus(results));

    for (int h = 0; counters && h < hosts_used; ++h) {
      absl::StatusOr<std::pair<int64_t, int64_t>> c = cluster_->HostLinkBytes(h);
      if (!c.ok()) break;
      const double tx = static_cast<double>(c->first - before[h].first) / total_steps;
      const double rx = static_cast<double>(c->second - before[h].second) / total_steps;
      record->link_bytes_per_step = std::max({record->link_bytes_per_step, tx, rx});
    }

    // Workers are the last n processes.
    const size_t first_worker = specs.size() - n;
    double compute_sum = 0, exchange_sum = 0;
    for (int r = 0; r < n; ++r) {
      const ProcessResult& pr = results[first_worker + r];
      ASSIGN_OR_RETURN(std::vector<ResultLine> lines, ExtractResults(pr.stdout_text));
      const ResultLine* worker = nullptr;
      for (const auto& line : lines) {
        if (line.String("role") == "worker") worker = &line;
      }
      if (worker == nullptr) {
        return absl::InternalError(absl::StrCat(pr.name, " printed no PSRING_RESULT worker line; stdout ends: ",
                                                pr.stdout_text.substr(pr.stdout_text.size() > 500
                                                                          ? pr.stdout_text.size() - 500
                                                                          : 0)));
      }
      const double steps = std::max(1.0, worker->Number("steps", o_.steps));
      record->steps = static_cast<int>(steps);
      record->step_s = std::max(record->step_s, worker->Number("step_s"));
      compute_sum += worker->Number("compute_s") / steps;
      exchange_sum += worker->Number("exchange_s") / steps;
      record->wrong += static_cast<int64_t>(worker->Number("wrong"));
      record->bytes_sent_per_step =
          std::max<int64_t>(record->bytes_sent_per_step, static_cast<int64_t>(worker->Number("bytes_sent") / steps));
      if (r == 0) {
        record->test_accuracy = worker->Number("test_accuracy", -1);
        if (worker->Number("bytes") > 0) record->bytes = static_cast<size_t>(worker->Number("bytes"));
      }
    }
    // Throughput from the step time, the same way for every exchange (train mode: N batches per step).
    if (o_.mode == "train" && record->step_s > 0) record->samples_per_s = n * o_.batch_size / record->step_s;
    record->compute_s = compute_sum / n;
    record->exchange_s = exchange_sum / n;
    record->algbw = record->exchange_s > 0 ? record->bytes / record->exchange_s : 0;
    record->busbw = record->algbw * AllReduceBusFactor(n);
    return absl::OkStatus();
  }

  const ScalingOptions& o_;
  EmulatedCluster* cluster_;
  std::ostream* progress_;
};

absl::Status Validate(const ScalingOptions& o) {
  if (o.nodes.empty()) return absl::InvalidArgumentError("--nodes is empty: give node counts like 1,2,4,8");
  for (int n : o.nodes) {
    if (n < 1 || n > 256) return absl::InvalidArgumentError(absl::StrCat("--nodes: ", n, " is not in 1..256"));
  }
  if (o.exchanges.empty()) return absl::InvalidArgumentError("--exchanges is empty");
  if (o.mode != "gradient" && o.mode != "train") {
    return absl::InvalidArgumentError(absl::StrCat("--mode=", o.mode, ": use gradient or train"));
  }
  if (o.mode == "gradient") {
    if (o.model_bytes.empty()) return absl::InvalidArgumentError("--model_bytes is empty");
    for (size_t s : o.model_bytes) {
      if (s < 4) return absl::InvalidArgumentError("--model_bytes: every size must be at least 4 bytes");
    }
  }
  if (o.steps < 1) return absl::InvalidArgumentError("--steps must be at least 1");
  if (o.warmup_steps < 0) return absl::InvalidArgumentError("--warmup_steps must be >= 0");
  if (o.ps_servers < 1) return absl::InvalidArgumentError("--ps_servers must be at least 1");
  bool ring = false, ps = false;
  for (Exchange e : o.exchanges) (e == Exchange::kRing ? ring : ps) = true;
  if (ring && o.ring_worker.empty()) return absl::InvalidArgumentError("no ring worker binary: pass --ring_worker");
  if (ps && (o.ps_server.empty() || o.ps_worker.empty())) {
    return absl::InvalidArgumentError("no PS binaries: pass --ps_server and --ps_worker");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ScalingResult> RunScaling(const ScalingOptions& options, std::ostream* progress) {
  RETURN_IF_ERROR(Validate(options));
  ScalingResult result;
  result.options = options;
  if (options.mode == "train") result.options.model_bytes = {0};  // the MLP's size, reported by the workers

  int hosts = 0;
  for (int n : options.nodes) {
    for (Exchange e : options.exchanges) {
      const Placement p = Place(e, n, options.ps_servers);
      hosts = std::max<int>(hosts, n);
      for (int h : p.server_hosts) hosts = std::max(hosts, h + 1);
    }
  }
  ClusterOptions cluster_options;
  cluster_options.hosts = hosts;
  cluster_options.link = options.link;
  cluster_options.delay = options.delay;
  cluster_options.queue = options.queue;
  cluster_options.force_loopback = options.loopback;
  ASSIGN_OR_RETURN(std::unique_ptr<EmulatedCluster> cluster, EmulatedCluster::Create(cluster_options));
  if (!cluster->emulated()) {
    *progress << "# WARNING: no emulated cluster (" << cluster->fallback_reason()
              << "); running every host on 127.0.0.1 without link limits. Figures are loopback speeds.\n";
    result.fallback_reason = cluster->fallback_reason();
  } else {
    result.emulated = true;
    result.link_bytes_per_second = cluster->link_bytes_per_second();
    *progress << "# emulated cluster: " << hosts << " hosts (network namespaces " << cluster->HostNamespace(0)
              << "...), links " << (options.link.empty() ? "unlimited" : options.link)
              << (options.delay.empty() ? "" : " + " + options.delay + " delay") << " each way\n";
    if (hosts >= 2) {
      absl::StatusOr<double> stream = cluster->MeasureStream(0, 1, 4u << 20);
      if (!stream.ok()) return stream.status();
      result.stream_bytes_per_second = *stream;
      *progress << absl::StrFormat("# link check: one TCP stream host 0 -> host 1 carried %.2f MB/s%s\n",
                                   *stream / 1e6,
                                   result.link_bytes_per_second > 0
                                       ? absl::StrFormat(" = %.1f%% of the link", 100 * *stream /
                                                                                    result.link_bytes_per_second)
                                       : "");
    }
  }

  Runner runner(options, cluster.get(), progress);
  const int total = static_cast<int>(options.nodes.size() * options.exchanges.size() *
                                     result.options.model_bytes.size());
  int index = 0;
  for (int n : options.nodes) {
    for (Exchange e : options.exchanges) {
      for (size_t bytes : result.options.model_bytes) {
        ++index;
        *progress << absl::StrFormat("[%d/%d] %-12s N=%-3d %s ...", index, total, ExchangeName(e), n,
                                     options.mode == "train" ? "MLP" : FormatBytes(bytes))
                  << std::flush;
        RunRecord record = runner.Run(e, n, bytes, index);
        if (record.ok()) {
          *progress << absl::StrFormat(" %.3f s/step (exchange %.3f s, busbw %.2f MB/s, %lld wrong) [%.0f s]\n",
                                       record.step_s, record.exchange_s, record.busbw / 1e6,
                                       static_cast<long long>(record.wrong), record.wall_s);
        } else {
          *progress << " FAILED [" << absl::StrFormat("%.0f s", record.wall_s) << "]: " << record.error << "\n";
        }
        result.records.push_back(std::move(record));
      }
    }
  }
  absl::Status destroyed = cluster->Destroy();
  if (!destroyed.ok()) *progress << "# WARNING: cluster teardown: " << destroyed.message() << "\n";
  FitModels(&result);
  return result;
}

}  // namespace psring::bench
