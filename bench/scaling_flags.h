// Flags shared by //bench:scaling and //bench:compare (defined once in scaling_flags.cc): where the worker
// binaries are, the emulated links, and where outputs go.
#ifndef PSRING_BENCH_SCALING_FLAGS_H_
#define PSRING_BENCH_SCALING_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/scaling.h"

namespace psring::bench {

// Makes --help list the flags of every bench/ file (the shared ones live in scaling_flags.cc, not in main's
// file). Call before absl::ParseCommandLine.
void IncludeBenchFlagsInHelp();

// Fills binaries (--ring_worker/--ps_server/--ps_worker, else the Bazel runfiles of this binary, found from
// argv0), links (--link, --delay, --loopback) and --verbose. kNotFound naming the flag to pass when a
// binary cannot be located.
absl::Status ApplySharedFlags(const char* argv0, ScalingOptions* options);

// --out_dir, or $BUILD_WORKSPACE_DIRECTORY/out/<name> under `bazel run`, or /tmp/psring-<name>.
std::string OutDirFromFlags(const std::string& name);

// "1,2,4,8" -> {1, 2, 4, 8}; kInvalidArgument naming `flag` on a bad entry.
absl::StatusOr<std::vector<int>> ParseIntList(const std::vector<std::string>& items, const std::string& flag);

// Runs the sweep, prints the report (and the verdict when `verdict`), writes CSV/JSON/SVG into out_dir.
// Returns non-OK when a run failed or a result had wrong elements, so scripts see it.
absl::Status RunAndReport(const ScalingOptions& options, const std::string& out_dir, bool verdict);

// The same report and files from the measured rows of an earlier run's scaling.csv (nothing is launched); the
// options give the mode, link, K and extrapolation the figures are computed with.
absl::Status ReportFromCsv(const ScalingOptions& options, const std::string& csv_path, const std::string& out_dir);

}  // namespace psring::bench

#endif  // PSRING_BENCH_SCALING_FLAGS_H_
