// Where this process sits in the job: rank, world size, local rank and the rendezvous master.
//
// Discovered, in order, from explicit flags, mpirun (OMPI_COMM_WORLD_*), Slurm (SLURM_*), then torchrun-style
// env (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT). The first source that sets anything wins, and
// must be complete and consistent; otherwise a kInvalidArgument status says which variable is wrong.
// --local_rank, --master_addr and --master_port override single fields of whichever source won. The master
// is --master_addr, else MASTER_ADDR, else (Slurm) the first host of the node list, else 127.0.0.1; the port
// is --master_port, else MASTER_PORT, else 29500. Pure function of its inputs; thread-safe.
#ifndef PSRING_COMMON_CLUSTER_ENV_H_
#define PSRING_COMMON_CLUSTER_ENV_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace psring {

struct ClusterEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source;  // "flags", "mpirun", "slurm", "torchrun" or "default"
};

// Values given on the command line; unset ones are looked up in the environment.
struct ClusterFlags {
  std::optional<int> rank;
  std::optional<int> world_size;
  std::optional<int> local_rank;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
};

// `getenv` is injectable so tests need not touch the process environment.
absl::StatusOr<ClusterEnv> DiscoverClusterEnv(
    const ClusterFlags& flags, const std::function<const char*(const char*)>& getenv_fn = nullptr);

// First host of a Slurm node list, expanding compressed ranges: "node[01-04],login1" -> "node01".
// kInvalidArgument for a malformed list.
absl::StatusOr<std::string> FirstSlurmHost(const std::string& nodelist);

// Reads --rank, --world_size, --local_rank, --master_addr, --master_port (defined in cluster_flags.cc; -1 or
// empty means "not given") and calls DiscoverClusterEnv with the real environment. Shared by every binary.
absl::StatusOr<ClusterEnv> ClusterEnvFromFlags();

}  // namespace psring

#endif  // PSRING_COMMON_CLUSTER_ENV_H_
