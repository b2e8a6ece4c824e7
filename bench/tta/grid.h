// Time to accuracy (issue 35, item 3): what a run of //bench:time_to_accuracy is, what it measured, and the
// median of its repetitions. Plain data and pure functions; the runs are bench/tta/sweep.h's, the table,
// files and plot bench/tta/report.h's.
//
//   variant      exchange        what the processes get
//   ring         ring            the TCP ring allreduce (trainer owns the optimizer)
//   ps-sync      ps-1            one PS shard, --mode=sync: a step averages all N pushes
//   ps-backupB   ps-1            --mode=sync --backup_workers=B: a step averages the first N - B pushes
//   ps-asyncS    ps-1            --mode=async --staleness=S: pushes applied on arrival, no rank > S steps ahead
//
// A cell is (variant, N, straggler factor); its runs are repetitions with the same seed. Every worker trains
// the MLP on Fashion-MNIST with --eval_every=K --eval_samples=M --target_accuracy=T (trainer/eval_held_out.h):
// rank 0 evaluates the real model on the first M test images every K steps and all ranks stop at the first
// evaluation that reaches T. A factor > 1 injects one straggler, the last rank (--straggler=N-1:F; rank 0,
// which evaluates, is never the slow one). A run that never reaches T within --max_steps reports its best
// accuracy and no time.
//
//   ASSIGN_OR_RETURN(std::vector<Variant> variants, ParseVariants({"ring", "ps-backup1"}));
//   TtaRun run = SummarizeRun(cell, rep, record, /*target=*/0.85);
//   std::vector<TtaCell> cells = MedianCells(runs);
//
// Thread-safety: pure functions.
#ifndef PSRING_BENCH_TTA_GRID_H_
#define PSRING_BENCH_TTA_GRID_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/core/exchange.h"
#include "bench/core/run_record.h"

namespace psring::bench::tta {

struct Variant {
  std::string name;                      // "ring", "ps-sync", "ps-backup1", "ps-async4"
  Exchange exchange = Exchange::kRing;
  std::string ps_mode = "sync";          // the servers' --mode
  std::vector<std::string> server_args;  // --backup_workers=B or --staleness=S
  int backup_workers = 0;
};

// Parses the names of the table above (B >= 1, S >= 1). kInvalidArgument naming the bad one and the forms.
absl::StatusOr<std::vector<Variant>> ParseVariants(const std::vector<std::string>& names);

// One cell of the grid.
struct Cell {
  Variant variant;
  int nodes = 0;
  double factor = 1;  // the straggler's factor; 1: none
};

// The grid, variant-major: for every N, every factor, every variant (so a cell's runs are adjacent when
// reps are the innermost loop of the caller). kInvalidArgument for backup workers >= N.
absl::StatusOr<std::vector<Cell>> PlanCells(const std::vector<Variant>& variants, const std::vector<int>& nodes,
                                            const std::vector<double>& factors);

// "--straggler=3:2" for a factor > 1 at N = 4 (the last rank); empty for factor 1.
std::vector<std::string> StragglerArgs(const Cell& cell);

// What one run measured.
struct TtaRun {
  Cell cell;
  int rep = 0;             // 1-based
  std::string error;       // non-empty: the run failed; nothing below is valid
  bool reached = false;    // some evaluation's accuracy >= the target
  int steps_to_target = -1;      // steps done at the first such evaluation (-1: not reached)
  double wall_to_target_s = -1;  // its wall_s: seconds since the first step, evaluation pauses left out
  double best_accuracy = 0;      // over the run's evaluations (held-out subset)
  double final_accuracy = -1;    // the full test set after the last step (-1: not evaluated)
  int steps = 0;                 // steps every rank took
  double step_s = 0;             // slowest rank's mean step time, evaluation pauses left out
  int straggler_rank = -1;       // the rank the arrival attribution named (-1: none stood out)
  double job_s = 0;              // the whole job, start-up and evaluations included
  std::vector<RunRecord::Evaluation> curve;
  bool ok() const { return error.empty(); }
};

// The run's figures from its record against `target` (a fraction). A record without evaluations is an
// error run (the workers did not evaluate: an older binary).
TtaRun SummarizeRun(const Cell& cell, int rep, const RunRecord& record, double target);

// The median (and min, max) of a cell's runs. Time and steps to the target are over the runs that reached
// it only; `reached` says how many did.
struct Stat {
  double median = 0;
  double min = 0;
  double max = 0;
  int count = 0;  // values it is over (0: median, min and max are meaningless)
};
Stat StatOf(std::vector<double> values);

struct TtaCell {
  Cell cell;
  int runs = 0;        // runs that succeeded
  int failed = 0;      // runs that failed (errors)
  int reached = 0;     // successful runs that reached the target
  Stat wall_to_target_s;
  Stat steps_to_target;
  Stat final_accuracy;
  Stat best_accuracy;
  Stat step_s;
  int straggler_named = 0;  // runs whose attribution named the injected straggler (factor > 1)
  int median_rep = 0;  // the run whose curve stands for the cell (median time to target, else median best)
  std::string first_error;
};

struct TtaOptions {
  // Binaries, data set, data_dir, batch size, hidden widths, worker_args, timeouts; mode, steps, ps_mode
  // and server_args are set per run.
  ScalingOptions base;
  std::vector<std::string> exchanges = {"ring", "ps-sync", "ps-backup1", "ps-async1", "ps-async4"};
  std::vector<int> nodes = {4, 8};
  std::vector<double> factors = {1, 1.5, 2, 4};
  int reps = 3;
  double target = 0.85;     // test accuracy (fraction) on the held-out subset
  int max_steps = 1500;     // per run, when the target is not reached first
  int eval_every = 25;      // steps between evaluations
  int eval_samples = 5000;  // the first test images
  uint64_t seed = 1;
};

// Checks the options and plans the cells (kInvalidArgument naming the flag).
absl::StatusOr<std::vector<Cell>> PlanGrid(const TtaOptions& options);

// One TtaCell per distinct cell of `runs`, in the order cells first appear.
std::vector<TtaCell> MedianCells(const std::vector<TtaRun>& runs);

}  // namespace psring::bench::tta

#endif  // PSRING_BENCH_TTA_GRID_H_
