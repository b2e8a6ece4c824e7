// Held-out validation's plans, selection, predictions and statistics (held_out.h).
#include "bench/model/held_out.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "bench/core/links.h"
#include "bench/model/calibration_plan.h"
#include "bench/model/collective.h"
#include "bench/model/exchange_topology.h"
#include "bench/model/model_file.h"
#include "bench/model/uncertainty.h"
#include "bench/model/workload_step.h"
#include "common/status_macros.h"
#include "trainer/exchange.h"
#include "trainer/workload.h"

namespace psring::bench {
namespace {

constexpr size_t kMiB = 1u << 20;
constexpr double kReplayBytesScale = 64;  // as //bench:compare's replay part

std::string SizeName(double bytes) {
  if (bytes >= kMiB) return absl::StrFormat("%gMiB", bytes / kMiB);
  return absl::StrFormat("%gKiB", bytes / 1024);
}

bool Near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)); }

bool Contains(const std::set<double>& values, double v) {
  return std::any_of(values.begin(), values.end(), [v](double x) { return Near(x, v); });
}

// The relative errors of `rows` where `take` holds, (predicted - measured) / measured.
// Which runs an error statistic is over.
// kIncast(Un)markedSteps: usable PS runs whose port buffer is known (ValidationRow::incast > 0), marked or
// not.
enum class Over {
  kUsableSteps,
  kComparableExposed,
  kMeasuredSteps,
  kLossySteps,
  kLosslessSteps,
  kIncastMarkedSteps,
  kIncastUnmarkedSteps,
  kIncastCostedSteps,          // usable runs whose prediction includes an incast cost
  kIncastCostedLosslessSteps,  // the same, judged without it
  kBoxWaitedSteps,             // usable runs whose busiest host waited for a core >= kBoxWaitShare
  kBoxQuietSteps               // usable runs whose hosts waited less (unknown waits: neither)
};

std::vector<double> Errors(const std::vector<ValidationRow>& rows, Over over) {
  const bool exposed = over == Over::kComparableExposed;
  std::vector<double> errors;
  for (const ValidationRow& r : rows) {
    const bool in = over == Over::kUsableSteps           ? r.usable()
                    : over == Over::kComparableExposed   ? r.exposed_comparable()
                    : over == Over::kLossySteps          ? r.usable() && r.lossy()
                    : over == Over::kLosslessSteps       ? r.usable() && !r.lossy()
                    : over == Over::kIncastMarkedSteps   ? r.usable() && r.incast > 0 && r.incast_marked()
                    : over == Over::kIncastUnmarkedSteps ? r.usable() && r.incast > 0 && !r.incast_marked()
                    : over == Over::kIncastCostedSteps || over == Over::kIncastCostedLosslessSteps
                        ? r.usable() && r.incast_s > 0
                    : over == Over::kBoxWaitedSteps ? r.usable() && r.box_waited()
                    : over == Over::kBoxQuietSteps  ? r.usable() && r.host_stall >= 0 && !r.box_waited()
                                                    : r.measured_step_s > 0;
    if (!in) continue;
    const double predicted =
        over == Over::kIncastCostedLosslessSteps ? r.predicted_lossless_step_s : r.predicted_step_s;
    errors.push_back(exposed ? model::RelativeError(r.predicted_exposed_s, r.measured_exposed_s)
                             : model::RelativeError(predicted, r.measured_step_s));
  }
  return errors;
}

absl::StatusOr<model::ErrorSummary> SummaryOf(const std::vector<double>& errors) {
  if (errors.empty()) return model::ErrorSummary{};
  return model::SummarizeErrors(errors);
}

}  // namespace

std::string HeldOutSweep::Name() const {
  std::string name = absl::StrCat(link, " ", latency.empty() ? "0" : latency,
                                  queue.empty() ? "" : absl::StrCat(" queue ", queue));
  if (workloads.empty()) return absl::StrCat(name, " gradient");
  return absl::StrCat(name, " replay ", absl::StrJoin(workloads, ","),
                      bytes_scale != 1 ? absl::StrCat(" bytes/", bytes_scale) : "");
}

std::string HeldOutCondition::Name() const {
  std::string name = absl::StrCat(link, " ", latency.empty() ? "0" : latency,
                                  queue.empty() ? "" : absl::StrCat(" queue ", queue), " N=", nodes, " ");
  if (!replay()) return absl::StrCat(name, SizeName(static_cast<double>(bytes)));
  absl::StrAppend(&name, workload, bytes_scale != 1 ? absl::StrCat("/", bytes_scale) : "");
  return absl::StrCat(name, bucket_mb > 0 ? absl::StrFormat(" bucketed %gMB", bucket_mb) : " flat");
}

bool HeldOutCondition::Matches(const RunRecord& r) const {
  if (r.nodes != nodes) return false;
  if (!replay()) return r.bytes == bytes;
  return r.workload == workload && Near(r.bucket_mb, bucket_mb);
}

ValidationPlan QuickValidationPlan() {
  ValidationPlan plan;
  plan.sweeps.push_back({"150mbit", "2ms", {4, 12}, {4 * kMiB}, {}, 1, {}});
  plan.sweeps.push_back({"150mbit", "20ms", {8, 16}, {4 * kMiB}, {}, 1, {}});
  plan.sweeps.push_back({"150mbit", "2ms", {4, 8}, {}, {"resnet50"}, kReplayBytesScale, {0, 25}});
  plan.noise_sweep = 0;
  plan.noise_runs = 2;
  return plan;
}

ValidationPlan FullValidationPlan() {
  ValidationPlan plan;
  plan.sweeps.push_back({"150mbit", "2ms", {2, 4, 8, 12, 16}, {1 * kMiB, 4 * kMiB}, {}, 1, {}});
  plan.sweeps.push_back({"150mbit", "20ms", {4, 8, 16}, {4 * kMiB}, {}, 1, {}});
  plan.sweeps.push_back({"100mbit", "5ms", {12, 16}, {4 * kMiB}, {}, 1, {}});
  plan.sweeps.push_back(
      {"150mbit", "2ms", {4, 8}, {}, {"resnet50", "vgg16", "bert_base"}, kReplayBytesScale, {0, 25}});
  plan.sweeps.push_back({"150mbit", "20ms", {8}, {}, {"resnet50"}, kReplayBytesScale, {0, 25}});
  plan.noise_sweep = 1;
  plan.noise_runs = 2;
  return plan;
}

absl::StatusOr<std::vector<HeldOutCondition>> ExpandSweep(const HeldOutSweep& sweep) {
  absl::StatusOr<double> bits = ParseLinkRate(sweep.link);
  if (!bits.ok() || *bits <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("sweep ", sweep.Name(), ": link '", sweep.link,
                                                   "' is not a rate > 0 (use e.g. 150mbit)"));
  }
  absl::StatusOr<double> latency = ParseLatency(sweep.latency);
  if (!latency.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("sweep ", sweep.Name(), ": latency '", sweep.latency,
                                                   "' is not a duration (use e.g. 2ms)"));
  }
  if (sweep.nodes.empty() || (sweep.workloads.empty() ? sweep.sizes.empty() : sweep.bucket_mbs.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("sweep ", sweep.Name(),
                     ": needs node counts and sizes (gradient) or bucket caps (replay; 0 = flat)"));
  }
  double queue_s = 0;
  if (!sweep.queue.empty()) {
    absl::StatusOr<double> queue = ParseQueue(sweep.queue);
    if (!queue.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("sweep ", sweep.Name(), ": queue '", sweep.queue,
                                                     "' is not a duration > 0 (use e.g. 5ms)"));
    }
    queue_s = *queue;
  }
  if (!(sweep.bytes_scale >= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("sweep ", sweep.Name(), ": bytes_scale must be >= 1"));
  }
  std::vector<HeldOutCondition> out;
  HeldOutCondition base;
  base.link = sweep.link;
  base.latency = sweep.latency;
  base.queue = sweep.queue;
  base.queue_s = queue_s;
  base.link_bytes_per_second = *bits / 8;
  base.latency_s = *latency;
  base.bytes_scale = sweep.workloads.empty() ? 1 : sweep.bytes_scale;
  for (int n : sweep.nodes) {
    HeldOutCondition c = base;
    c.nodes = n;
    if (sweep.workloads.empty()) {
      for (size_t s : sweep.sizes) {
        c.bytes = s;
        out.push_back(c);
      }
      continue;
    }
    for (const std::string& w : sweep.workloads) {
      for (double mb : sweep.bucket_mbs) {
        c.workload = w;
        c.bucket_mb = mb;
        out.push_back(c);
      }
    }
  }
  return out;
}

bool CalibrationCovers(const proto::CostModelFile& model, const HeldOutCondition& condition) {
  if (condition.replay() || !condition.queue.empty()) return false;
  std::set<double> links, latencies, bytes, nodes;
  for (const proto::ExchangeModel& e : model.exchanges()) {
    links.insert(e.coverage().link_bytes_per_second().begin(), e.coverage().link_bytes_per_second().end());
    latencies.insert(e.coverage().latency_s().begin(), e.coverage().latency_s().end());
    bytes.insert(e.coverage().bytes().begin(), e.coverage().bytes().end());
    nodes.insert(e.coverage().nodes().begin(), e.coverage().nodes().end());
  }
  return Contains(links, condition.link_bytes_per_second) && Contains(latencies, condition.latency_s) &&
         Contains(nodes, condition.nodes) && Contains(bytes, static_cast<double>(condition.bytes));
}

absl::StatusOr<HeldOutSelection> SelectHeldOut(const ValidationPlan& plan,
                                               const proto::CostModelFile& model) {
  HeldOutSelection out;
  out.plan = plan;
  out.plan.sweeps.clear();
  for (size_t i = 0; i < plan.sweeps.size(); ++i) {
    const HeldOutSweep& sweep = plan.sweeps[i];
    ASSIGN_OR_RETURN(const std::vector<HeldOutCondition> conditions, ExpandSweep(sweep));
    std::set<int> covered_nodes;
    for (const HeldOutCondition& c : conditions) {
      if (!CalibrationCovers(model, c)) continue;
      covered_nodes.insert(c.nodes);
      out.rejected.push_back(absl::StrCat(
          c.Name(),
          ": calibration covers its link rate, latency, N and S (the model may have been fitted on it)"));
    }
    HeldOutSweep kept = sweep;
    kept.nodes.clear();
    for (int n : sweep.nodes) {
      if (covered_nodes.count(n) == 0) kept.nodes.push_back(n);
    }
    if (kept.nodes.empty()) {
      if (static_cast<int>(i) == plan.noise_sweep) out.plan.noise_sweep = -1;
      continue;
    }
    if (static_cast<int>(i) == plan.noise_sweep)
      out.plan.noise_sweep = static_cast<int>(out.plan.sweeps.size());
    out.plan.sweeps.push_back(kept);
  }
  if (out.plan.sweeps.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "every validation condition is covered by the calibration (", absl::StrJoin(out.rejected, "; "),
        "): choose other link rates, latencies or node counts than calibration's"));
  }
  if (out.plan.noise_sweep < 0) out.plan.noise_sweep = 0;
  return out;
}

absl::StatusOr<model::StepShape> ShapeOf(const HeldOutCondition& condition) {
  if (!condition.replay()) return model::FlatStep(0, 0, static_cast<double>(condition.bytes));
  ASSIGN_OR_RETURN(const proto::Workload real, trainer::LoadWorkload(condition.workload));
  // What the workers get: the profile and both caps divided by bytes_scale.
  return model::ReplayedWorkloadStep(real, condition.bytes_scale, condition.bucket_mb,
                                     trainer::kDefaultFirstBucketMb);
}

absl::StatusOr<std::vector<ValidationRow>> PredictCondition(const proto::CostModelFile& model,
                                                            const HeldOutCondition& condition,
                                                            const model::StepShape& shape,
                                                            const std::vector<Exchange>& exchanges,
                                                            int ps_servers) {
  std::vector<ValidationRow> rows;
  for (Exchange e : exchanges) {
    const model::Topology topology = TopologyOf(e);
    ASSIGN_OR_RETURN(const model::ExchangeParams params, model::ParamsOf(model, topology));
    model::Conditions at;
    at.nodes = condition.nodes;
    at.servers = ps_servers;
    at.link_bytes_per_second = condition.link_bytes_per_second;
    at.latency_s = condition.latency_s;
    at.link_burst_bytes = condition.link_burst_bytes;
    at.box_cores = condition.box_cores;
    at.port_buffer_bytes = condition.port_buffer_bytes();  // the incast term's (model files that have one)
    ASSIGN_OR_RETURN(const model::StepTime step, model::PredictStep(topology, params, at, shape));
    const double bytes = condition.replay() ? 0 : static_cast<double>(condition.bytes);  // a flat step's S
    ASSIGN_OR_RETURN(const model::PredictionInterval interval,
                     model::IntervalOf(
                         model, topology,
                         [&](const model::ExchangeParams& p) -> absl::StatusOr<double> {
                           ASSIGN_OR_RETURN(const model::StepTime t,
                                            model::PredictStep(topology, p, at, shape));
                           return t.step_s;
                         },
                         at, bytes));
    ValidationRow row;
    row.condition = condition.Name();
    row.exchange = e;
    row.nodes = condition.nodes;
    row.predicted_step_s = step.step_s;
    row.predicted_lo_s = interval.lo;
    row.predicted_hi_s = interval.hi;
    // Gradient mode has no compute: the whole step is the exchange, all of it exposed.
    row.predicted_exposed_s = condition.replay() ? step.exposed_s : step.step_s;
    row.bound = model::BoundName(step.bound);
    row.extrapolation = model::ExtrapolationOf(model, topology, at, bytes).factor;
    // The burst of the step's largest collective (a replayed step's largest bucket).
    model::Conditions port = at;
    port.bytes = condition.replay() ? model::LargestBucketBytes(shape) : bytes;
    row.incast = model::IncastOf(topology, params, port).ratio();
    row.incast_s = step.incast_s;  // the largest collective's, as `port`
    row.predicted_lossless_step_s = step.step_s;
    if (params.incast_round_trips > 0) {  // a replayed step may hide part of the cost behind compute
      model::ExchangeParams lossless = params;
      lossless.incast_round_trips = 0;
      ASSIGN_OR_RETURN(const model::StepTime t, model::PredictStep(topology, lossless, at, shape));
      row.predicted_lossless_step_s = t.step_s;
    }
    rows.push_back(row);
  }
  return rows;
}

absl::StatusOr<ValidationSummary> Summarize(const std::vector<ValidationRow>& rows,
                                            const std::vector<std::vector<double>>& repeats) {
  ValidationSummary s;
  s.rows = static_cast<int>(rows.size());
  for (const ValidationRow& r : rows) {
    if (r.usable()) ++s.usable;
    if (r.emulator_bound) ++s.emulator_bound;
    if (r.out_of_time) {
      ++s.out_of_time;
    } else if (!r.emulator_bound && !r.usable()) {
      ++s.failed;
    }
    if (r.usable() && r.predicted_hi_s > 0) {
      const bool inside = r.measured_step_s >= r.predicted_lo_s && r.measured_step_s <= r.predicted_hi_s;
      ++s.interval_rows;
      s.interval_inside += inside;
      if (r.incast_s > 0) {
        ++s.incast_costed_interval_rows;
        s.incast_costed_interval_inside += inside;
      }
      if (r.beyond_coverage()) {
        ++s.interval_rows_beyond;
        s.interval_inside_beyond += inside;
      }
    }
  }
  ASSIGN_OR_RETURN(s.step, SummaryOf(Errors(rows, Over::kUsableSteps)));
  ASSIGN_OR_RETURN(s.step_all, SummaryOf(Errors(rows, Over::kMeasuredSteps)));
  ASSIGN_OR_RETURN(s.step_lossy, SummaryOf(Errors(rows, Over::kLossySteps)));
  ASSIGN_OR_RETURN(s.step_lossless, SummaryOf(Errors(rows, Over::kLosslessSteps)));
  s.lossy_costed = static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const ValidationRow& r) {
    return r.usable() && r.lossy() && r.incast_s > 0;
  }));
  ASSIGN_OR_RETURN(s.step_box_waited, SummaryOf(Errors(rows, Over::kBoxWaitedSteps)));
  ASSIGN_OR_RETURN(s.step_box_quiet, SummaryOf(Errors(rows, Over::kBoxQuietSteps)));
  ASSIGN_OR_RETURN(s.exposed, SummaryOf(Errors(rows, Over::kComparableExposed)));
  for (const ValidationRow& r : rows) {
    if (!r.usable() || r.exchange == Exchange::kRing || r.drop_share < 0 || r.incast <= 0) continue;
    (r.incast_marked() ? s.incast_marked : s.incast_unmarked) += 1;
    if (r.lossy()) (r.incast_marked() ? s.incast_marked_lossy : s.incast_unmarked_lossy) += 1;
  }
  ASSIGN_OR_RETURN(s.step_incast_marked, SummaryOf(Errors(rows, Over::kIncastMarkedSteps)));
  ASSIGN_OR_RETURN(s.step_incast_unmarked, SummaryOf(Errors(rows, Over::kIncastUnmarkedSteps)));
  ASSIGN_OR_RETURN(s.step_incast_costed, SummaryOf(Errors(rows, Over::kIncastCostedSteps)));
  ASSIGN_OR_RETURN(s.step_incast_costed_lossless, SummaryOf(Errors(rows, Over::kIncastCostedLosslessSteps)));
  ASSIGN_OR_RETURN(s.band, model::ComputeTieBand(repeats));
  // Conditions in first-seen order, each with every exchange predicted for it (the printed winner is the
  // fastest of all of them); runs that are not usable are marked excluded.
  std::vector<model::ConditionResult> conditions;
  for (const ValidationRow& r : rows) {
    if (r.out_of_time) continue;  // nothing was measured: not a condition the model could be judged on
    auto it = std::find_if(conditions.begin(), conditions.end(),
                           [&](const model::ConditionResult& c) { return c.condition == r.condition; });
    if (it == conditions.end()) it = conditions.insert(conditions.end(), {r.condition, {}});
    it->exchanges.push_back({ExchangeName(r.exchange), r.predicted_step_s, r.measured_step_s, !r.usable(),
                             r.predicted_lo_s, r.predicted_hi_s});
  }
  conditions.erase(std::remove_if(conditions.begin(), conditions.end(),
                                  [](const model::ConditionResult& c) { return c.exchanges.size() < 2; }),
                   conditions.end());
  ASSIGN_OR_RETURN(s.winners, model::ScoreWinners(conditions, s.band.band));
  return s;
}

namespace {

// A rate in bits per second in tc's units, for the emulated links (project.h's FormatLinkRate is the display
// form, "32.5 Mbit/s"): whole mbit or kbit where it is one, else bit.
std::string TcLinkRate(double bits) {
  const int64_t b = std::llround(bits);
  if (b % 1000000 == 0) return absl::StrCat(b / 1000000, "mbit");
  if (b % 1000 == 0) return absl::StrCat(b / 1000, "kbit");
  return absl::StrCat(b, "bit");
}

// Seconds as a duration flag, to the microsecond ("24ms", "1.5ms").
std::string FormatSeconds(double seconds) {
  return absl::FormatDuration(absl::Microseconds(std::llround(seconds * 1e6)));
}

}  // namespace

absl::StatusOr<std::string> DilateDuration(const std::string& duration, double factor) {
  absl::Duration d;
  if (!absl::ParseDuration(duration, &d) || d < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot dilate '", duration, "': not a duration like 10ms"));
  }
  return FormatSeconds(absl::ToDoubleSeconds(d) * factor);
}

absl::StatusOr<ValidationPlan> DilatePlan(const ValidationPlan& plan, double factor,
                                          const std::string& cluster_queue) {
  if (!std::isfinite(factor) || factor < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--time_dilation=", factor,
                     ": give a factor >= 1 (2: links at half their rate, latencies and queues x 2)"));
  }
  ValidationPlan out = plan;
  if (factor == 1) return out;
  for (HeldOutSweep& sweep : out.sweeps) {
    if (!sweep.workloads.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sweep ", sweep.Name(),
          " replays a workload: time dilation stretches the network only, so its compute ",
          "would not stretch with it; dilate gradient sweeps, or run this one without --time_dilation"));
    }
    ASSIGN_OR_RETURN(const double bits, ParseLinkRate(sweep.link));
    if (bits > 0) {
      if (bits / factor < 1e3) {
        return absl::InvalidArgumentError(absl::StrCat("sweep ", sweep.Name(), ": ", sweep.link, " / ",
                                                       factor,
                                                       " is below 1 kbit/s; use a smaller --time_dilation"));
      }
      sweep.link = TcLinkRate(bits / factor);
    }
    ASSIGN_OR_RETURN(const double latency_s, ParseLatency(sweep.latency));
    if (latency_s > 0) sweep.latency = FormatSeconds(latency_s * factor);
    ASSIGN_OR_RETURN(const double queue_s, ParseQueue(sweep.queue.empty() ? cluster_queue : sweep.queue));
    sweep.queue = FormatSeconds(queue_s * factor);
  }
  return out;
}

absl::StatusOr<double> EstimateSweepSeconds(const ValidationPlan& plan, int i,
                                            const proto::CostModelFile& model) {
  if (i < 0 || i >= static_cast<int>(plan.sweeps.size())) {
    return absl::OutOfRangeError(absl::StrCat("sweep ", i, " is not in a plan of ", plan.sweeps.size()));
  }
  ASSIGN_OR_RETURN(const std::vector<HeldOutCondition> conditions, ExpandSweep(plan.sweeps[i]));
  double sweep = kClusterStartupS;
  for (const HeldOutCondition& c : conditions) {
    ASSIGN_OR_RETURN(const model::StepShape shape, ShapeOf(c));
    ASSIGN_OR_RETURN(const std::vector<ValidationRow> rows,
                     PredictCondition(model, c, shape, plan.exchanges, plan.ps_servers));
    for (const ValidationRow& r : rows)
      sweep += kRunStartupS + (plan.steps + plan.warmup_steps) * r.predicted_step_s;
  }
  return sweep;
}

absl::StatusOr<double> EstimateValidationSeconds(const ValidationPlan& plan,
                                                 const proto::CostModelFile& model) {
  double total = 0;
  for (size_t i = 0; i < plan.sweeps.size(); ++i) {
    ASSIGN_OR_RETURN(const double sweep, EstimateSweepSeconds(plan, static_cast<int>(i), model));
    total += sweep * (static_cast<int>(i) == plan.noise_sweep ? std::max(1, plan.noise_runs) : 1);
  }
  return total;
}

}  // namespace psring::bench
