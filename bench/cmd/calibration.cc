// The calibration sweep (calibration.h): one RunScaling per condition, converted and fitted.
#include "bench/cmd/calibration.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bench/core/links.h"
#include "common/status_macros.h"

namespace psring::bench {

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
                       static_cast<double>(TbfBurstBytes(result->link_bytes_per_second, burst_s)), result->box_cores);
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

}  // namespace psring::bench
