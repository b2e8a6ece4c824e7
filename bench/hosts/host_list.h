// The hosts of a real cluster as users name them: an Open MPI host list ("node1:4,node2:4"), an Open MPI
// hostfile ("node1 slots=4"), or a Slurm allocation (SLURM_JOB_NODELIST "node[01-04]" with
// SLURM_JOB_CPUS_PER_NODE "4(x3),2"), and how a sweep's processes map onto their slots.
//
//   ASSIGN_OR_RETURN(std::vector<HostSlots> hosts, ParseHostList("node1:4,node2:4"));
//   ASSIGN_OR_RETURN(std::vector<int> host_of, MapByNode(hosts, /*processes=*/6));   // 0,1,0,1,0,1
//
// Thread-safety: pure functions (SlurmHostsFromEnv reads the environment).
#ifndef PSRING_BENCH_HOSTS_HOST_LIST_H_
#define PSRING_BENCH_HOSTS_HOST_LIST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psring::bench {

struct HostSlots {
  std::string name;  // what the launcher is given (mpirun --host, srun --nodelist)
  int slots = 1;     // processes the host may run at once
};

// "node1:4,node2,10.0.0.3:2" (a host without ":slots" has 1). kInvalidArgument naming the bad entry.
absl::StatusOr<std::vector<HostSlots>> ParseHostList(const std::string& list);

// An Open MPI hostfile: one host per line, "name [slots=N] [max_slots=M]", '#' comments. kNotFound when the
// file cannot be read, kInvalidArgument naming the line.
absl::StatusOr<std::vector<HostSlots>> ReadHostfile(const std::string& path);

// Slurm's compressed node list "gpu[01-03,07],login1" -> gpu01 gpu02 gpu03 gpu07 login1.
absl::StatusOr<std::vector<std::string>> ExpandSlurmNodelist(const std::string& nodelist);

// Slurm's per-node counts "4(x3),2" -> 4 4 4 2.
absl::StatusOr<std::vector<int>> ExpandSlurmCounts(const std::string& counts);

// The allocation this process runs in: SLURM_JOB_NODELIST with SLURM_JOB_CPUS_PER_NODE as the slots.
// kFailedPrecondition outside an allocation (run inside salloc or sbatch).
absl::StatusOr<std::vector<HostSlots>> SlurmHostsFromEnv();

// Which host runs each of `processes` processes, round robin over the hosts while they have slots (Open
// MPI's --map-by node): consecutive ranks land on different hosts, so even N = 2 crosses the network.
// kResourceExhausted naming the slots when the hosts have fewer slots than processes.
absl::StatusOr<std::vector<int>> MapByNode(const std::vector<HostSlots>& hosts, int processes);

}  // namespace psring::bench

#endif  // PSRING_BENCH_HOSTS_HOST_LIST_H_
