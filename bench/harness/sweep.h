// The harness's sweep: runs the real worker binaries (ring and parameter server) on a cluster (bench/core/
// cluster.h; the emulated one unless the options give another) for several node counts, exchanges, sizes,
// workloads and bucket caps, and returns one record per run. It measures and classifies (EMULATOR-BOUND);
// it never fits, predicts or prints a report: bench/model/ fits, bench/report/ prints, bench/cmd/ joins them.
//
//   ScalingOptions options;                 // defaults: N = 1,2,4,8; all exchanges; S = 16 MiB; 100mbit
//   options.binaries = {ring_worker, ps_server, ps_worker};   // paths (bench/cmd/scaling_flags.h finds them)
//   ASSIGN_OR_RETURN(SweepResult sweep, RunScaling(options, &std::cerr));   // progress on stderr
//
// One run = one exchange at one N (and one S): N worker processes, each on the host its placement names
// (bench/core/exchange.h), plus the PS servers, started with the command lines of bench/harness/launch.h
// (one run: bench/harness/runner.h). A run that fails is recorded with its error and the others go on. Every
// launched job has a timeout after which its process groups are killed. bench/PERFORMANCE.md defines every
// figure.
//
// Blocking: RunScaling blocks for the whole sweep (minutes). Not thread-safe: it owns the cluster.
#ifndef PSRING_BENCH_HARNESS_SWEEP_H_
#define PSRING_BENCH_HARNESS_SWEEP_H_

#include <ostream>

#include "absl/status/statusor.h"
#include "bench/core/run_record.h"

namespace psring::bench {

absl::StatusOr<SweepResult> RunScaling(const ScalingOptions& options, std::ostream* progress);

}  // namespace psring::bench

#endif  // PSRING_BENCH_HARNESS_SWEEP_H_
