// The emulated cluster's flags, defined once for every bench binary that builds one (//bench:scaling,
// //bench:compare, //bench:cluster_run): --link, --latency, --latency_method, --netdelay, --queue, --loopback. Their defaults are
// ClusterOptions's (bench/cluster.h).
#ifndef PSRING_BENCH_EMULATOR_CLUSTER_FLAGS_H_
#define PSRING_BENCH_EMULATOR_CLUSTER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "bench/emulator/cluster.h"

namespace psring::bench {

// //bench/emulator:netdelay in the runfiles of every binary that has it as data.
inline constexpr char kNetdelayRunfile[] = "psring/bench/emulator/netdelay";

// ClusterOptions with the link flags applied (hosts keeps its default: the caller knows how many it needs).
// Call after absl::ParseCommandLine.
// `argv0` locates //bench:netdelay in the binary's runfiles when --netdelay is not given.
ClusterOptions ClusterOptionsFromFlags(const char* argv0);

// //bench:cluster_run's command for host `host`: {rank}, {world}, {addr} and {master_addr} replaced in every
// argument, and every argument that names an existing file or folder relative to `workspace` (not empty:
// $BUILD_WORKSPACE_DIRECTORY under `bazel run`, whose working directory is the runfiles tree) made absolute,
// so `bench/tools/gloo_allreduce.py` works as typed in the workspace. Absolute paths, flags (-x, --x=...)
// and words that name nothing there stay as they are.
std::vector<std::string> HostCommand(const std::vector<std::string>& command, int host, int hosts,
                                     absl::string_view addr, absl::string_view master_addr,
                                     absl::string_view workspace);

}  // namespace psring::bench

#endif  // PSRING_BENCH_EMULATOR_CLUSTER_FLAGS_H_
