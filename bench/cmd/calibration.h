// The calibration sweep of the frozen cost model: runs a CalibrationPlan (bench/model/calibration_plan.h, the
// plans, the conversion of records and the Calibration it returns) on the harness and fits it once
// (bench/PERFORMANCE.md 9.3); the report is bench/report/calibration_report.h.
//
//   CalibrationPlan plan = QuickCalibrationPlan();          // or DefaultCalibrationPlan(), or edit it
//   ScalingOptions base;                                    // binaries, queue, latency method (the flags)
//   ASSIGN_OR_RETURN(Calibration c, RunCalibration(plan, base, {"box", "2026-12-01", ""}, &std::cerr));
//   std::cout << FormatCalibration(c);
//   RETURN_IF_ERROR(model::WriteModelFile("model.json", c.file));
//
// Each condition (link rate, latency, or loopback) is one RunScaling call, so each gets a fresh emulated
// cluster.
//
// Blocking: RunCalibration blocks for the whole sweep (minutes), RunCpuCalibration for its runs (< 2 minutes on
// 2 cores).
#ifndef PSRING_BENCH_CALIBRATION_H_
#define PSRING_BENCH_CALIBRATION_H_

#include <functional>
#include <ostream>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/core/run_record.h"
#include "bench/harness/sweep.h"
#include "bench/model/calibration_plan.h"
#include "bench/model/cpu_model.h"
#include "bench/model/fit.h"
#include "bench/report/calibration_report.h"

namespace psring::bench {

// Runs the plan (one RunScaling per condition, progress on `progress`), converts and fits. `base` carries
// the programs and the link flags other than rate and latency (queue, latency method, delay program).
// kInvalidArgument from ValidatePlan; RunScaling's errors naming the condition; FitModel's (e.g. an exchange
// without any usable run over a rate-limited link: the message says which). `keep_runs`, when set, gets the
// usable runs before the fit, so a sweep whose fit fails (every run of one exchange dropped) still keeps its
// measurements (calibrate writes them to --runs_out, to be merged into another refit), with `info` and the
// hosts' TCP the emulated conditions ran under (FileInfo::hosts_tcp, which the model file records too); its
// error is returned before the fit. `time_limit` (from the call's start): a condition that would end past it,
// by EstimateSeconds of it times the pace of those run so far (bench/cmd/time_limit.h), is not run and listed
// in Calibration::not_run; the fit is over the others (and may then lack an exchange: FitModel's error, the
// runs kept as above). A plan of fewer than every exchange (IsSupplementary: a supplementary sweep) is not
// fitted, as a model file needs every exchange: Calibration::fitted is false and the runs go to `keep_runs`
// only (kFailedPrecondition where none is usable).
absl::StatusOr<Calibration> RunCalibration(
    const CalibrationPlan& plan, const ScalingOptions& base, const model::FileInfo& info,
    std::ostream* progress,
    const std::function<absl::Status(const std::vector<model::MeasuredRun>&, const model::FileInfo&)>&
        keep_runs = nullptr,
    absl::Duration time_limit = absl::InfiniteDuration());

// //bench:calibrate --cpu_only: the plan's loopback runs (every process on this host, unlimited links; one
// RunScaling per exchange and N, gradient mode at each of `sizes`, `warmup_steps` + `steps` steps), and this
// host's CPU ceilings from them (bench/model/cpu_model.h SummarizeCpuRuns; `model` supplies the software term,
// nullptr: none). On loopback a saturated box is what is measured, so EMULATOR-BOUND runs are kept; failed runs
// are dropped and named on `progress`. RunScaling's errors naming the exchange and N; SummarizeCpuRuns'.
absl::StatusOr<proto::CpuModelFile> RunCpuCalibration(const model::CpuPlan& plan, const std::vector<size_t>& sizes,
                                                      int steps, int warmup_steps, const ScalingOptions& base,
                                                      const proto::CostModelFile* model,
                                                      const model::CpuHostInfo& info, std::ostream* progress);

}  // namespace psring::bench

#endif  // PSRING_BENCH_CALIBRATION_H_
