// Where this process sits in the job: rank, world size, local rank and the rendezvous master.
//
// Discovered, in order, from explicit flags, mpirun (OMPI_COMM_WORLD_*), Slurm (SLURM_*), then torchrun-style
// env (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT). The first source that sets anything wins, and
// must be complete and consistent; otherwise a kInvalidArgument status says which variable is wrong.
// --local_rank, --master_addr and --master_port override single fields of whichever source won. The local
// rank is --local_rank, else the winning launcher's variable, else any launcher's local variable that is set
// (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID, LOCAL_RANK: e.g. --rank/--world_size under
// mpirun); a job of one rank has local rank 0; otherwise it is unknown (local_rank_source empty, local_rank
// 0) and the ring derives it from the ranks that share a host (LocalRankFromStore). The master
// is --master_addr, else MASTER_ADDR, else (Slurm) the first host of the node list, else 127.0.0.1; the port
// is --master_port, else MASTER_PORT, else 29500. Pure function of its inputs; thread-safe.
#ifndef PSRING_COMMON_CLUSTER_ENV_H_
#define PSRING_COMMON_CLUSTER_ENV_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/store.h"

namespace psring {

struct ClusterEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source;  // "flags", "mpirun", "slurm", "torchrun" or "default"
  // Where local_rank came from: "--local_rank", the variable read, "one rank", "the store" (after
  // LocalRankFromStore); "" when nothing said (local_rank is then 0 on every rank of a host).
  std::string local_rank_source;
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

// The local rank of `rank` when nothing gave it: how many lower ranks published the same `host` under
// `prefix` in the store (so ranks sharing a host number themselves 0, 1, ... in rank order). Every rank of
// the job must call it; blocks up to `timeout` for the others (kDeadlineExceeded names the missing rank).
absl::StatusOr<int> LocalRankFromStore(Store* store, int rank, int world_size, const std::string& host,
                                       const std::string& prefix, absl::Duration timeout);

// This host's name (gethostname); "localhost" when it cannot be read.
std::string ThisHostName();

// The CUDA device that local rank `local_rank` drives when the process sees `device_count` devices and
// CUDA_VISIBLE_DEVICES is `visible_devices` (null when unset): `local_rank` itself when below the count;
// device 0 when the launcher bound one GPU to each rank (one device visible and CUDA_VISIBLE_DEVICES set);
// otherwise kFailedPrecondition naming the local rank (and `local_rank_source`), the device count and what
// to change: several ranks on one GPU make NCCL fail ("Duplicate GPU detected") and the ring fall back to
// TCP. Pure; thread-safe.
absl::StatusOr<int> DeviceForLocalRank(int local_rank, const std::string& local_rank_source, int device_count,
                                       const char* visible_devices);

// Reads --rank, --world_size, --local_rank, --master_addr, --master_port (defined in cluster_flags.cc; -1 or
// empty means "not given") and calls DiscoverClusterEnv with the real environment. Shared by every binary.
absl::StatusOr<ClusterEnv> ClusterEnvFromFlags();

}  // namespace psring

#endif  // PSRING_COMMON_CLUSTER_ENV_H_
