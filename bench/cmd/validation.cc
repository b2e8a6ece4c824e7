#include "bench/cmd/validation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bench/cmd/calibration.h"
#include "bench/core/links.h"
#include "bench/model/exchange_topology.h"
#include "bench/model/model_file.h"
#include "bench/model/workload_step.h"
#include "bench/report/plot.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "trainer/workload.h"

namespace psring::bench {
namespace {

constexpr size_t kMiB = 1u << 20;
constexpr double kReplayBytesScale = 64;  // as //bench:compare's replay part
// Start-up of one run and of one cluster, for the estimate (as bench/calibration.cc's).
constexpr double kRunStartupS = 3.0;
constexpr double kClusterStartupS = 15.0;

std::string SizeName(double bytes) {
  if (bytes >= kMiB) return absl::StrFormat("%gMiB", bytes / kMiB);
  return absl::StrFormat("%gKiB", bytes / 1024);
}

bool Near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)); }

bool Contains(const std::set<double>& values, double v) {
  return std::any_of(values.begin(), values.end(), [v](double x) { return Near(x, v); });
}

// The relative errors of `rows` where `take` holds, (predicted - measured) / measured.
std::vector<double> Errors(const std::vector<ValidationRow>& rows, bool exposed) {
  std::vector<double> errors;
  for (const ValidationRow& r : rows) {
    if (exposed ? !r.exposed_comparable() : !r.usable()) continue;
    errors.push_back(exposed ? model::RelativeError(r.predicted_exposed_s, r.measured_exposed_s)
                             : model::RelativeError(r.predicted_step_s, r.measured_step_s));
  }
  return errors;
}

absl::StatusOr<model::ErrorSummary> SummaryOf(const std::vector<double>& errors) {
  if (errors.empty()) return model::ErrorSummary{};
  return model::SummarizeErrors(errors);
}

std::string FormatSummary(const char* what, const model::ErrorSummary& s) {
  if (s.count == 0) return absl::StrFormat("# %s: no usable run\n", what);
  return absl::StrFormat("# %s: median |error| %.1f %%, p90 %.1f %%, max %.1f %% over %d runs\n", what,
                         100 * s.median_abs, 100 * s.p90_abs, 100 * s.max_abs, s.count);
}

// The rows of one condition's record, matched by N and the size or the workload and bucket cap (records hold
// the real model's cap; the harness divides it for the workers).
bool Matches(const HeldOutCondition& c, const RunRecord& r) {
  if (r.nodes != c.nodes) return false;
  if (!c.replay()) return r.bytes == c.bytes;
  return r.workload == c.workload && Near(r.bucket_mb, c.bucket_mb);
}

}  // namespace

std::string HeldOutSweep::Name() const {
  std::string name = absl::StrCat(link, " ", latency.empty() ? "0" : latency);
  if (workloads.empty()) return absl::StrCat(name, " gradient");
  return absl::StrCat(name, " replay ", absl::StrJoin(workloads, ","),
                      bytes_scale != 1 ? absl::StrCat(" bytes/", bytes_scale) : "");
}

std::string HeldOutCondition::Name() const {
  std::string name = absl::StrCat(link, " ", latency.empty() ? "0" : latency, " N=", nodes, " ");
  if (!replay()) return absl::StrCat(name, SizeName(static_cast<double>(bytes)));
  absl::StrAppend(&name, workload, bytes_scale != 1 ? absl::StrCat("/", bytes_scale) : "");
  return absl::StrCat(name, bucket_mb > 0 ? absl::StrFormat(" bucketed %gMB", bucket_mb) : " flat");
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
  if (!(sweep.bytes_scale >= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("sweep ", sweep.Name(), ": bytes_scale must be >= 1"));
  }
  std::vector<HeldOutCondition> out;
  HeldOutCondition base;
  base.link = sweep.link;
  base.latency = sweep.latency;
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
  if (condition.replay()) return false;
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
  // What the workers get: both caps divided by bytes_scale, like the profile (bench/scaling.h
  // WorkerBucketMb).
  return model::WorkloadStep(ScaledWorkload(real, condition.bytes_scale),
                             condition.bucket_mb / condition.bytes_scale,
                             trainer::kDefaultFirstBucketMb / condition.bytes_scale);
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
    ASSIGN_OR_RETURN(const model::StepTime step, model::PredictStep(topology, params, at, shape));
    ValidationRow row;
    row.condition = condition.Name();
    row.exchange = e;
    row.nodes = condition.nodes;
    row.predicted_step_s = step.step_s;
    // Gradient mode has no compute: the whole step is the exchange, all of it exposed.
    row.predicted_exposed_s = condition.replay() ? step.exposed_s : step.step_s;
    row.bound = model::BoundName(step.bound);
    rows.push_back(row);
  }
  return rows;
}

std::string FormatPrediction(const std::vector<ValidationRow>& rows) {
  if (rows.empty()) return "";
  std::vector<std::string> parts;
  size_t fastest = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    parts.push_back(absl::StrFormat("%s %.3f s (%s)", ExchangeName(rows[i].exchange),
                                    rows[i].predicted_step_s, rows[i].bound));
    if (rows[i].predicted_step_s < rows[fastest].predicted_step_s) fastest = i;
  }
  return absl::StrFormat("# PREDICTED before running %s: %s; fastest %s\n", rows[0].condition,
                         absl::StrJoin(parts, ", "), ExchangeName(rows[fastest].exchange));
}

absl::StatusOr<ValidationSummary> Summarize(const std::vector<ValidationRow>& rows,
                                            const std::vector<std::vector<double>>& repeats) {
  ValidationSummary s;
  s.rows = static_cast<int>(rows.size());
  for (const ValidationRow& r : rows) {
    if (r.usable()) ++s.usable;
    if (r.emulator_bound) ++s.emulator_bound;
    if (!r.emulator_bound && !r.usable()) ++s.failed;
  }
  ASSIGN_OR_RETURN(s.step, SummaryOf(Errors(rows, /*exposed=*/false)));
  ASSIGN_OR_RETURN(s.exposed, SummaryOf(Errors(rows, /*exposed=*/true)));
  ASSIGN_OR_RETURN(s.band, model::ComputeTieBand(repeats));
  // Conditions in first-seen order, each with its usable exchanges.
  std::vector<model::ConditionResult> conditions;
  for (const ValidationRow& r : rows) {
    if (!r.usable()) continue;
    auto it = std::find_if(conditions.begin(), conditions.end(),
                           [&](const model::ConditionResult& c) { return c.condition == r.condition; });
    if (it == conditions.end()) it = conditions.insert(conditions.end(), {r.condition, {}});
    it->exchanges.push_back({ExchangeName(r.exchange), r.predicted_step_s, r.measured_step_s});
  }
  conditions.erase(std::remove_if(conditions.begin(), conditions.end(),
                                  [](const model::ConditionResult& c) { return c.exchanges.size() < 2; }),
                   conditions.end());
  ASSIGN_OR_RETURN(s.winners, model::ScoreWinners(conditions, s.band.band));
  return s;
}

absl::Status WriteValidationFiles(const std::string& dir, const std::string& report,
                                  const std::vector<ValidationRow>& rows, const std::string& subtitle,
                                  std::ostream* out) {
  const std::string txt = dir + "/validation.txt";
  const std::string svg = dir + "/validation.svg";
  RETURN_IF_ERROR(WriteFileAtomically(svg, ValidationScatterSvg(rows, subtitle)));
  RETURN_IF_ERROR(WriteFileAtomically(txt, report));
  *out << "# wrote " << txt << ", " << svg << "\n";
  return absl::OkStatus();
}

std::string FormatHeldOutChecks(const ValidationSummary& s) {
  std::string out;
  if (s.winners.counted == 0) {
    absl::StrAppendFormat(&out,
                          "# info held-out winner: no condition outside the tie band %s (%d ties): nothing to "
                          "judge\n",
                          s.band.Describe(), s.winners.ties);
  } else {
    absl::StrAppendFormat(&out,
                          "# check held-out winner: %d of %d conditions outside the tie band %s named right: %s\n",
                          s.winners.correct, s.winners.counted, s.band.Describe(),
                          s.winners.correct == s.winners.counted ? "PASS" : "FAIL");
  }
  // Compared as printed: an error of exactly the target (10.0 % against 10 %) meets it, whatever the last bit.
  const auto met = [](double error, double target) { return error <= target + 1e-9 ? "met" : "missed"; };
  if (s.step.count > 0) {
    absl::StrAppendFormat(&out,
                          "# info held-out step time: |error| median %.1f %% (target %.0f %%: %s), p90 %.1f %% "
                          "(target %.0f %%: %s) over %d runs\n",
                          100 * s.step.median_abs, 100 * kTargetStepMedian, met(s.step.median_abs, kTargetStepMedian),
                          100 * s.step.p90_abs, 100 * kTargetStepP90, met(s.step.p90_abs, kTargetStepP90),
                          s.step.count);
  }
  if (s.exposed.count > 0) {
    absl::StrAppendFormat(&out,
                          "# info held-out exposed exchange time: |error| median %.1f %% (target %.0f %%: %s) over "
                          "%d runs\n",
                          100 * s.exposed.median_abs, 100 * kTargetExposedMedian,
                          met(s.exposed.median_abs, kTargetExposedMedian), s.exposed.count);
  }
  if (s.emulator_bound > 0 || s.failed > 0) {
    absl::StrAppendFormat(&out, "# info held-out runs left out: %d EMULATOR-BOUND, %d failed (of %d)\n",
                          s.emulator_bound, s.failed, s.rows);
  }
  return out;
}

std::string FormatValidationReport(const Validation& v) {
  const ValidationSummary& s = v.summary;
  std::string out = absl::StrFormat(
      "# VALIDATION on held-out conditions (model of %s, %s, frozen; predicted before each run): %d runs, %d "
      "usable, %d EMULATOR-BOUND (excluded), %d failed (excluded)\n",
      v.model_host, v.model_date, s.rows, s.usable, s.emulator_bound, s.failed);
  absl::StrAppendFormat(&out, "# %-38s %-13s %9s %9s %7s %9s %9s %7s  %-8s %s\n", "condition", "exchange",
                        "pred_s", "meas_s", "err", "pred_exp", "meas_exp", "err", "bound", "note");
  for (const ValidationRow& r : v.rows) {
    const bool measured = r.measured_step_s > 0;
    const std::string step_error =
        measured
            ? absl::StrFormat("%+.1f%%", 100 * model::RelativeError(r.predicted_step_s, r.measured_step_s))
            : "-";
    std::string exposed_error = "-";
    if (r.exposed_comparable()) {
      exposed_error =
          absl::StrFormat("%+.1f%%", 100 * model::RelativeError(r.predicted_exposed_s, r.measured_exposed_s));
    } else if (r.usable()) {
      exposed_error = "hidden";
    }
    std::string note = r.emulator_bound ? absl::StrCat("EMULATOR-BOUND (", r.note, ")") : r.note;
    absl::StrAppendFormat(&out, "  %-38s %-13s %9.3f %9s %7s %9.3f %9s %7s  %-8s %s\n", r.condition,
                          ExchangeName(r.exchange), r.predicted_step_s,
                          measured ? absl::StrFormat("%.3f", r.measured_step_s) : "-", step_error,
                          r.predicted_exposed_s,
                          r.measured_exposed_s >= 0 ? absl::StrFormat("%.3f", r.measured_exposed_s) : "-",
                          exposed_error, r.bound, note);
  }
  absl::StrAppend(&out, FormatSummary("step time", s.step));
  absl::StrAppend(
      &out, FormatSummary(absl::StrFormat("exposed exchange time (runs where it is >= %.0f %% of the step)",
                                          100 * ValidationRow::kMinExposedShare)
                              .c_str(),
                          s.exposed));
  absl::StrAppend(&out, "# tie band: ", s.band.Describe(), "\n");
  for (const model::WinnerVerdict& w : s.winners.verdicts) {
    absl::StrAppendFormat(&out, "#   %-38s measured %-13s by %5.1f %%, predicted %-13s %s\n", w.condition,
                          w.measured_winner, 100 * w.measured_margin, w.predicted_winner,
                          !w.counted  ? "tie (within the band)"
                          : w.correct ? "right"
                                      : "WRONG");
  }
  if (s.winners.counted == 0) {
    absl::StrAppendFormat(&out, "# winner accuracy: no condition outside the tie band (%d ties)\n",
                          s.winners.ties);
  } else {
    absl::StrAppendFormat(
        &out, "# winner accuracy: %d of %d = %.0f %% (conditions outside the tie band; %d ties)\n",
        s.winners.correct, s.winners.counted, 100 * s.winners.accuracy, s.winners.ties);
  }
  if (v.wall_s > 0) absl::StrAppendFormat(&out, "# validation ran %.0f s\n", v.wall_s);
  return out;
}

std::string ValidationScatterSvg(const std::vector<ValidationRow>& rows, const std::string& subtitle) {
  Figure figure;
  figure.title = "Cost model on held-out runs: predicted vs measured";
  figure.subtitle = subtitle;
  for (bool exposed : {false, true}) {
    Panel& panel = figure.panels.emplace_back();
    panel.title = exposed ? "exposed exchange time" : "step time";
    panel.x_label = "predicted (s)";
    panel.y_label = "measured (s)";
    panel.x_scale = Scale::kLog10;
    panel.y_scale = Scale::kLog10;
    double lo = INFINITY, hi = 0;
    const std::vector<Exchange> exchanges = AllExchanges();
    for (size_t i = 0; i < exchanges.size(); ++i) {
      Series series{ExchangeName(exchanges[i]), PaletteColor(static_cast<int>(i)), {}, Style::kMarkers};
      for (const ValidationRow& r : rows) {
        if (r.exchange != exchanges[i] || !(exposed ? r.exposed_comparable() : r.usable())) continue;
        const double p = exposed ? r.predicted_exposed_s : r.predicted_step_s;
        const double m = exposed ? r.measured_exposed_s : r.measured_step_s;
        if (!(p > 0 && m > 0)) continue;
        series.points.push_back({p, m});
        lo = std::min({lo, p, m});
        hi = std::max({hi, p, m});
      }
      panel.series.push_back(std::move(series));
    }
    if (hi > 0)
      panel.series.push_back({"measured = predicted", "#888888", {{lo, lo}, {hi, hi}}, Style::kDashedLine});
  }
  return RenderSvg(figure);
}

absl::StatusOr<double> EstimateValidationSeconds(const ValidationPlan& plan,
                                                 const proto::CostModelFile& model) {
  double total = 0;
  for (size_t i = 0; i < plan.sweeps.size(); ++i) {
    ASSIGN_OR_RETURN(const std::vector<HeldOutCondition> conditions, ExpandSweep(plan.sweeps[i]));
    double sweep = kClusterStartupS;
    for (const HeldOutCondition& c : conditions) {
      ASSIGN_OR_RETURN(const model::StepShape shape, ShapeOf(c));
      ASSIGN_OR_RETURN(const std::vector<ValidationRow> rows,
                       PredictCondition(model, c, shape, plan.exchanges, plan.ps_servers));
      for (const ValidationRow& r : rows)
        sweep += kRunStartupS + (plan.steps + plan.warmup_steps) * r.predicted_step_s;
    }
    total += sweep * (static_cast<int>(i) == plan.noise_sweep ? std::max(1, plan.noise_runs) : 1);
  }
  return total;
}

absl::StatusOr<Validation> RunValidation(const ValidationPlan& plan, const proto::CostModelFile& model,
                                         const ScalingOptions& base, std::ostream* out,
                                         std::ostream* progress) {
  RETURN_IF_ERROR(model::ValidateModelFile(model));
  Validation v;
  v.model_host = model.host();
  v.model_date = model.date();
  const absl::Time start = absl::Now();
  // (condition, exchange) -> step times of every run of the noise sweep.
  std::map<std::pair<std::string, Exchange>, std::vector<double>> repeated;
  // Every sweep runs on this machine's emulated links: their burst and the cores all processes share.
  ASSIGN_OR_RETURN(const double burst_s, ParseLinkBurst(base.cluster.burst));
  const double box_cores = BoxCores();
  for (size_t i = 0; i < plan.sweeps.size(); ++i) {
    const HeldOutSweep& sweep = plan.sweeps[i];
    ASSIGN_OR_RETURN(std::vector<HeldOutCondition> conditions, ExpandSweep(sweep));
    for (HeldOutCondition& c : conditions) {
      c.link_burst_bytes = static_cast<double>(TbfBurstBytes(c.link_bytes_per_second, burst_s));
      c.box_cores = box_cores;
    }
    std::vector<std::vector<ValidationRow>> predicted;
    for (const HeldOutCondition& c : conditions) {
      ASSIGN_OR_RETURN(const model::StepShape shape, ShapeOf(c));
      ASSIGN_OR_RETURN(predicted.emplace_back(),
                       PredictCondition(model, c, shape, plan.exchanges, plan.ps_servers));
      *out << FormatPrediction(predicted.back());
    }
    out->flush();
    ScalingOptions o = base;
    o.exchanges = plan.exchanges;
    o.steps = plan.steps;
    o.warmup_steps = plan.warmup_steps;
    o.ps_servers = plan.ps_servers;
    o.nodes = sweep.nodes;
    o.projection = {};
    o.timeline_dir.clear();
    o.cluster.force_loopback = false;
    o.cluster.link = sweep.link;
    o.cluster.latency = sweep.latency;
    if (sweep.workloads.empty()) {
      o.mode = "gradient";
      o.workloads.clear();
      o.model_bytes = sweep.sizes;
      o.bucket_mbs.clear();
      o.bytes_scale = 1;
    } else {
      o.workloads = sweep.workloads;
      o.bytes_scale = sweep.bytes_scale;
      o.bucket_mbs =
          sweep.bucket_mbs;  // real sizes: the harness divides them (and the first cap) by bytes_scale
    }
    const int runs = static_cast<int>(i) == plan.noise_sweep ? std::max(1, plan.noise_runs) : 1;
    for (int run = 0; run < runs; ++run) {
      *progress << absl::StrFormat(
          "# validation sweep %d/%d%s: %s, %.0f s elapsed\n", i + 1, plan.sweeps.size(),
          runs > 1 ? absl::StrFormat(" (run %d of %d, for the noise)", run + 1, runs) : "", sweep.Name(),
          absl::ToDoubleSeconds(absl::Now() - start));
      absl::StatusOr<SweepResult> result = RunScaling(o, progress);
      if (!result.ok()) {
        return absl::Status(result.status().code(),
                            absl::StrCat("validation sweep ", sweep.Name(), ": ", result.status().message()));
      }
      if (!result->emulated) {
        return absl::FailedPreconditionError(
            absl::StrCat("validation sweep ", sweep.Name(), " ran on loopback (", result->fallback_reason,
                         "): run as root (CAP_NET_ADMIN) for the emulated links"));
      }
      for (size_t c = 0; c < conditions.size(); ++c) {
        for (ValidationRow row : predicted[c]) {
          auto record = std::find_if(result->records.begin(), result->records.end(), [&](const RunRecord& r) {
            return r.exchange == row.exchange && Matches(conditions[c], r);
          });
          if (record == result->records.end()) {
            row.note = "not run";
          } else if (!record->ok() || record->wrong > 0) {
            row.note = record->ok() ? absl::StrCat(record->wrong, " wrong")
                                    : absl::StrCat("failed: ", record->error);
          } else {
            row.measured_step_s = record->step_s;
            row.measured_exposed_s = conditions[c].replay() ? record->exposed_s : record->exchange_s;
            row.emulator_bound = record->emulator_bound;
            if (record->emulator_bound) row.note = record->bound_reason;
            if (runs > 1 && row.usable())
              repeated[{row.condition, row.exchange}].push_back(row.measured_step_s);
          }
          if (run == 0) v.rows.push_back(row);
        }
      }
    }
  }
  for (auto& [key, times] : repeated) {
    if (times.size() > 1) v.repeats.push_back(times);
  }
  v.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  ASSIGN_OR_RETURN(v.summary, Summarize(v.rows, v.repeats));
  return v;
}

}  // namespace psring::bench
