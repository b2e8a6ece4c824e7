// The calibration sweep (calibration.h): one RunScaling per condition, converted and fitted.
#include "bench/cmd/calibration.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bench/cmd/time_limit.h"
#include "bench/core/links.h"
#include "bench/model/exchange_topology.h"
#include "common/status_macros.h"

namespace psring::bench {
namespace {

// `base` as one gradient-mode sweep of the calibration: no workloads, buckets, timelines or projection.
ScalingOptions GradientSweep(const ScalingOptions& base, const std::vector<int>& nodes,
                             const std::vector<size_t>& sizes, const std::vector<Exchange>& exchanges, int steps,
                             int warmup_steps) {
  ScalingOptions o = base;
  o.mode = "gradient";
  o.workloads.clear();
  o.bucket_mbs.clear();
  o.timeline_dir.clear();
  o.projection = {};
  o.nodes = nodes;
  o.model_bytes = sizes;
  o.exchanges = exchanges;
  o.steps = steps;
  o.warmup_steps = warmup_steps;
  return o;
}

}  // namespace

absl::StatusOr<Calibration> RunCalibration(
    const CalibrationPlan& plan, const ScalingOptions& base, const model::FileInfo& info,
    std::ostream* progress,
    const std::function<absl::Status(const std::vector<model::MeasuredRun>&, const model::FileInfo&)>&
        keep_runs,
    absl::Duration time_limit) {
  RETURN_IF_ERROR(ValidatePlan(plan));
  const absl::Time start = absl::Now();
  SweepClock clock(time_limit, start);
  Calibration out;
  model::FileInfo fitted = info;  // and the hosts' TCP the emulated conditions ran under
  int index = 0;
  for (const CalibrationCondition& c : plan.conditions) {
    ++index;
    const double estimate_s = EstimateConditionSeconds(plan, c);
    if (const std::string why = clock.WhyNot(estimate_s); !why.empty()) {
      *progress << absl::StrFormat("# calibration condition %d/%d: %s, not run: %s\n", index,
                                   plan.conditions.size(), c.Name(), why);
      out.not_run.push_back(absl::StrCat(c.Name(), ": ", why));
      continue;
    }
    clock.Start();
    *progress << absl::StrFormat("# calibration condition %d/%d: %s (S = %s bytes, N = %s), %.0f s elapsed\n",
                                 index, plan.conditions.size(), c.Name(), absl::StrJoin(c.sizes, ","),
                                 absl::StrJoin(c.nodes, ","), absl::ToDoubleSeconds(absl::Now() - start));
    ScalingOptions o = GradientSweep(base, c.nodes, c.sizes, plan.exchanges, plan.steps, plan.warmup_steps);
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
    if (fitted.hosts_tcp.empty()) fitted.hosts_tcp = result->hosts_tcp;
    ASSIGN_OR_RETURN(const double burst_s, ParseLinkBurst(o.cluster.burst));
    ConvertedRuns converted =
        ConvertRecords(result->records, result->link_bytes_per_second, result->latency_s,
                       static_cast<double>(TbfBurstBytes(result->link_bytes_per_second, burst_s)), result->box_cores);
    out.total_runs += static_cast<int>(result->records.size());
    out.failed += converted.failed;
    out.emulator_bound += converted.emulator_bound;
    out.lossy += converted.lossy;
    out.skipped += converted.skipped;
    for (std::string& d : converted.dropped) out.dropped.push_back(absl::StrCat(c.Name(), ": ", d));
    out.runs.insert(out.runs.end(), converted.runs.begin(), converted.runs.end());
    clock.Ran(estimate_s);
  }
  out.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  if (keep_runs) RETURN_IF_ERROR(keep_runs(out.runs, fitted));
  if (IsSupplementary(plan)) {
    if (out.runs.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the supplementary sweep kept no usable run of its ", out.total_runs, " (", out.failed, " failed, ",
          out.emulator_bound, " EMULATOR-BOUND, ", out.not_run.size(),
          " condition(s) not run for the time limit): rerun it on a quieter machine or with a longer "
          "--time_limit"));
    }
    out.fitted = false;  // a model needs every exchange: the runs are kept for a merged refit
    return out;
  }
  absl::StatusOr<proto::CostModelFile> file = model::FitModel(out.runs, fitted);
  if (!file.ok()) {
    return absl::Status(
        file.status().code(),
        absl::StrCat("fitting ", out.runs.size(), " usable runs (", out.failed, " failed, ",
                     out.emulator_bound, " EMULATOR-BOUND dropped",
                     out.not_run.empty()
                         ? ""
                         : absl::StrCat(", ", out.not_run.size(),
                                        out.not_run.size() == 1 ? " condition" : " conditions",
                                        " not run (time limit)"),
                     "): ", file.status().message(),
                     out.failed + out.emulator_bound > 0
                         ? ". Runs were dropped: rerun on a quieter machine, or add sizes or N "
                           "(--sizes, --nodes) so every exchange keeps a usable run"
                         : ""));
  }
  out.file = *std::move(file);
  return out;
}

absl::StatusOr<proto::CpuModelFile> RunCpuCalibration(const model::CpuPlan& plan, const std::vector<size_t>& sizes,
                                                      int steps, int warmup_steps, const ScalingOptions& base,
                                                      const proto::CostModelFile* model,
                                                      const model::CpuHostInfo& info, std::ostream* progress) {
  const absl::Time start = absl::Now();
  std::vector<model::MeasuredRun> runs;
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    const model::CpuRunPlan& run = plan.runs[i];
    Exchange exchange = Exchange::kRing;
    for (Exchange e : AllExchanges()) {
      if (TopologyOf(e) == run.topology) exchange = e;
    }
    const std::string what = absl::StrFormat("%s N=%d", ExchangeName(exchange), run.nodes);
    *progress << absl::StrFormat("# cpu run %d/%d: %s (K = %d, %d processes), S = %s bytes, %.0f s elapsed\n", i + 1,
                                 plan.runs.size(), what, run.servers, run.processes, absl::StrJoin(sizes, ","),
                                 absl::ToDoubleSeconds(absl::Now() - start));
    ScalingOptions o = GradientSweep(base, {run.nodes}, sizes, {exchange}, steps, warmup_steps);
    o.ps_servers = std::max(run.servers, 1);
    o.cluster.force_loopback = true;
    o.cluster.link = "";
    o.cluster.latency = "";
    absl::StatusOr<SweepResult> result = RunScaling(o, progress);
    if (!result.ok()) {
      return absl::Status(result.status().code(), absl::StrCat("cpu run ", what, ": ", result.status().message()));
    }
    std::vector<RunRecord> records = result->records;
    for (RunRecord& r : records) r.emulator_bound = false;  // the box's CPU is what binds here, by design
    ConvertedRuns converted = ConvertRecords(records, 0, 0, 0, result->box_cores);
    for (const std::string& d : converted.dropped) *progress << "# cpu run dropped: " << d << "\n";
    runs.insert(runs.end(), converted.runs.begin(), converted.runs.end());
  }
  *progress << absl::StrFormat("# cpu runs done in %.0f s\n", absl::ToDoubleSeconds(absl::Now() - start));
  return model::SummarizeCpuRuns(runs, model, plan, info);
}

}  // namespace psring::bench
