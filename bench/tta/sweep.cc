#include "bench/tta/sweep.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/harness/runner.h"
#include "common/status_macros.h"

namespace psring::bench::tta {
namespace {

// The harness's options of one run of `cell`.
ScalingOptions RunOptions(const TtaOptions& o, const Cell& cell) {
  ScalingOptions s = o.base;
  s.mode = "train";
  s.nodes = {cell.nodes};
  s.exchanges = {cell.variant.exchange};
  s.steps = o.max_steps;
  s.ps_mode = cell.variant.ps_mode;
  s.server_args.insert(s.server_args.end(), cell.variant.server_args.begin(), cell.variant.server_args.end());
  // After the harness's own worker flags (its --evaluate=false among them), so these win.
  std::vector<std::string> args = {absl::StrCat("--seed=", o.seed),
                                   absl::StrCat("--eval_every=", o.eval_every),
                                   absl::StrCat("--eval_samples=", o.eval_samples),
                                   absl::StrCat("--target_accuracy=", o.target), "--evaluate=true"};
  const std::vector<std::string> straggler = StragglerArgs(cell);
  args.insert(args.end(), straggler.begin(), straggler.end());
  s.worker_args.insert(s.worker_args.end(), args.begin(), args.end());
  // A bound for a run that hangs: a generous second per step (a step of N = 8 on two cores is ~0.1 s).
  if (s.job_timeout_s <= 0) s.job_timeout_s = 120 + 1.0 * o.max_steps;
  return s;
}

std::string Outcome(const TtaRun& run, double target) {
  if (!run.ok()) return absl::StrCat("FAILED: ", run.error);
  std::string text =
      run.reached
          ? absl::StrFormat("reached %.1f%% at step %d in %.2f s", 100 * target, run.steps_to_target,
                            run.wall_to_target_s)
          : absl::StrFormat("never reached %.1f%% in %d steps (best %.2f%%)", 100 * target, run.steps,
                            100 * run.best_accuracy);
  absl::StrAppendFormat(&text, ", %.4f s/step, final test accuracy %.2f%%", run.step_s, 100 * run.final_accuracy);
  if (run.straggler_rank >= 0) absl::StrAppendFormat(&text, ", held back by rank %d", run.straggler_rank);
  return text;
}

}  // namespace

absl::StatusOr<std::vector<TtaRun>> RunGrid(const TtaOptions& o, Cluster* cluster, std::ostream* progress) {
  ASSIGN_OR_RETURN(const std::vector<Cell> cells, PlanGrid(o));
  std::vector<TtaRun> runs;
  const int total = static_cast<int>(cells.size()) * o.reps;
  int index = 0;
  for (const Cell& cell : cells) {
    const ScalingOptions options = RunOptions(o, cell);
    Runner runner(options, cluster, progress, /*profiles=*/{});
    for (int rep = 1; rep <= o.reps; ++rep) {
      ++index;
      *progress << absl::StrFormat("[%d/%d] %-11s N=%-2d factor %-4g rep %d/%d ...", index, total, cell.variant.name,
                                   cell.nodes, cell.factor, rep, o.reps)
                << std::flush;
      const RunRecord record = runner.Run(cell.variant.exchange, cell.nodes, /*bytes=*/0, /*workload=*/"",
                                          /*bucket_mb=*/-1, index);
      runs.push_back(SummarizeRun(cell, rep, record, o.target));
      *progress << " " << Outcome(runs.back(), o.target) << absl::StrFormat(" [job %.0f s]\n", record.wall_s)
                << std::flush;
    }
  }
  return runs;
}

}  // namespace psring::bench::tta
