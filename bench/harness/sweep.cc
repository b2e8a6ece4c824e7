// The harness's sweep (sweep.h): the loop over workloads, N, exchanges, bucket caps and sizes, the cluster it
// runs on and its link check; one run is bench/harness/runner.cc.
#include "bench/harness/sweep.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/emulator/cluster.h"
#include "bench/harness/runner.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "trainer/workload.h"

namespace psring::bench {
namespace {

std::string FormatBytes(double bytes) {
  if (bytes >= (1 << 30)) return absl::StrFormat("%gGiB", bytes / (1 << 30));
  if (bytes >= (1 << 20)) return absl::StrFormat("%gMiB", bytes / (1 << 20));
  if (bytes >= (1 << 10)) return absl::StrFormat("%gKiB", bytes / (1 << 10));
  return absl::StrFormat("%gB", bytes);
}

// Replay mode: every workload's profile read (an unknown one stops the sweep before any run) and, with
// bytes_scale > 1, a copy with every layer's parameters divided by it written for the workers (name -> path).
absl::StatusOr<std::map<std::string, std::string>> ScaledProfiles(const ScalingOptions& options) {
  std::map<std::string, std::string> paths;
  const double scale = options.bytes_scale;
  for (const std::string& name : options.workloads) {
    ASSIGN_OR_RETURN(const proto::Workload real, trainer::LoadWorkload(name));
    if (scale == 1) continue;
    const proto::Workload workload = ScaledWorkload(real, scale);
    std::string json;
    if (!google::protobuf::util::MessageToJsonString(workload, &json).ok()) {
      return absl::InternalError(absl::StrCat("cannot print the scaled profile of ", name));
    }
    std::string file = name;
    std::replace(file.begin(), file.end(), '/', '_');
    const std::string dir = absl::StrCat(std::filesystem::temp_directory_path().string(), "/psring-profiles-", getpid());
    RETURN_IF_ERROR(MakeDirectories(dir));
    paths[name] = absl::StrCat(dir, "/", file, ".json");
    RETURN_IF_ERROR(WriteFileAtomically(paths[name], json));
  }
  return paths;
}

absl::Status Validate(const ScalingOptions& o) {
  if (o.nodes.empty()) return absl::InvalidArgumentError("--nodes is empty: give node counts like 1,2,4,8");
  for (int n : o.nodes) {
    if (n < 1 || n > 256) return absl::InvalidArgumentError(absl::StrCat("--nodes: ", n, " is not in 1..256"));
  }
  if (o.exchanges.empty()) return absl::InvalidArgumentError("--exchanges is empty");
  if (o.mode != "gradient" && o.mode != "train" && o.mode != "replay") {
    return absl::InvalidArgumentError(absl::StrCat("--mode=", o.mode, ": use gradient or train (or --workload)"));
  }
  if (!(o.bytes_scale >= 1) || !std::isfinite(o.bytes_scale)) {
    return absl::InvalidArgumentError(absl::StrCat("--bytes_scale=", o.bytes_scale, ": must be a number >= 1"));
  }
  if (o.mode == "replay" && o.workloads.empty()) {
    return absl::InvalidArgumentError("replay mode needs --workload (e.g. resnet50, or a profile file)");
  }
  for (double mb : o.bucket_mbs) {
    if (!(mb >= 0) || !std::isfinite(mb)) {
      return absl::InvalidArgumentError(absl::StrCat("--bucket_mb: ", mb, " is not a size in MiB >= 0"));
    }
  }
  if (!(o.first_bucket_mb >= 0) || !std::isfinite(o.first_bucket_mb)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--first_bucket_mb=", o.first_bucket_mb, ": must be a size in MiB >= 0 (DDP's: 1)"));
  }
  if (!o.bucket_mbs.empty() && o.mode == "gradient") {
    return absl::InvalidArgumentError(
        "--bucket_mb needs a model whose backward produces layers: use --mode=train or --workload");
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
  for (Exchange e : o.exchanges) {
    for (Binary b : PluginFor(e).binaries()) {
      if (o.binaries.Get(b).empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("no program for ", ExchangeName(e), ": pass --ring_worker, --ps_server and --ps_worker"));
      }
    }
  }
  return absl::OkStatus();
}

// The hosts the largest run needs.
int SweepHosts(const ScalingOptions& o) {
  int hosts = 0;
  for (int n : o.nodes) {
    for (Exchange e : o.exchanges) hosts = std::max(hosts, PluginFor(e).Place(n, o.ps_servers).HostsUsed());
  }
  return hosts;
}

// Builds the cluster, says what it is, and checks the link with one TCP stream.
absl::StatusOr<std::unique_ptr<Cluster>> StartCluster(const ScalingOptions& o, SweepResult* result,
                                                      std::ostream* progress) {
  ClusterOptions cluster_options = o.cluster;
  cluster_options.hosts = SweepHosts(o);
  std::unique_ptr<Cluster> cluster;
  if (o.make_cluster) {
    ASSIGN_OR_RETURN(cluster, o.make_cluster(cluster_options));
  } else {
    ASSIGN_OR_RETURN(cluster, EmulatedCluster::Create(cluster_options));
  }
  result->box_cores = cluster->box_cores();
  if (!cluster->emulated()) {
    *progress << "# WARNING: no emulated cluster (" << cluster->fallback_reason()
              << "); running every host on 127.0.0.1 without link limits. Figures are loopback speeds.\n";
    result->fallback_reason = cluster->fallback_reason();
    return cluster;
  }
  result->emulated = true;
  result->link_bytes_per_second = cluster->link_bytes_per_second();
  result->hosts_tcp = cluster->HostsTcp();
  *progress << "# " << cluster->label() << ": " << cluster->Describe() << "\n" << cluster->LinkReport();
  if (cluster->label() != "emulated cluster") {
    result->hosts_description = cluster->Describe();
    result->link_matrix = cluster->LinkReport();
  }
  result->latency_s = cluster->latency_seconds();
  result->latency_method = cluster->latency_method();
  if (cluster->hosts() >= 2) {
    ASSIGN_OR_RETURN(result->rtt_s, cluster->MeasureRtt(0, 1, /*rounds=*/21));
    // Long enough for TCP's slow start to reach the link rate at this RTT before the measured part.
    const double link = result->link_bytes_per_second;
    const size_t stream_bytes = static_cast<size_t>(
        std::clamp(link > 0 ? link * (0.5 + 40 * result->rtt_s) : 0.0, 4.0 * (1 << 20), 64.0 * (1 << 20)));
    ASSIGN_OR_RETURN(result->stream_bytes_per_second, cluster->MeasureStream(0, 1, stream_bytes));
    const double stream = result->stream_bytes_per_second;
    *progress << absl::StrFormat(
        "# link check: TCP round trip host 0 <-> host 1 %.2f ms%s; one TCP stream host 0 -> host 1 carried %.2f "
        "MB/s%s\n",
        result->rtt_s * 1e3,
        result->latency_s > 0 && result->latency_method != "measured"
            ? absl::StrFormat(" (configured 2 x %.3g ms = %.3g ms)", result->latency_s * 1e3, 2 * result->latency_s * 1e3)
            : "",
        stream / 1e6,
        link > 0 && result->latency_method != "measured" ? absl::StrFormat(" = %.1f%% of the link", 100 * stream / link)
                                                         : "");
  }
  return cluster;
}

// Who held the steps back. With backup workers the steps close without the last B ranks, which fall behind by
// whole steps, so the slowest is named without a lag (step k of one rank is not step k of another).
std::string Attribution(const RunRecord& record) {
  if (record.straggler_rank < 0) return "";
  if (record.backup_workers > 0) {
    return absl::StrFormat(" slowest: rank %d, ready last in %.0f%% of its steps (%d backup worker(s): steps "
                           "close every %.3f s without it)",
                           record.straggler_rank, 100 * record.straggler_share, record.backup_workers,
                           record.quorum_step_s);
  }
  return absl::StrFormat(" held back by rank %d in %.0f%% of steps (ready %.0f ms after the median rank)",
                         record.straggler_rank, 100 * record.straggler_share, record.straggler_lag_s * 1e3);
}

void PrintOutcome(const RunRecord& record, std::ostream* progress) {
  if (record.emulator_bound) *progress << " EMULATOR-BOUND (" << record.bound_reason << ")";
  if (!record.kept_reason.empty()) *progress << " usable (" << record.kept_reason << ")";
  if (record.ok()) {
    // Drops are rare on these links and change TCP's pace where they happen: shown whenever there are some.
    const std::string drops =
        record.link_drops > 0
            ? absl::StrFormat(", links dropped %lld packets (%.2f%%)",
                              static_cast<long long>(record.link_drops), 100 * record.LinkDropShare())
            : "";
    const std::string chunk = record.ps_chunk_bytes > 0
                                  ? absl::StrFormat(", chunk %d KiB by --ps_chunks=%s",
                                                    record.ps_chunk_bytes >> 10, record.ps_chunk_rule)
                                  : "";
    *progress << absl::StrFormat(
        " %.3f s/step (exchange %.3f s%s, busbw %.2f MB/s, %lld wrong%s%s) [%.0f s]%s\n", record.step_s,
        record.exchange_s, record.exposed_s > 0 ? absl::StrFormat(", exposed %.3f s", record.exposed_s) : "",
        record.busbw / 1e6, static_cast<long long>(record.wrong), drops, chunk, record.wall_s,
        Attribution(record));
  } else {
    *progress << " FAILED [" << absl::StrFormat("%.0f s", record.wall_s) << "]: " << record.error << "\n";
  }
}

}  // namespace


absl::StatusOr<SweepResult> RunScaling(const ScalingOptions& options, std::ostream* progress) {
  SweepResult result;
  result.options = options;
  if (!options.workloads.empty()) result.options.mode = "replay";
  RETURN_IF_ERROR(Validate(result.options));
  // The model's size, reported by the workers.
  if (result.options.mode != "gradient") result.options.model_bytes = {0};
  ASSIGN_OR_RETURN(std::unique_ptr<Cluster> cluster, StartCluster(options, &result, progress));

  const ScalingOptions& o = result.options;
  std::map<std::string, std::string> profiles;
  if (o.mode == "replay") {
    ASSIGN_OR_RETURN(profiles, ScaledProfiles(o));
  }
  Runner runner(o, cluster.get(), progress, std::move(profiles));
  const std::vector<size_t>& sizes = o.model_bytes;
  // One pass per workload (just "" outside replay mode) and per bucket cap (-1: not given).
  const std::vector<std::string> workloads = o.workloads.empty() ? std::vector<std::string>{""} : o.workloads;
  const std::vector<double> bucket_mbs = o.bucket_mbs.empty() ? std::vector<double>{-1} : o.bucket_mbs;
  const int total = static_cast<int>(o.nodes.size() * o.exchanges.size() * sizes.size() * workloads.size() *
                                     bucket_mbs.size());
  int index = 0;
  for (const std::string& workload : workloads) {
    for (int n : o.nodes) {
      for (Exchange e : o.exchanges) {
        for (double bucket_mb : bucket_mbs) {
          for (size_t bytes : sizes) {
            ++index;
            const std::string what = o.mode == "gradient" ? FormatBytes(bytes) : o.mode == "train" ? "MLP" : workload;
            *progress << absl::StrFormat("[%d/%d] %-12s N=%-3d %s%s ...", index, total, ExchangeName(e), n, what,
                                         bucket_mb >= 0 ? absl::StrFormat(" bucket %g MB", bucket_mb) : "")
                      << std::flush;
            result.records.push_back(runner.Run(e, n, bytes, workload, bucket_mb, index));
            PrintOutcome(result.records.back(), progress);
          }
        }
      }
    }
  }
  absl::Status destroyed = cluster->Destroy();
  if (!destroyed.ok()) *progress << "# WARNING: cluster teardown: " << destroyed.message() << "\n";
  return result;
}

}  // namespace psring::bench
