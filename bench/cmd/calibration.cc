#include "bench/cmd/calibration.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bench/core/links.h"
#include "bench/model/exchange_topology.h"
#include "common/status_macros.h"

namespace psring::bench {
namespace {

constexpr size_t kMiB = 1u << 20;

// Start-up of one run (processes, rendezvous, gRPC channels) and of one cluster (namespaces, link check), as
// seen on the 2-core box; for the estimate only.
constexpr double kRunStartupS = 3.0;
constexpr double kClusterStartupS = 15.0;
// The estimate's stand-in model: 85 % of the link, 0.3 GB/s of CPU, 0.5 ms per message.
constexpr model::ExchangeParams kEstimateParams{0.5e-3, 0.85, 0, 0.3e9};

double LinkBytesPerSecond(const CalibrationCondition& c) {
  if (c.loopback) return 0;
  absl::StatusOr<double> bits = ParseLinkRate(c.link);
  return bits.ok() ? *bits / 8 : 0;
}

double LatencySeconds(const CalibrationCondition& c) {
  if (c.loopback) return 0;
  absl::StatusOr<double> s = ParseLatency(c.latency);
  return s.ok() ? *s : 0;
}

std::vector<CalibrationCondition> LinkConditions(const std::vector<std::string>& links,
                                                 const std::vector<std::string>& latencies,
                                                 const std::vector<size_t>& sizes, const std::vector<int>& nodes) {
  std::vector<CalibrationCondition> out;
  for (const std::string& link : links) {
    for (const std::string& latency : latencies) out.push_back({link, latency, false, sizes, nodes});
  }
  return out;
}

std::string FormatParameter(const proto::ModelParameter& p, double unit, const char* suffix) {
  if (p.at_bound() && p.value() == 0) return "none (at bound)";
  std::string text = absl::StrFormat("%.4g%s", p.value() / unit, suffix);
  if (p.has_std_error()) absl::StrAppend(&text, absl::StrFormat(" +- %.2g", p.std_error() / unit));
  if (p.at_bound()) absl::StrAppend(&text, " (at bound)");
  return text;
}

template <typename T>
std::string JoinScaled(const google::protobuf::RepeatedField<T>& values, double unit, const char* suffix) {
  std::vector<std::string> parts;
  for (T v : values) parts.push_back(absl::StrFormat("%g%s", v / unit, suffix));
  return absl::StrJoin(parts, ",");
}

}  // namespace

std::string CalibrationCondition::Name() const {
  if (loopback) return "loopback";
  return absl::StrCat(link, " ", latency.empty() ? "0" : latency);
}

// A long round trip, where flow-control windows (TCP, HTTP/2) bind: the window term is fitted here. Both
// presets run it.
std::vector<CalibrationCondition> LongRoundTripConditions() {
  return LinkConditions({"100mbit"}, {"20ms"}, {1 * kMiB, 4 * kMiB}, {2, 4, 8});
}

CalibrationPlan QuickCalibrationPlan() {
  CalibrationPlan plan;
  plan.conditions = LinkConditions({"100mbit", "200mbit"}, {"1ms", "5ms"}, {1 * kMiB, 4 * kMiB}, {2, 4, 8});
  const std::vector<CalibrationCondition> far = LongRoundTripConditions();
  plan.conditions.insert(plan.conditions.end(), far.begin(), far.end());
  plan.conditions.push_back({"", "", true, {16 * kMiB, 64 * kMiB}, {2, 4}});
  return plan;
}

CalibrationPlan DefaultCalibrationPlan() {
  CalibrationPlan plan;
  // 16 MiB at N = 8 would take ps-1 11 s a step at 100 Mbit/s: the large size runs at N = 2, 4 only.
  plan.conditions = LinkConditions({"100mbit", "200mbit"}, {"1ms", "5ms"}, {1 * kMiB, 4 * kMiB}, {2, 4, 8});
  const std::vector<CalibrationCondition> large =
      LinkConditions({"100mbit", "200mbit"}, {"1ms", "5ms"}, {16 * kMiB}, {2, 4});
  plan.conditions.insert(plan.conditions.end(), large.begin(), large.end());
  const std::vector<CalibrationCondition> far = LongRoundTripConditions();
  plan.conditions.insert(plan.conditions.end(), far.begin(), far.end());
  plan.conditions.push_back({"", "", true, {16 * kMiB, 64 * kMiB, 100 * kMiB}, {2, 4, 8}});
  return plan;
}

absl::Status ValidatePlan(const CalibrationPlan& plan) {
  if (plan.conditions.empty()) return absl::InvalidArgumentError("the calibration plan has no condition");
  if (plan.exchanges.empty()) return absl::InvalidArgumentError("the calibration plan has no exchange");
  if (plan.steps < 1 || plan.warmup_steps < 0) {
    return absl::InvalidArgumentError("--steps must be >= 1 and --warmup_steps >= 0");
  }
  for (const CalibrationCondition& c : plan.conditions) {
    if (c.sizes.empty() || c.nodes.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("condition ", c.Name(), ": no sizes or no node counts"));
    }
    for (int n : c.nodes) {
      if (n < 1) return absl::InvalidArgumentError(absl::StrCat("condition ", c.Name(), ": N = ", n, " < 1"));
    }
    if (c.loopback) continue;
    absl::StatusOr<double> bits = ParseLinkRate(c.link);
    if (!bits.ok() || *bits <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "condition ", c.Name(), ": link '", c.link,
          "' is not a rate > 0 (use e.g. 100mbit; unlimited links are the loopback condition)"));
    }
    if (!ParseLatency(c.latency).ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("condition ", c.Name(), ": latency '", c.latency, "' is not a duration (use e.g. 5ms)"));
    }
  }
  return absl::OkStatus();
}

double EstimateSeconds(const CalibrationPlan& plan) {
  double total = 0;
  for (const CalibrationCondition& c : plan.conditions) {
    total += kClusterStartupS;
    for (int n : c.nodes) {
      for (size_t s : c.sizes) {
        for (Exchange e : plan.exchanges) {
          model::Conditions at{n, plan.ps_servers, static_cast<double>(s), LinkBytesPerSecond(c),
                               LatencySeconds(c), 1};
          const double step = model::PredictCollectiveUnchecked(TopologyOf(e), kEstimateParams, at).seconds;
          total += kRunStartupS + (plan.steps + plan.warmup_steps) * step;
        }
      }
    }
  }
  return total;
}

double BoxCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

ConvertedRuns ConvertRecords(const std::vector<RunRecord>& records, double link_bytes_per_second,
                             double latency_s, double link_burst_bytes, double box_cores) {
  ConvertedRuns out;
  for (const RunRecord& r : records) {
    const std::string what = absl::StrFormat("%s N=%d S=%d", ExchangeName(r.exchange), r.nodes, r.bytes);
    if (!r.ok() || r.wrong > 0) {
      ++out.failed;
      out.dropped.push_back(absl::StrCat(what, ": failed (", r.ok() ? absl::StrCat(r.wrong, " wrong") : r.error, ")"));
      continue;
    }
    if (r.emulator_bound) {
      ++out.emulator_bound;
      out.dropped.push_back(absl::StrCat(what, ": EMULATOR-BOUND (", r.bound_reason, ")"));
      continue;
    }
    if ((r.exchange == Exchange::kRing && r.nodes < 2) || !(r.step_s > 0) || r.bytes == 0) {
      ++out.skipped;
      continue;
    }
    model::MeasuredRun run;
    run.topology = TopologyOf(r.exchange);
    run.conditions.nodes = r.nodes;
    run.conditions.servers = r.servers;
    run.conditions.bytes = static_cast<double>(r.bytes);
    run.conditions.link_bytes_per_second = link_bytes_per_second;
    run.conditions.latency_s = latency_s;
    run.conditions.link_burst_bytes = link_burst_bytes;
    run.conditions.box_cores = box_cores;
    run.seconds = r.step_s;
    out.runs.push_back(run);
  }
  return out;
}

absl::StatusOr<Calibration> RunCalibration(const CalibrationPlan& plan, const ScalingOptions& base,
                                           const model::FileInfo& info, std::ostream* progress) {
  RETURN_IF_ERROR(ValidatePlan(plan));
  const absl::Time start = absl::Now();
  Calibration out;
  int index = 0;
  for (const CalibrationCondition& c : plan.conditions) {
    ++index;
    *progress << absl::StrFormat("# calibration condition %d/%d: %s (S = %s bytes, N = %s), %.0f s elapsed\n",
                                 index, plan.conditions.size(), c.Name(), absl::StrJoin(c.sizes, ","),
                                 absl::StrJoin(c.nodes, ","), absl::ToDoubleSeconds(absl::Now() - start));
    ScalingOptions o = base;
    o.mode = "gradient";
    o.workloads.clear();
    o.bucket_mbs.clear();
    o.timeline_dir.clear();
    o.projection = {};
    o.nodes = c.nodes;
    o.model_bytes = c.sizes;
    o.exchanges = plan.exchanges;
    o.steps = plan.steps;
    o.warmup_steps = plan.warmup_steps;
    o.ps_servers = plan.ps_servers;
    o.cluster.force_loopback = c.loopback;
    o.cluster.link = c.loopback ? "" : c.link;
    o.cluster.latency = c.loopback ? "" : c.latency;
    absl::StatusOr<SweepResult> result = RunScaling(o, progress);
    if (!result.ok()) {
      return absl::Status(result.status().code(),
                          absl::StrCat("calibration condition ", c.Name(), ": ", result.status().message()));
    }
    if (!c.loopback && !result->emulated) {
      return absl::FailedPreconditionError(absl::StrCat(
          "calibration condition ", c.Name(), " ran on loopback (", result->fallback_reason,
          "): the link terms need the emulated cluster; run as root (CAP_NET_ADMIN)"));
    }
    ASSIGN_OR_RETURN(const double burst_s, ParseLinkBurst(o.cluster.burst));
    ConvertedRuns converted =
        ConvertRecords(result->records, result->link_bytes_per_second, result->latency_s,
                       static_cast<double>(TbfBurstBytes(result->link_bytes_per_second, burst_s)), BoxCores());
    out.total_runs += static_cast<int>(result->records.size());
    out.failed += converted.failed;
    out.emulator_bound += converted.emulator_bound;
    out.skipped += converted.skipped;
    for (std::string& d : converted.dropped) out.dropped.push_back(absl::StrCat(c.Name(), ": ", d));
    out.runs.insert(out.runs.end(), converted.runs.begin(), converted.runs.end());
  }
  out.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  absl::StatusOr<proto::CostModelFile> file = model::FitModel(out.runs, info);
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrCat("fitting ", out.runs.size(), " usable runs (", out.failed, " failed, ",
                                     out.emulator_bound, " EMULATOR-BOUND dropped): ", file.status().message(),
                                     out.failed + out.emulator_bound > 0
                                         ? ". Runs were dropped: rerun on a quieter machine, or add sizes or N "
                                           "(--sizes, --nodes) so every exchange keeps a usable run"
                                         : ""));
  }
  out.file = *std::move(file);
  return out;
}

std::string FormatCalibration(const Calibration& c) {
  std::string text = absl::StrFormat(
      "# CALIBRATION (frozen; host %s, %s): %d runs, %d fitted, %d failed, %d EMULATOR-BOUND (dropped), %d with "
      "nothing to model; %.0f s\n",
      c.file.host(), c.file.date(), c.total_runs, c.runs.size(), c.failed, c.emulator_bound, c.skipped, c.wall_s);
  absl::StrAppend(&text, absl::StrFormat("# %-13s %-22s %-16s %-24s %-22s %7s %7s %5s\n", "exchange",
                                         "software (us/msg)", "efficiency", "window (KiB)", "CPU ceiling (MB/s)",
                                         "med|e|", "max|e|", "runs"));
  for (const proto::ExchangeModel& e : c.file.exchanges()) {
    absl::StrAppend(&text, absl::StrFormat("# %-13s %-22s %-16s %-24s %-22s %6.1f%% %6.1f%% %5d\n", e.exchange(),
                                           FormatParameter(e.software_s(), 1e-6, ""),
                                           FormatParameter(e.efficiency(), 1, ""),
                                           FormatParameter(e.window_bytes(), 1024, ""),
                                           FormatParameter(e.cpu_bytes_per_second(), 1e6, ""),
                                           100 * e.median_abs_rel_error(), 100 * e.max_abs_rel_error(),
                                           e.coverage().runs()));
  }
  for (const proto::ExchangeModel& e : c.file.exchanges()) {
    const proto::Coverage& cov = e.coverage();
    absl::StrAppend(&text, absl::StrFormat("#   %s covers links %s MB/s, latencies %s ms, N %s, S %s MiB, K %s\n",
                                           e.exchange(), JoinScaled(cov.link_bytes_per_second(), 1e6, ""),
                                           JoinScaled(cov.latency_s(), 1e-3, ""), absl::StrJoin(cov.nodes(), ","),
                                           JoinScaled(cov.bytes(), kMiB, ""), absl::StrJoin(cov.servers(), ",")));
  }
  for (const std::string& d : c.dropped) absl::StrAppend(&text, "# dropped: ", d, "\n");
  return text;
}

}  // namespace psring::bench
