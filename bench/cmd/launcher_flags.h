// Where a bench suite's processes run (--launcher, --hosts, --hostfile, --launcher_args, --link_probe): the
// emulated cluster of this machine (the default), real hosts through Open MPI's mpirun or Slurm's srun
// (bench/hosts/launcher_cluster.h), or the test rig that reaches the emulated hosts through mpirun over ssh.
#ifndef PSRING_BENCH_CMD_LAUNCHER_FLAGS_H_
#define PSRING_BENCH_CMD_LAUNCHER_FLAGS_H_

#include "absl/status/statusor.h"
#include "bench/core/cluster.h"
#include "bench/core/exchange.h"

namespace psring::bench {

// The cluster factory the flags choose; an empty one for the emulated cluster (the harness's default).
// `programs`: the worker binaries every host must have. kInvalidArgument for contradictory flags.
absl::StatusOr<ClusterFactory> ClusterFactoryFromFlags(const char* argv0, const BinaryPaths& programs);

}  // namespace psring::bench

#endif  // PSRING_BENCH_CMD_LAUNCHER_FLAGS_H_
