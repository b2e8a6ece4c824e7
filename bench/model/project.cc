#include "bench/model/project.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/model/model_file.h"

namespace psring::bench::model {

absl::StatusOr<Projection> Project(const proto::CostModelFile& model, const Conditions& target,
                                   const StepShape& shape) {
  Projection projection;
  std::vector<double> steps_without_round;
  const double largest_bucket = LargestBucketBytes(shape);
  for (Topology topology : AllTopologies()) {
    absl::StatusOr<ExchangeParams> params = ParamsOf(model, topology);
    if (!params.ok()) return params.status();
    absl::StatusOr<StepTime> step = PredictStep(topology, *params, target, shape);
    if (!step.ok()) return step.status();
    absl::StatusOr<PredictionInterval> interval = IntervalOf(
        model, topology,
        [&](const ExchangeParams& p) -> absl::StatusOr<double> {
          absl::StatusOr<StepTime> t = PredictStep(topology, p, target, shape);
          if (!t.ok()) return t.status();
          return t->step_s;
        },
        target, largest_bucket);
    if (!interval.ok()) return interval.status();
    Conditions port = target;
    port.bytes = largest_bucket;
    projection.exchanges.push_back({topology, *step, params->cpu_bytes_per_second * target.cpu_speedup,
                                    ExtrapolationOf(model, topology, target, largest_bucket), *interval,
                                    IncastOf(topology, *params, port)});
    double without_round = step->step_s;
    if (params->window_round_s > 0) {
      ExchangeParams reacts_at_once = *params;
      reacts_at_once.window_round_s = 0;
      absl::StatusOr<StepTime> fast = PredictStep(topology, reacts_at_once, target, shape);
      if (!fast.ok()) return fast.status();
      without_round = fast->step_s;
      projection.exchanges.back().round_share = step->step_s > 0 ? 1 - without_round / step->step_s : 0;
    }
    steps_without_round.push_back(without_round);
  }
  projection.fastest_without_round = static_cast<int>(
      std::min_element(steps_without_round.begin(), steps_without_round.end()) - steps_without_round.begin());
  double second = INFINITY;
  for (size_t i = 0; i < projection.exchanges.size(); ++i) {
    if (projection.exchanges[i].step.step_s < projection.exchanges[projection.fastest].step.step_s) {
      projection.fastest = static_cast<int>(i);
    }
  }
  for (size_t i = 0; i < projection.exchanges.size(); ++i) {
    if (static_cast<int>(i) != projection.fastest) second = std::min(second, projection.exchanges[i].step.step_s);
  }
  const double best = projection.exchanges[projection.fastest].step.step_s;
  projection.margin = best > 0 ? second / best - 1 : 0;
  std::vector<PredictionInterval> intervals;
  for (const ExchangeProjection& e : projection.exchanges) intervals.push_back(e.interval);
  projection.determined = ClearWinner(intervals) == projection.fastest;
  return projection;
}

std::string FormatLinkRate(double bytes_per_second) {
  if (bytes_per_second <= 0) return "unlimited";
  const double bits = 8 * bytes_per_second;
  if (bits >= 1e9) return absl::StrFormat("%g Gbit/s", bits / 1e9);
  if (bits >= 1e6) return absl::StrFormat("%g Mbit/s", bits / 1e6);
  return absl::StrFormat("%g kbit/s", bits / 1e3);
}

std::string FormatLatency(double seconds) {
  if (seconds >= 1) return absl::StrFormat("%g s", seconds);
  if (seconds >= 1e-3) return absl::StrFormat("%g ms", seconds * 1e3);
  return absl::StrFormat("%g us", seconds * 1e6);
}

namespace {

// Where the PS's window round d comes from and what the ROUND mark means; "" for a file without the term.
std::string WindowRoundLine(const proto::CostModelFile& model) {
  const std::string rounds = DescribeWindowRound(model);
  if (rounds.empty()) return "";
  const char* const origin = model.has_window_round_source()
                                 ? ""
                                 : ": the calibration host's wake-ups and its emulator's transit "
                                   "(bench/PERFORMANCE.md 9.29), a host that reacts sooner is faster "
                                   "(--window_round_us=US: the target's)";
  return absl::StrFormat(
      "# PS window round d (each window's cost beyond the round trip) %s%s; ROUND P %%: d "
      "makes P %% of a row's step\n",
      rounds, origin);
}

// What a row bound by its window means: the PS's fitted window is gRPC's HTTP/2 connection window under the
// servers' fixed receive windows, a configuration; "" when no row is window-bound.
std::string WindowBoundLine(const proto::CostModelFile& model, const Projection& projection) {
  std::vector<std::string> windows;
  for (const ExchangeProjection& e : projection.exchanges) {
    if (e.step.bound != Bound::kWindow) continue;
    absl::StatusOr<ExchangeParams> params = ParamsOf(model, e.topology);
    if (!params.ok() || params->window_bytes <= 0) continue;
    windows.push_back(absl::StrFormat("%s %.0f KiB", TopologyName(e.topology), params->window_bytes / 1024));
  }
  if (windows.empty()) return "";
  return absl::StrCat(
      "# bound window: the PS held by its fitted window (", absl::StrJoin(windows, ", "),
      "), gRPC's 64 KiB HTTP/2 connection window that the servers' fixed receive windows "
      "leave each worker: a configuration, not the PS's links; with gRPC's adaptive window the "
      "measured PS ran up to 12x faster at 20-40 ms one-way (bench/PERFORMANCE.md 9.36), which "
      "this model does not cover\n");
}

}  // namespace

std::string FormatProjection(const proto::CostModelFile& model, const Conditions& target,
                             const Projection& projection, const std::string& what, const std::string& cpu_source) {
  const std::string ceilings =
      cpu_source.empty()
          ? absl::StrFormat("as measured on %s (%s), the calibration host (--cpu_model=FILE: the target's)",
                            model.host(), model.date())
          : absl::StrCat("from ", cpu_source);
  std::string out = absl::StrFormat(
      "# PROJECTION (model, not measured): %s, N = %d, link %s, one-way latency %s\n"
      "# CPU ceilings %s%s\n"
      "# %s\n"
      "%s"
      "# %-13s %10s %-21s %11s %12s  %-8s %s\n",
      what, target.nodes, FormatLinkRate(target.link_bytes_per_second), FormatLatency(target.latency_s),
      ceilings, target.cpu_speedup == 1 ? "" : absl::StrFormat(", times cpu_speedup %g", target.cpu_speedup),
      target.port_buffer_bytes > 0
          ? absl::StrFormat(
                "switch ports hold %.0f kB: a PS whose window burst into a server's port exceeds that is "
                "marked INCAST xR, %s",
                target.port_buffer_bytes / 1e3,
                !model.has_incast() ? "likely too fast there (this model file has no loss term)"
                : IncastRoundTripS(target) < kIncastMinRoundTripS
                    ? absl::StrFormat(
                          "likely too fast there: a %.2f ms round trip is below the %.0f ms where the "
                          "incast term holds (Linux's loss timers set the cost)",
                          1e3 * IncastRoundTripS(target), 1e3 * kIncastMinRoundTripS)
                    : absl::StrFormat("its cost added by the incast term (+ms beside the mark; fitted at "
                                      "%.0f-%.0f ms round trips)",
                                      1e3 * model.incast().min_round_trip_s(),
                                      1e3 * model.incast().max_round_trip_s()))
          : "switch ports assumed lossless (no port buffer given: a PS's incast is not marked)",
      WindowRoundLine(model), "exchange", "step_ms",
      absl::StrFormat("%.0f%% interval (ms)", 100 * kIntervalLevel), "exposed_ms", "exchange_ms", "bound",
      "cpu ceiling");
  for (size_t i = 0; i < projection.exchanges.size(); ++i) {
    const ExchangeProjection& e = projection.exchanges[i];
    std::string verdict;
    if (static_cast<int>(i) == projection.fastest) {
      verdict = projection.determined
                    ? absl::StrFormat("   fastest by %.1f %%", 100 * projection.margin)
                    : absl::StrFormat("   fastest point prediction (by %.1f %%), but UNDETERMINED: the intervals "
                                      "overlap",
                                      100 * projection.margin);
    }
    std::string incast = IncastMark(e.incast);
    if (e.step.incast_s > 0) absl::StrAppendFormat(&incast, " +%.2f ms", 1e3 * e.step.incast_s);
    if (e.round_share >= kRoundMarkShare) {
      absl::StrAppendFormat(&incast, "%sROUND %.0f %%", incast.empty() ? "" : "   ", 100 * e.round_share);
    }
    if (static_cast<int>(i) == projection.fastest && projection.fastest_without_round != projection.fastest) {
      absl::StrAppendFormat(&verdict, " (d = 0: %s fastest)",
                            TopologyName(projection.exchanges[projection.fastest_without_round].topology));
    }
    absl::StrAppendFormat(
        &out, "# %-13s %10.2f %-21s %11.2f %12.2f  %-8s %s%s%s%s\n", TopologyName(e.topology),
        1e3 * e.step.step_s, absl::StrFormat("[%.2f, %.2f]", 1e3 * e.interval.lo, 1e3 * e.interval.hi),
        1e3 * e.step.exposed_s, 1e3 * e.step.exchange_s, BoundName(e.step.bound),
        e.cpu_ceiling_bytes_per_second > 0
            ? absl::StrFormat("%.2f GB/s", e.cpu_ceiling_bytes_per_second / 1e9)
            : "none measured",
        verdict, ExtrapolationMark(e.extrapolation).empty() ? "" : "   " + ExtrapolationMark(e.extrapolation),
        incast.empty() ? "" : "   " + incast);
  }
  absl::StrAppend(&out, WindowBoundLine(model, projection));
  return out;
}

}  // namespace psring::bench::model
