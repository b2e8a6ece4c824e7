// The flags //bench:scaling and //bench:compare share, defined once here (the sweep's own flags are in
// scaling_main.cc, the links' in cluster_flags.cc): where the worker programs are, --verbose and --out_dir.
#ifndef PSRING_BENCH_SCALING_FLAGS_H_
#define PSRING_BENCH_SCALING_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/core/run_record.h"

namespace psring::bench {

// The calibration of psring's development machine committed with the source (bench/results/), as a runfile of
// //bench:scaling and //bench:compare: the cost model they use unless told otherwise (--model). Recalibrating means
// changing it here and in bench/BUILD.bazel's data.
inline constexpr char kCommittedModelRunfile[] = "psring/bench/results/committed_model.json";

// Its path in `argv0`'s runfiles; kNotFound saying what to pass instead (`flag`: the flag that takes a path).
absl::StatusOr<std::string> CommittedModelPath(const char* argv0, const std::string& flag);

// Fills options->cluster (the link flags), --verbose, the model (--model: options->model_path, "" for
// --model=none), the projection's CPU ceilings (--cpu_model: options->cpu_model_path, read and validated
// here: kInvalidArgument / kNotFound naming the file and field), the projection target (--project_link, --project_latency; options->projection stays as it is
// when --project_link is empty) and the paths of the programs options->exchanges launch
// (--ring_worker/--ps_server/--ps_worker, else the Bazel runfiles of this binary, found from argv0).
// kNotFound naming the flag to pass when a program cannot be located. Call after absl::ParseCommandLine.
absl::Status ApplyHarnessFlags(const char* argv0, ScalingOptions* options);

// --model: the committed model's path for "" (kNotFound outside Bazel's runfiles, naming the flag), "" for
// "none", else the file given (kNotFound when it cannot be read).
absl::StatusOr<std::string> ModelFromFlags(const char* argv0);

// --out_dir, or $BUILD_WORKSPACE_DIRECTORY/out/<name> under `bazel run`, or else a fresh private directory
// $TMPDIR/psring-<name>-XXXXXX (mkdtemp, mode 0700; TMPDIR default /tmp), so nobody can plant a link or a
// file where the suite writes. kInternal when that directory cannot be made.
absl::StatusOr<std::string> OutDirFromFlags(const std::string& name);

}  // namespace psring::bench

#endif  // PSRING_BENCH_SCALING_FLAGS_H_
