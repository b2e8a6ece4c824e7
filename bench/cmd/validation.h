// Held-out validation of the frozen cost model on the harness (bench/PERFORMANCE.md 9.4): for the conditions
// of a ValidationPlan (bench/model/held_out.h: the plans, the held-out selection, predictions and statistics),
// the model's prediction is printed BEFORE the condition runs; then it runs, and predicted and measured rows
// are joined and summarized. The report and scatter plot are bench/report/validation_report.h.
//
//   ASSIGN_OR_RETURN(proto::CostModelFile model, model::ReadModelFile("model.json"));
//   ASSIGN_OR_RETURN(HeldOutSelection held_out, SelectHeldOut(QuickValidationPlan(), model));
//   ASSIGN_OR_RETURN(Validation v, RunValidation(held_out.plan, model, base, &std::cout, &std::cerr));
//   std::cout << FormatValidationReport(v);
//   WriteFileAtomically("validation.svg", ValidationScatterSvg(v.rows, title));
//
// A plan of the user's own conditions comes from a JSON file (ValidationPlanFile in
// bench/model/cost_model_file.proto; bench/results/plans/example_plan.json):
//
//   ASSIGN_OR_RETURN(ValidationPlan plan, ReadValidationPlanFile("my_plan.json"));
//
// A sweep is one RunScaling call (one fresh emulated cluster for its link rate and latency); every condition
// of the sweep is predicted and printed before the call. Blocking: RunValidation blocks for the whole plan
// (minutes).
#ifndef PSRING_BENCH_VALIDATION_H_
#define PSRING_BENCH_VALIDATION_H_

#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bench/core/run_record.h"
#include "bench/harness/sweep.h"
#include "bench/model/cost_model_file.pb.h"
#include "bench/model/held_out.h"
#include "bench/report/validation_report.h"

namespace psring::bench {

// The plan a ValidationPlanFile (JSON; `origin`, a path, names it in errors) describes: every field mapped
// onto ValidationPlan (exchanges default to every exchange, noise_sweep to 0, noise_runs to 2, bytes_scale to
// 1). kInvalidArgument naming `origin`, the sweep (sweeps[i]) and the field, and saying what to write
// instead, for: an unknown field, no sweeps, a link or latency that does not parse, no N or an N < 1, a mode
// other than gradient or replay, sizes (gradient) or workloads and bucket caps (replay) missing or invalid, a
// field of the other mode, an unknown or repeated exchange, sweeps naming different exchanges (a plan runs
// the same in every sweep), noise_sweep not a sweep, noise_runs < 1. Replayed workloads are loaded (presets
// or files).
absl::StatusOr<ValidationPlan> ParseValidationPlanFile(absl::string_view json, absl::string_view origin);
// kNotFound when `path` cannot be read, else ParseValidationPlanFile's errors.
absl::StatusOr<ValidationPlan> ReadValidationPlanFile(const std::string& path);

// The PREDICTED line of every condition of the plan, as RunValidation prints them before each sweep runs, on
// this machine's emulated links (`burst`: the tbf burst, e.g. "10ms", ClusterOptions::burst; `queue`: the
// links' queue where a sweep sets none, ClusterOptions::queue) and cores; runs nothing (validate
// --plan_only). ValidateModelFile's errors, the burst's and queue's, and the predictor's naming nothing run.
absl::Status PrintPredictions(const ValidationPlan& plan, const proto::CostModelFile& model,
                              const std::string& burst, const std::string& queue, std::ostream* out);

// Runs the plan: per sweep, predictions of every condition on `out` first, then RunScaling, then the rows.
// The noise sweep runs ValidationPlan::noise_runs times; its first run gives the rows. RunScaling's errors
// naming the sweep; kFailedPrecondition when a sweep fell back to loopback (no link to validate on).
//
// `time_limit` (from the call's start): a sweep (or a repeat of the noise sweep) whose end, by the model's
// estimate (EstimateSweepSeconds) times the pace of the sweeps run so far (bench/cmd/time_limit.h), would
// fall past it is not started; its rows are kept, ValidationRow::out_of_time, and the report counts them
// apart. Later sweeps that still fit run. For a machine lent for a fixed time: a plan longer than the call
// still reports what it measured, instead of being killed with nothing.
absl::StatusOr<Validation> RunValidation(const ValidationPlan& plan, const proto::CostModelFile& model,
                                         const ScalingOptions& base, std::ostream* out,
                                         std::ostream* progress,
                                         absl::Duration time_limit = absl::InfiniteDuration());

}  // namespace psring::bench

#endif  // PSRING_BENCH_VALIDATION_H_
