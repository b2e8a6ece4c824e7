// The cluster flags every worker binary shares (see ../shared contract): defined once, here.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "common/cluster_env.h"

ABSL_FLAG(int32_t, rank, -1,
          "This process's rank in [0, world_size). -1: read it from mpirun (OMPI_COMM_WORLD_RANK), Slurm "
          "(SLURM_PROCID) or torchrun-style env (RANK). Must be given together with --world_size.");
ABSL_FLAG(int32_t, world_size, -1,
          "Number of worker processes in the job. -1: read it from OMPI_COMM_WORLD_SIZE, SLURM_NTASKS or "
          "WORLD_SIZE (no launcher: 1).");
ABSL_FLAG(
    int32_t, local_rank, -1,
    "Rank of this process on its host (picks the GPU). -1: OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, "
    "SLURM_LOCALID or LOCAL_RANK, else (ring) counted from the ranks that share this host, else 0.");
ABSL_FLAG(std::string, master_addr, "",
          "Host of rank 0, which serves the rendezvous store. Empty: MASTER_ADDR, else the first host of "
          "SLURM_NODELIST under Slurm, else 127.0.0.1.");
ABSL_FLAG(int32_t, master_port, -1,
          "TCP port of the rendezvous store on the master. -1: MASTER_PORT, else 29500.");

namespace psring {

absl::StatusOr<ClusterEnv> ClusterEnvFromFlags() {
  ClusterFlags flags;
  if (const int v = absl::GetFlag(FLAGS_rank); v != -1) flags.rank = v;
  if (const int v = absl::GetFlag(FLAGS_world_size); v != -1) flags.world_size = v;
  if (const int v = absl::GetFlag(FLAGS_local_rank); v != -1) flags.local_rank = v;
  if (std::string v = absl::GetFlag(FLAGS_master_addr); !v.empty()) flags.master_addr = v;
  if (const int v = absl::GetFlag(FLAGS_master_port); v != -1) flags.master_port = v;
  return DiscoverClusterEnv(flags);
}

}  // namespace psring
