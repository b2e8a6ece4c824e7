// The emulated cluster's flags, defined once for every bench binary that builds one (//bench:scaling,
// //bench:compare, //bench:cluster_run): --link, --latency, --latency_method, --netdelay, --queue, --loopback. Their defaults are
// ClusterOptions's (bench/cluster.h).
#ifndef PSRING_BENCH_CLUSTER_FLAGS_H_
#define PSRING_BENCH_CLUSTER_FLAGS_H_

#include "bench/cluster.h"

namespace psring::bench {

// ClusterOptions with the link flags applied (hosts keeps its default: the caller knows how many it needs).
// Call after absl::ParseCommandLine.
// `argv0` locates //bench:netdelay in the binary's runfiles when --netdelay is not given.
ClusterOptions ClusterOptionsFromFlags(const char* argv0);

}  // namespace psring::bench

#endif  // PSRING_BENCH_CLUSTER_FLAGS_H_
