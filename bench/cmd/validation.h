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
// A sweep is one RunScaling call (one fresh emulated cluster for its link rate and latency); every condition
// of the sweep is predicted and printed before the call. Blocking: RunValidation blocks for the whole plan
// (minutes).
#ifndef PSRING_BENCH_VALIDATION_H_
#define PSRING_BENCH_VALIDATION_H_

#include <ostream>

#include "absl/status/statusor.h"
#include "bench/core/run_record.h"
#include "bench/harness/sweep.h"
#include "bench/model/cost_model_file.pb.h"
#include "bench/model/held_out.h"
#include "bench/report/validation_report.h"

namespace psring::bench {

// Runs the plan: per sweep, predictions of every condition on `out` first, then RunScaling, then the rows.
// The noise sweep runs ValidationPlan::noise_runs times; its first run gives the rows. RunScaling's errors
// naming the sweep; kFailedPrecondition when a sweep fell back to loopback (no link to validate on).
absl::StatusOr<Validation> RunValidation(const ValidationPlan& plan, const proto::CostModelFile& model,
                                         const ScalingOptions& base, std::ostream* out, std::ostream* progress);

}  // namespace psring::bench

#endif  // PSRING_BENCH_VALIDATION_H_
