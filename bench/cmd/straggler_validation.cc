// The straggler model's held-out validation (straggler_validation.h): plan files, predictions, runs, report.
#include "bench/cmd/straggler_validation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/core/cluster.h"
#include "bench/core/links.h"
#include "bench/harness/sweep.h"
#include "bench/model/calibration_plan.h"
#include "bench/model/exchange_topology.h"
#include "bench/model/model_file.h"
#include "bench/model/straggler_model.h"
#include "bench/model/workload_step.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "trainer/straggler.h"
#include "trainer/workload.h"

namespace psring::bench {
namespace {

absl::Status LineError(absl::string_view origin, int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(origin, ":", line, ": ", what));
}

// "key=value" fields of a condition line.
absl::StatusOr<StragglerCondition> ParseCondition(const std::vector<std::string>& words, bool control,
                                                  absl::string_view origin, int line) {
  StragglerCondition c;
  c.control = control;
  bool has_exchange = false;
  for (size_t i = 1; i < words.size(); ++i) {
    const std::vector<std::string> kv = absl::StrSplit(words[i], absl::MaxSplits('=', 1));
    const std::string& key = kv[0];
    const std::string value = kv.size() > 1 ? kv[1] : "";
    if (key == "exchange") {
      absl::StatusOr<Exchange> e = ParseExchange(value);
      if (!e.ok()) return LineError(origin, line, e.status().message());
      c.exchange = *e;
      has_exchange = true;
    } else if (key == "straggler" && !control) {
      absl::StatusOr<trainer::StragglerOptions> s = trainer::ParseStragglerFlags(value, "", "");
      if (!s.ok()) return LineError(origin, line, s.status().message());
      c.slow_rank = s->slow_rank;
      c.factor = s->factor;
    } else if (key == "noise" && !control) {
      absl::StatusOr<trainer::StragglerOptions> s = trainer::ParseStragglerFlags("", value, "");
      if (!s.ok()) return LineError(origin, line, s.status().message());
      c.noise_sigma = s->noise_sigma;
    } else if (key == "backup") {
      if (!absl::SimpleAtoi(value, &c.backup_workers) || c.backup_workers < 0) {
        return LineError(origin, line,
                         absl::StrCat("backup=", value, ": write the backup workers B >= 0, e.g. backup=1"));
      }
    } else if (key == "staleness") {
      if (!absl::SimpleAtoi(value, &c.staleness) || c.staleness < 0) {
        return LineError(origin, line,
                         absl::StrCat("staleness=", value, ": write the async PS's bound S >= 0, e.g. staleness=4"));
      }
    } else if (key == "bucket_mb") {
      if (!absl::SimpleAtod(value, &c.bucket_mb) || !std::isfinite(c.bucket_mb) || c.bucket_mb < 0) {
        return LineError(origin, line, absl::StrCat("bucket_mb=", value, ": write MiB >= 0 (0: flat)"));
      }
    } else {
      return LineError(
          origin, line,
          absl::StrCat("'", words[i], "' is not a field of a ", words[0], " line: write exchange=NAME",
                       control ? "" : ", straggler=RANK:FACTOR, noise=SIGMA", ", backup=B, staleness=S, bucket_mb=MB"));
    }
  }
  if (!has_exchange)
    return LineError(origin, line, "missing exchange=NAME (ring, ps-1, ps-colocated, ps-dedicated)");
  if (c.backup_workers > 0 && c.exchange == Exchange::kRing) {
    return LineError(origin, line, "backup workers are the sync PS's: drop backup= or use a PS exchange");
  }
  if (c.staleness >= 0 && (c.exchange == Exchange::kRing || c.backup_workers > 0)) {
    return LineError(origin, line,
                     "staleness= is the asynchronous PS's: use a PS exchange, without backup= (the sync PS's)");
  }
  if (!control && c.slow_rank < 0 && c.noise_sigma == 0) {
    return LineError(origin, line,
                     "a condition without straggler= or noise= injects nothing: write it as a control line");
  }
  return c;
}

// The profile as the workers replay it: every layer's compute times compute_scale.
absl::StatusOr<model::StepShape> PlanShape(const StragglerPlan& plan, double bucket_mb) {
  ASSIGN_OR_RETURN(proto::Workload w, trainer::LoadWorkload(plan.workload));
  for (proto::WorkloadLayer& layer : *w.mutable_layers()) {
    layer.set_forward_ms(layer.forward_ms() * plan.compute_scale);
    layer.set_backward_ms(layer.backward_ms() * plan.compute_scale);
  }
  return model::WorkloadStep(w, bucket_mb, trainer::kDefaultFirstBucketMb);
}

// Conditions with the same injection, bucket cap and servers' flags run in one sweep.
using GroupKey = std::tuple<int, double, double, int, double, int>;
GroupKey KeyOf(const StragglerCondition& c) {
  return {c.slow_rank, c.factor, c.noise_sigma, c.backup_workers, c.bucket_mb, c.staleness};
}

std::string Percent(double fraction) { return absl::StrFormat("%.1f %%", 100 * fraction); }

}  // namespace

std::string StragglerCondition::Name() const {
  std::string name = ExchangeName(exchange);
  if (control) absl::StrAppend(&name, " control (no straggler)");
  if (slow_rank >= 0) absl::StrAppend(&name, absl::StrFormat(" slow %dx%g", slow_rank, factor));
  if (noise_sigma > 0) absl::StrAppend(&name, absl::StrFormat(" noise %g", noise_sigma));
  if (backup_workers > 0) absl::StrAppend(&name, " B=", backup_workers);
  if (staleness >= 0) absl::StrAppend(&name, " async s=", staleness);
  if (bucket_mb > 0) absl::StrAppend(&name, absl::StrFormat(" bucketed %gMB", bucket_mb));
  return name;
}

StragglerPlan QuickStragglerPlan() {
  StragglerPlan plan;
  plan.compute_scale = 50;
  plan.steps = 60;
  for (Exchange e : {Exchange::kRing, Exchange::kPsOne}) {
    StragglerCondition c;
    c.exchange = e;
    c.slow_rank = 1;
    c.factor = 2;
    c.noise_sigma = 0.3;
    plan.conditions.push_back(c);
  }
  return plan;
}

absl::StatusOr<StragglerPlan> ParseStragglerPlan(absl::string_view text, absl::string_view origin) {
  StragglerPlan plan;
  plan.conditions.clear();
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    absl::string_view line = raw.substr(0, raw.find('#'));
    const std::vector<std::string> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipWhitespace());
    if (words.empty()) continue;
    const std::string& key = words[0];
    if (key == "condition" || key == "control") {
      ASSIGN_OR_RETURN(StragglerCondition c, ParseCondition(words, key == "control", origin, line_number));
      plan.conditions.push_back(c);
      continue;
    }
    if (words.size() != 2) return LineError(origin, line_number, absl::StrCat("write '", key, " VALUE'"));
    const std::string& value = words[1];
    bool ok = true;
    if (key == "nodes") {
      ok = absl::SimpleAtoi(value, &plan.nodes) && plan.nodes >= 2;
    } else if (key == "workload") {
      ok = trainer::LoadWorkload(value).ok();
      plan.workload = value;
    } else if (key == "compute_scale") {
      ok = absl::SimpleAtod(value, &plan.compute_scale) && std::isfinite(plan.compute_scale) &&
           plan.compute_scale > 0;
    } else if (key == "steps") {
      ok = absl::SimpleAtoi(value, &plan.steps) && plan.steps >= 1;
    } else if (key == "warmup_steps") {
      ok = absl::SimpleAtoi(value, &plan.warmup_steps) && plan.warmup_steps >= 0;
    } else if (key == "noise_seed") {
      ok = absl::SimpleAtoi(value, &plan.noise_seed);
    } else if (key == "link") {
      plan.link = value == "loopback" ? "" : value;
      ok = value == "loopback" || (ParseLinkRate(value).ok() && *ParseLinkRate(value) > 0);
    } else if (key == "latency") {
      ok = ParseLatency(value).ok();
      plan.latency = value;
    } else {
      return LineError(origin, line_number,
                       absl::StrCat("'", key,
                                    "' is not a plan setting: write nodes, workload, compute_scale, steps, "
                                    "warmup_steps, noise_seed, link, latency, condition or control"));
    }
    if (!ok) {
      return LineError(
          origin, line_number,
          absl::StrCat("'", value, "' is not a valid ", key,
                       " (nodes >= 2, steps >= 1, compute_scale > 0, a preset workload or profile "
                       "path, link 'loopback' or a tc rate, latency e.g. 1ms)"));
    }
  }
  if (plan.conditions.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": no condition: write e.g. 'condition exchange=ring straggler=1:2 noise=0.3'"));
  }
  for (const StragglerCondition& c : plan.conditions) {
    if (c.slow_rank >= plan.nodes || c.backup_workers >= plan.nodes) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": ", c.Name(),
                                                     ": the slow rank and B must be below N = ", plan.nodes,
                                                     " (put 'nodes' before raising them)"));
    }
  }
  return plan;
}

absl::StatusOr<StragglerPlan> ReadStragglerPlanFile(const std::string& path) {
  ASSIGN_OR_RETURN(
      const std::string text,
      ReadFileToString(path, absl::StrCat(path,
                                          ": cannot read the straggler plan (a text file as "
                                          "bench/results/plans/straggler_plan_2026-11-27.txt)")));
  return ParseStragglerPlan(text, path);
}

absl::StatusOr<std::vector<StragglerRow>> PredictStragglerPlan(const StragglerPlan& plan,
                                                               const proto::CostModelFile& model) {
  model::Conditions at;
  at.nodes = plan.nodes;
  at.servers = 2;
  at.box_cores = BoxCores();  // every process on this machine
  if (!plan.link.empty()) {
    ASSIGN_OR_RETURN(const double bits, ParseLinkRate(plan.link));
    at.link_bytes_per_second = bits / 8;
    ASSIGN_OR_RETURN(at.latency_s, ParseLatency(plan.latency));
    ASSIGN_OR_RETURN(const double burst_s, ParseLinkBurst(ClusterOptions().burst));
    at.link_burst_bytes = static_cast<double>(TbfBurstBytes(at.link_bytes_per_second, burst_s));
  }
  std::vector<StragglerRow> rows;
  for (const StragglerCondition& c : plan.conditions) {
    ASSIGN_OR_RETURN(const model::StepShape shape, PlanShape(plan, c.bucket_mb));
    const model::Topology topology = TopologyOf(c.exchange);
    ASSIGN_OR_RETURN(const model::ExchangeParams params, model::ParamsOf(model, topology));
    model::StragglerConditions s;
    s.injected.slow_rank = c.slow_rank;
    s.injected.factor = c.factor;
    s.injected.noise_sigma = c.noise_sigma;
    s.rule = c.staleness >= 0        ? model::StepRule::kAsync
             : c.backup_workers > 0 ? model::StepRule::kBackup
                                    : model::StepRule::kSync;
    s.backup_workers = c.backup_workers;
    s.staleness = std::max(0, c.staleness);
    s.steps = plan.steps;
    ASSIGN_OR_RETURN(const model::StragglerStep step,
                     model::PredictStragglerStep(topology, params, at, shape, s));
    StragglerRow row;
    row.condition = c;
    row.predicted_s = step.step_s;
    row.unperturbed_s = step.unperturbed_step_s;
    row.cluster_s = step.cluster_step_s;
    // Sync: one step's sd over sqrt(steps); simulated: already the sd of a run's figure.
    row.sampling_sd =
        (s.rule == model::StepRule::kSync ? step.sd_s / std::sqrt(plan.steps) : step.sd_s) / step.step_s;
    // The compute the injection asks for, as the harness averages it (over ranks and steps), and how far a
    // run's may lie above it by chance: 4 standard deviations of that mean, at least 5 %.
    const std::vector<model::FactorDistribution> ranks = model::RankFactors(s.injected, plan.nodes);
    double mean = 0, variance = 0;
    for (const model::FactorDistribution& d : ranks) {
      mean += d.Mean() / plan.nodes;
      variance += d.Variance() / (static_cast<double>(plan.nodes) * plan.nodes);
    }
    row.predicted_compute_s = (shape.forward_s + shape.backward_s) * mean;
    row.compute_limit = std::max(kMinComputeOvershoot, 4 * std::sqrt(variance / plan.steps) / mean);
    rows.push_back(row);
  }
  return rows;
}

void JoinRecord(const RunRecord* record, StragglerRow* row) {
  if (record == nullptr) {
    row->note = "not run";
    return;
  }
  if (!record->ok()) {
    row->note = absl::StrCat("failed: ", record->error);
    return;
  }
  row->measured_s = record->step_s;
  if (row->condition.backup_workers > 0 && record->quorum_step_s > 0) row->measured_quorum_s = record->quorum_step_s;
  row->measured_compute_s = record->compute_s;
  if (const double over = row->compute_overshoot(); over > row->compute_limit) {
    row->note = absl::StrFormat(
        "BOX-BOUND: the timed compute ran %+.1f %% over the injected (limit %+.1f %%): the box, not the "
        "model's inputs, set the step",
        100 * over, 100 * row->compute_limit);
  }
  if (record->wrong > 0) row->note = absl::StrCat(record->wrong, " wrong values");
  if (record->emulator_bound) row->note = absl::StrCat("EMULATOR-BOUND: ", record->bound_reason);
  if (record->straggler_rank >= 0) {
    row->held_back_by =
        absl::StrFormat("rank %d in %.0f%%", record->straggler_rank, 100 * record->straggler_share);
  }
}

absl::Status SummarizeStragglerRows(StragglerValidation* v) {
  std::vector<double> errors, control;
  v->judged = v->unjudged = 0;
  v->straggler = v->control = model::ErrorSummary{};
  for (const StragglerRow& r : v->rows) {
    if (r.condition.control) {
      if (r.judged()) control.push_back(r.error());
      continue;
    }
    if (r.judged()) {
      ++v->judged;
      errors.push_back(r.error());
    } else {
      ++v->unjudged;
    }
  }
  if (!errors.empty()) {
    ASSIGN_OR_RETURN(v->straggler, model::SummarizeErrors(errors));
  }
  if (!control.empty()) {
    ASSIGN_OR_RETURN(v->control, model::SummarizeErrors(control));
  }
  std::vector<double> quorum;
  v->quorum = model::ErrorSummary{};
  v->backup_checks.clear();
  for (const StragglerRow& r : v->rows) {
    if (!r.judged() || r.condition.backup_workers == 0 || r.measured_quorum_s <= 0) continue;
    if (!r.condition.control && r.cluster_s > 0) quorum.push_back(r.quorum_error());
    if (r.condition.slow_rank < 0 || r.condition.factor < kBackupCheckMinFactor) continue;
    for (const StragglerRow& b : v->rows) {
      const StragglerCondition& c = b.condition;
      if (!b.judged() || b.measured_quorum_s <= 0 || c.slow_rank >= 0 || c.exchange != r.condition.exchange ||
          c.backup_workers != r.condition.backup_workers || c.noise_sigma != r.condition.noise_sigma ||
          c.bucket_mb != r.condition.bucket_mb) {
        continue;
      }
      v->backup_checks.push_back({r.condition.Name(), c.Name(), r.measured_quorum_s, b.measured_quorum_s});
      break;
    }
  }
  if (!quorum.empty()) {
    ASSIGN_OR_RETURN(v->quorum, model::SummarizeErrors(quorum));
  }
  const bool within =
      v->straggler.median_abs <= kStragglerTargetMedian && v->straggler.p90_abs <= kStragglerTargetP90;
  v->verdict = v->judged == 0 ? "UNJUDGED" : !within ? "FAIL" : v->unjudged > 0 ? "INCOMPLETE" : "PASS";
  v->pass = v->verdict == "PASS";
  return absl::OkStatus();
}

double EstimateStragglerSeconds(const StragglerPlan& plan, const std::vector<StragglerRow>& rows) {
  double estimate = 0;
  for (const StragglerRow& r : rows)
    estimate += (plan.steps + plan.warmup_steps) * r.predicted_s + kRunStartupS;
  return estimate;
}

absl::StatusOr<StragglerValidation> RunStragglerValidation(const StragglerPlan& plan,
                                                           const proto::CostModelFile& model,
                                                           const ScalingOptions& base, std::ostream* out,
                                                           std::ostream* progress) {
  StragglerValidation v;
  v.plan = plan;
  v.model_source = absl::StrCat(model.host(), ", ", model.date());
  ASSIGN_OR_RETURN(v.rows, PredictStragglerPlan(plan, model));
  *out << "# predictions, printed before any run (model of " << v.model_source
       << "; no straggler parameter fitted)\n";
  for (const StragglerRow& r : v.rows) {
    *out << absl::StrFormat("#   %-44s predicted %.4f s/step (without stragglers %.4f s, sampling sd %s)\n",
                            r.condition.Name(), r.predicted_s, r.unperturbed_s, Percent(r.sampling_sd));
  }
  *out << absl::StrFormat("# estimated run time: %.1f min\n", EstimateStragglerSeconds(plan, v.rows) / 60);
  out->flush();
  const absl::Time start = absl::Now();
  std::map<GroupKey, std::vector<size_t>> groups;
  for (size_t i = 0; i < v.rows.size(); ++i) groups[KeyOf(v.rows[i].condition)].push_back(i);
  int done = 0;
  for (const auto& [key, members] : groups) {
    const StragglerCondition& c = v.rows[members.front()].condition;
    ScalingOptions o = base;
    o.nodes = {plan.nodes};
    o.exchanges.clear();
    double longest = 0;
    for (size_t i : members) {
      o.exchanges.push_back(v.rows[i].condition.exchange);
      longest = std::max(longest, v.rows[i].predicted_s);
    }
    o.mode = "replay";
    o.workloads = {plan.workload};
    o.workload_args = {absl::StrCat("--compute_scale=", plan.compute_scale)};
    o.bytes_scale = 1;
    o.bucket_mbs = {c.bucket_mb};
    o.steps = plan.steps;
    o.warmup_steps = plan.warmup_steps;
    o.ps_mode = c.staleness >= 0 ? "async" : "sync";
    o.worker_args.clear();
    if (c.slow_rank >= 0)
      o.worker_args.push_back(absl::StrFormat("--straggler=%d:%g", c.slow_rank, c.factor));
    if (c.noise_sigma > 0)
      o.worker_args.push_back(absl::StrFormat("--step_noise=%g:%d", c.noise_sigma, plan.noise_seed));
    o.server_args.clear();
    if (c.backup_workers > 0) o.server_args.push_back(absl::StrCat("--backup_workers=", c.backup_workers));
    if (c.staleness >= 0) o.server_args.push_back(absl::StrCat("--staleness=", c.staleness));
    o.model_path.clear();
    o.cpu_model_path.clear();
    o.projection = {};
    o.timeline_dir.clear();
    o.extrapolate_nodes.clear();
    // Room for the slowest step the model expects, three times over, and the start-up.
    o.job_timeout_s = 3 * (plan.steps + plan.warmup_steps) * longest + 120;
    o.cluster.force_loopback = plan.link.empty();
    if (!plan.link.empty()) {
      o.cluster.link = plan.link;
      o.cluster.latency = plan.latency;
    }
    *progress << absl::StrFormat("# straggler validation %d/%d: %s (%zu exchanges), %.0f s elapsed\n", ++done,
                                 groups.size(), c.Name(), members.size(),
                                 absl::ToDoubleSeconds(absl::Now() - start));
    absl::StatusOr<SweepResult> result = RunScaling(o, progress);
    if (!result.ok()) {
      return absl::Status(result.status().code(),
                          absl::StrCat("straggler condition ", c.Name(), ": ", result.status().message()));
    }
    if (!plan.link.empty() && !result->emulated) {
      return absl::FailedPreconditionError(absl::StrCat("the plan's link ", plan.link,
                                                        " fell back to loopback (", result->fallback_reason,
                                                        "): run as root"));
    }
    for (size_t i : members) {
      StragglerRow& row = v.rows[i];
      auto record = std::find_if(result->records.begin(), result->records.end(), [&](const RunRecord& r) {
        return r.exchange == row.condition.exchange && r.nodes == plan.nodes;
      });
      JoinRecord(record == result->records.end() ? nullptr : &*record, &row);
    }
  }
  v.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  RETURN_IF_ERROR(SummarizeStragglerRows(&v));
  return v;
}

std::string FormatStragglerReport(const StragglerValidation& v) {
  const StragglerPlan& p = v.plan;
  std::string s = absl::StrFormat(
      "# straggler model validation: N = %d, %s replayed (compute x %g), %d measured steps after %d, %s; "
      "model of %s\n"
      "# predicted: the slowest rank's mean step from the injected distribution's order statistics and the "
      "calibrated exchange model (nothing fitted to straggler runs); measured: the harness's step_s\n"
      "# sd: the sampling noise of a mean over %d steps the model expects (a run's own luck, not model "
      "error)\n",
      p.nodes, p.workload, p.compute_scale, p.steps, p.warmup_steps,
      p.link.empty() ? "loopback" : absl::StrCat(p.link, " ", p.latency), v.model_source, p.steps);
  absl::StrAppend(&s,
                  "# quorum_s: with backup workers, the time between step closes (the slow rank's pushes "
                  "dropped), predicted / measured (the (N-B)-th fastest rank's mean step); measured_s is the "
                  "slowest rank's own pace\n");
  absl::StrAppend(
      &s,
      "# compute: the workers' measured compute against the injected expectation (over its limit: "
      "BOX-BOUND, unjudged)\n");
  absl::StrAppend(&s, absl::StrFormat("%-46s %12s %12s %17s %8s %12s %8s %8s  %-16s %s\n", "# condition",
                                      "predicted_s", "no_strag_s", "quorum_s", "sd", "measured_s", "err",
                                      "compute", "held_back_by", "note"));
  for (const StragglerRow& r : v.rows) {
    absl::StrAppend(
        &s,
        absl::StrFormat(
            "%-46s %12.4f %12.4f %17s %7.1f%% %12s %8s %8s  %-16s %s\n", r.condition.Name(), r.predicted_s,
            r.unperturbed_s,
            r.condition.backup_workers == 0 ? "-"
            : r.measured_quorum_s > 0       ? absl::StrFormat("%.4f / %.4f", r.cluster_s, r.measured_quorum_s)
                                            : absl::StrFormat("%.4f / -", r.cluster_s),
            100 * r.sampling_sd, r.measured_s > 0 ? absl::StrFormat("%.4f", r.measured_s) : "-",
            r.measured_s > 0 ? absl::StrFormat("%+.1f%%", 100 * r.error()) : "-",
            r.measured_compute_s > 0 ? absl::StrFormat("%+.1f%%", 100 * r.compute_overshoot()) : "-",
            r.held_back_by.empty() ? "-" : r.held_back_by,
            r.judged() ? (r.condition.control ? "control" : "") : r.note));
  }
  absl::StrAppend(
      &s,
      absl::StrFormat(
          "# straggler rows: %d judged, %d unjudged (failed, wrong, EMULATOR-BOUND or BOX-BOUND: not counted "
          "right)\n",
          v.judged, v.unjudged));
  if (v.judged > 0) {
    absl::StrAppend(
        &s, absl::StrFormat("# step time |error| over the judged straggler rows: median %s (target <= %s), "
                            "p90 %s (target <= %s), max %s\n",
                            Percent(v.straggler.median_abs), Percent(kStragglerTargetMedian),
                            Percent(v.straggler.p90_abs), Percent(kStragglerTargetP90),
                            Percent(v.straggler.max_abs)));
  }
  if (v.quorum.count > 0) {
    absl::StrAppend(&s, absl::StrFormat("# backup workers, time between step closes: model |error| median %s, "
                                        "max %s over %d judged rows (reported beside the plan's targets)\n",
                                        Percent(v.quorum.median_abs), Percent(v.quorum.max_abs), v.quorum.count));
  }
  for (const BackupCheck& c : v.backup_checks) {
    absl::StrAppend(
        &s, absl::StrFormat("# backup-worker check: %s closes a step every %.4f s, %+.1f %% against %s (%.4f s); "
                            "target <= %+.0f %%: %s\n",
                            c.condition, c.quorum_s, 100 * c.slowdown(), c.baseline, c.baseline_quorum_s,
                            100 * kBackupSlowdownTarget, c.slowdown() <= kBackupSlowdownTarget ? "PASS" : "FAIL"));
  }
  if (v.control.count > 0) {
    absl::StrAppend(
        &s, absl::StrFormat("# control rows (no straggler: the exchange model alone): median |error| %s, "
                            "max %s over %d\n",
                            Percent(v.control.median_abs), Percent(v.control.max_abs), v.control.count));
  }
  absl::StrAppend(&s, absl::StrFormat("# verdict: %s (%.0f s)\n",
                                      v.verdict == "UNJUDGED"     ? "UNJUDGED (no run could be judged)"
                                      : v.verdict == "INCOMPLETE" ? "INCOMPLETE (the judged rows are within "
                                                                    "the targets; some rows are unjudged)"
                                                                  : v.verdict,
                                      v.wall_s));
  return s;
}

absl::StatusOr<StragglerPartResult> RunStragglerPart(const proto::CostModelFile& model,
                                                     const ScalingOptions& base, std::ostream* progress) {
  std::ostringstream predictions;
  ASSIGN_OR_RETURN(const StragglerValidation v,
                   RunStragglerValidation(QuickStragglerPlan(), model, base, &predictions, progress));
  StragglerPartResult part;
  part.pass = v.pass;
  part.verdict = v.verdict;
  part.report = predictions.str() + FormatStragglerReport(v);
  absl::StrAppend(
      &part.report,
      absl::StrFormat(
          "# straggler part: %s: rank 1 at factor 2 with noise 0.3, N = 4, ring and ps-1: "
          "median |error| %s, max %s over %d judged, %d unjudged (targets: median <= %s, p90 <= %s)\n",
          v.verdict, Percent(v.straggler.median_abs), Percent(v.straggler.max_abs), v.judged, v.unjudged,
          Percent(kStragglerTargetMedian), Percent(kStragglerTargetP90)));
  return part;
}

}  // namespace psring::bench
