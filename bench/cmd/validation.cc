// The held-out validation's runs (validation.h): per sweep, predictions first, then RunScaling, then the rows.
#include "bench/cmd/validation.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/core/cluster.h"
#include "bench/core/links.h"
#include "bench/model/calibration_plan.h"
#include "bench/model/model_file.h"
#include "common/status_macros.h"

namespace psring::bench {

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
  // Every sweep runs on this machine's emulated links (predicted before the cluster exists): their burst and
  // the cores all processes share.
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
            return r.exchange == row.exchange && conditions[c].Matches(r);
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
