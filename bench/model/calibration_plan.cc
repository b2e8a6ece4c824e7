// The calibration plan's presets, its check and estimate, and the records -> measured runs conversion
// (calibration_plan.h).
#include "bench/model/calibration_plan.h"


#include <algorithm>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/core/links.h"
#include "bench/model/collective.h"
#include "bench/model/exchange_topology.h"

namespace psring::bench {
namespace {

constexpr size_t kMiB = 1u << 20;

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

// Long round trips, where flow-control windows (TCP, HTTP/2, the PS's push window) bind: the window term is
// fitted here, from 12 to 50 ms one way (issue 33: a model calibrated at 20 ms at most was 22-34 % fast for
// the PS at 20-50 ms). Both presets run them; 50 ms at N = 2, 4 and 2 MiB only (ps-1 at N = 8 would take 6 s
// a step). 12 ms at N = 3, 5 and 8 with 2 MiB: one server's streams with the window and link terms close,
// where the PS's window queueing (collective.h) grows with the streams (PERFORMANCE.md 9.14; 9.15: without
// N = 8 there the term's standard error was 26 % of it, and it was dropped). The estimate stays within the
// quick preset's 22 minutes (21 with 8 measured steps a run); on this box it ran 27 (1596 s, 2026-11-28).
std::vector<CalibrationCondition> LongRoundTripConditions() {
  std::vector<CalibrationCondition> out = LinkConditions({"100mbit"}, {"12ms"}, {2 * kMiB}, {3, 5, 8});
  const std::vector<CalibrationCondition> mid =
      LinkConditions({"100mbit"}, {"20ms"}, {1 * kMiB, 4 * kMiB}, {2, 4, 8});
  out.insert(out.end(), mid.begin(), mid.end());
  const std::vector<CalibrationCondition> far = LinkConditions({"100mbit"}, {"50ms"}, {2 * kMiB}, {2, 4});
  out.insert(out.end(), far.begin(), far.end());
  return out;
}

}  // namespace

std::string CalibrationCondition::Name() const {
  if (loopback) return "loopback";
  return absl::StrCat(link, " ", latency.empty() ? "0" : latency);
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

bool IsSupplementary(const CalibrationPlan& plan) {
  for (Exchange e : AllExchanges()) {
    if (std::find(plan.exchanges.begin(), plan.exchanges.end(), e) == plan.exchanges.end()) return true;
  }
  return false;
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

double EstimateConditionSeconds(const CalibrationPlan& plan, const CalibrationCondition& c) {
  double total = kClusterStartupS;
  for (int n : c.nodes) {
    for (size_t s : c.sizes) {
      for (Exchange e : plan.exchanges) {
        model::Conditions at{
            n, plan.ps_servers, static_cast<double>(s), LinkBytesPerSecond(c), LatencySeconds(c), 1};
        const double step = model::PredictCollectiveUnchecked(TopologyOf(e), kEstimateParams, at).seconds;
        total += kRunStartupS + (plan.steps + plan.warmup_steps) * step;
      }
    }
  }
  return total;
}

double EstimateSeconds(const CalibrationPlan& plan) {
  double total = 0;
  for (const CalibrationCondition& c : plan.conditions) total += EstimateConditionSeconds(plan, c);
  return total;
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
    // The model has no loss term: a run whose links dropped packets would pull the lossless terms toward what
    // TCP's loss recovery cost (bench/PERFORMANCE.md 9.22). Left out and listed, as validation shows its
    // miss.
    if (r.lossy()) {
      ++out.lossy;
      out.dropped.push_back(
          absl::StrFormat("%s: the links dropped %.2f%% of their packets (loss: not in the model)", what,
                          100 * r.LinkDropShare()));
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

}  // namespace psring::bench
