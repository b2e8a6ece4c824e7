// The flags //bench:scaling and //bench:compare share, defined once here (the sweep's own flags are in
// scaling_main.cc, the links' in cluster_flags.cc): where the worker programs are, --verbose and --out_dir.
#ifndef PSRING_BENCH_SCALING_FLAGS_H_
#define PSRING_BENCH_SCALING_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "bench/scaling.h"

namespace psring::bench {

// Fills options->cluster (the link flags), --verbose, the projection target (--project_link,
// --project_latency; options->projection stays as it is when --project_link is empty) and the paths of the programs options->exchanges launch
// (--ring_worker/--ps_server/--ps_worker, else the Bazel runfiles of this binary, found from argv0).
// kNotFound naming the flag to pass when a program cannot be located. Call after absl::ParseCommandLine.
absl::Status ApplyHarnessFlags(const char* argv0, ScalingOptions* options);

// --out_dir, or $BUILD_WORKSPACE_DIRECTORY/out/<name> under `bazel run`, or /tmp/psring-<name>.
std::string OutDirFromFlags(const std::string& name);

}  // namespace psring::bench

#endif  // PSRING_BENCH_SCALING_FLAGS_H_
