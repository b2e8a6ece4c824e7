// Runs the time-to-accuracy grid (bench/tta/grid.h) on a cluster through the harness's runner
// (bench/harness/runner.h): every cell `reps` times, each run the real workers (and PS shard) training the MLP
// on Fashion-MNIST until the target or --max_steps, with a progress line per run.
//
//   TtaOptions options;  options.base = ...;  // bench/tta/grid.h; base: binaries, data set, batch size
//   ASSIGN_OR_RETURN(std::vector<TtaRun> runs, RunGrid(options, cluster.get(), &std::cerr));
//
// Seeds: every run of a cell uses --seed=options.seed, so the initial parameters and each rank's data order
// are the same in every repetition. What differs between repetitions is timing, and what timing decides:
// the ring and the sync PS produce the same model step for step (both sum in a fixed order: the ring's
// schedule, the servers' rank order whatever the arrival order), so their steps to the target and accuracies
// repeat exactly and only times vary; with backup workers, which pushes a step drops depends on arrival, and
// under async updates the order in which pushes are applied (and how stale each is) depends on timing, so
// their curves, steps and accuracies differ from run to run.
//
// Blocking: minutes. Not thread-safe: one grid at a time on a cluster.
#ifndef PSRING_BENCH_TTA_SWEEP_H_
#define PSRING_BENCH_TTA_SWEEP_H_

#include <ostream>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/core/cluster.h"
#include "bench/core/run_record.h"
#include "bench/tta/grid.h"

namespace psring::bench::tta {

// Every cell `reps` times on `cluster` (which must have hosts for the largest N plus the PS shard). A run
// that fails is kept with its error and the grid goes on.
absl::StatusOr<std::vector<TtaRun>> RunGrid(const TtaOptions& options, Cluster* cluster, std::ostream* progress);

}  // namespace psring::bench::tta

#endif  // PSRING_BENCH_TTA_SWEEP_H_
