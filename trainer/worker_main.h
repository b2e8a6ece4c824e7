// What //ring:ring_worker and //ps:worker share: the flags every worker rank takes and the whole flow of a
// rank. The two binaries differ only in how they build their GradientExchange (a factory) and in what they
// do once the work is done (a barrier, shutting the servers down).
//
//   int main(int argc, char** argv) {
//     psring::InitFlagsUsage("A ring rank.\n  ...", {"common/", "trainer/", "ring/"});
//     return psring::trainer::WorkerMain(argc, argv, "ring_worker",
//         [](const WorkerOptions& o) -> absl::StatusOr<WorkerExchange> { ... });
//   }
//
// Flags defined here (trainer/worker_main.cc), besides the training flags (trainer/train_flags.h) and the
// cluster flags (common/cluster_env.h): --timeout, --model_bytes, --warmup_steps, --workload,
// --compute_scale, --timeline. Their defaults are those of WorkerOptions and GradientOnlyOptions.
#ifndef PSRING_TRAINER_WORKER_MAIN_H_
#define PSRING_TRAINER_WORKER_MAIN_H_

#include <functional>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/cluster_env.h"
#include "trainer/exchange.h"
#include "trainer/gradient_only.h"
#include "trainer/train.h"

namespace psring::trainer {

struct WorkerOptions {
  ClusterEnv env;
  TrainOptions train;
  // Bound on every wait for other processes (connecting, each collective or call); exchanges take it over.
  absl::Duration timeout = absl::Seconds(60);
  // bytes > 0 or layers (replay mode, --workload): gradient-only mode (trainer/gradient_only.h) instead of
  // training; steps from --max_steps.
  GradientOnlyOptions gradient_only;
  std::string workload;        // replay mode: the profile's name (or path); "" otherwise
  double compute_scale = 1;    // replay mode: multiplies the profile's compute times
  // Non-empty: write this rank's Chrome trace-event timeline there ("{rank}" expands to the rank; without
  // it ".rank<r>" goes before the extension).
  std::string timeline;
  // Non-empty (training only): write the final parameters there as raw little-endian float32, layout order
  // ("{rank}" as for timeline), so a runbook can compare ranks exactly and against a one-rank run.
  std::string params_out;
};

// An exchange built by a worker binary, and what to run after the work before the result line is printed
// (empty: nothing).
struct WorkerExchange {
  std::unique_ptr<GradientExchange> exchange;
  std::function<absl::Status()> finish;
};

using ExchangeFactory = absl::FunctionRef<absl::StatusOr<WorkerExchange>(const WorkerOptions&)>;

// Reads the cluster, training and worker flags. kInvalidArgument naming the flag for a value out of range.
absl::StatusOr<WorkerOptions> WorkerOptionsFromFlags();

// One rank: picks the GPU for the local rank (unless --device=cpu) before anything touches CUDA, builds the
// exchange, trains (or runs gradient-only mode), runs `finish` and prints the rank's PSRING_RESULT line
// (common/worker_result.h). Blocks until the job ends; errors as they are, with context.
absl::Status RunWorker(const WorkerOptions& options, ExchangeFactory make_exchange);

// main() of a worker binary, after InitFlagsUsage: parses the flags, reads WorkerOptionsFromFlags and calls
// RunWorker. Returns the exit code (common/exit_codes.h); errors are one line "<name>: <status>" on stderr.
// The timeline path of `rank` for --timeline=`pattern`.
std::string RankTimelinePath(const std::string& pattern, int rank);

int WorkerMain(int argc, char** argv, absl::string_view name, ExchangeFactory make_exchange);

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_WORKER_MAIN_H_
