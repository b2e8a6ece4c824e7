// //bench:straggler_validate: the straggler model (bench/model/straggler_model.h) against held-out runs with
// injected stragglers: every condition of the plan is predicted and printed before it runs, then run with the
// scaling harness, then predicted vs measured step time per run, the median and p90 |error| over the judged
// runs against the targets (median <= 5 %, p90 <= 10 %), judged and unjudged counts.
//
//   ./bazelw run //bench:straggler_validate -- --plan=bench/results/plans/straggler_plan_2026-11-27.txt
//   ./bazelw run //bench:straggler_validate -- --quick          # compare's short part, under 2 minutes
//   ./bazelw run //bench:straggler_validate -- --plan=FILE --plan_only
//
// Writes the report to --out (when given) as well as stdout.
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/cmd/scaling_flags.h"
#include "bench/cmd/straggler_validation.h"
#include "bench/model/model_file.h"
#include "common/atomic_file.h"
#include "common/binary_main.h"
#include "common/flags_usage.h"
#include "common/runfiles.h"
#include "common/status_macros.h"

ABSL_FLAG(
    std::string, plan, "",
    "The held-out plan, a text file (bench/results/plans/straggler_plan_2026-11-27.txt is the committed one; "
    "its format is in bench/cmd/straggler_validation.h). A relative path is taken from where `bazel run` "
    "was typed. Not with --quick.");
ABSL_FLAG(
    bool, quick, false,
    "The short built-in plan //bench:compare runs: N = 4, mlp x 50, 60 steps on loopback, rank 1 at factor 2 "
    "with noise 0.3, ring and ps-1 (under 2 minutes).");
ABSL_FLAG(bool, plan_only, false, "Print the plan's predictions and the estimated run time; run nothing.");
ABSL_FLAG(std::string, out, "",
          "Also write the report to this file (relative: from where `bazel run` was typed).");

namespace psring::bench {
namespace {

absl::Status Run(const char* argv0) {
  const std::string plan_path = FromWhereTyped(absl::GetFlag(FLAGS_plan));
  if (plan_path.empty() == !absl::GetFlag(FLAGS_quick)) {
    return absl::InvalidArgumentError(
        "give exactly one of --plan=FILE (e.g. bench/results/plans/straggler_plan_2026-11-27.txt) and "
        "--quick");
  }
  ASSIGN_OR_RETURN(const std::string model_path, ModelFromFlags(argv0));
  if (model_path.empty()) {
    return absl::InvalidArgumentError(
        "the straggler model needs the calibrated exchange model: pass --model=FILE "
        "or leave it unset for the committed one");
  }
  ASSIGN_OR_RETURN(const proto::CostModelFile model, model::ReadModelFile(model_path));
  StragglerPlan plan = QuickStragglerPlan();
  if (!plan_path.empty()) {
    ASSIGN_OR_RETURN(plan, ReadStragglerPlanFile(plan_path));
  }
  const std::string origin =
      absl::StrCat("# plan: ", plan_path.empty() ? "the built-in quick plan" : plan_path, "\n");
  std::cout << origin;
  if (absl::GetFlag(FLAGS_plan_only)) {
    ASSIGN_OR_RETURN(const std::vector<StragglerRow> rows, PredictStragglerPlan(plan, model));
    StragglerValidation v;
    v.plan = plan;
    v.model_source = absl::StrCat(model.host(), ", ", model.date());
    v.rows = rows;
    for (const StragglerRow& r : rows) v.unjudged += r.condition.control ? 0 : 1;
    std::cout << FormatStragglerReport(v)
              << absl::StrFormat("# estimated run time: %.1f min\n",
                                 EstimateStragglerSeconds(plan, rows) / 60);
    return absl::OkStatus();
  }
  ScalingOptions base;
  RETURN_IF_ERROR(ApplyHarnessFlags(argv0, &base));
  ASSIGN_OR_RETURN(const StragglerValidation v,
                   RunStragglerValidation(plan, model, base, &std::cout, &std::cerr));
  const std::string report = origin + FormatStragglerReport(v);
  std::cout << report;
  if (const std::string out = FromWhereTyped(absl::GetFlag(FLAGS_out)); !out.empty()) {
    RETURN_IF_ERROR(WriteFileAtomically(out, report));
    std::cout << "# wrote " << out << "\n";
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace psring::bench

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Validates the straggler model on held-out runs with injected stragglers (a slow rank, log-normal "
      "noise, "
      "backup workers): predictions first, then the runs, then predicted vs measured step time and the "
      "verdict.\n"
      "  ./bazelw run //bench:straggler_validate -- "
      "--plan=bench/results/plans/straggler_plan_2026-11-27.txt\n"
      "  ./bazelw run //bench:straggler_validate -- --quick",
      {"bench/"});
  return psring::RunMain(argc, argv, "straggler_validate",
                         [argv](const std::vector<std::string>&) { return psring::bench::Run(argv[0]); });
}
