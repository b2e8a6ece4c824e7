#include "common/cluster_env.h"

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "common/store.h"
#include "gtest/gtest.h"

namespace psring {
namespace {

// DiscoverClusterEnv against a fake environment (the lambda only lives during the call).
absl::StatusOr<ClusterEnv> Discover(const std::map<std::string, std::string>& vars, ClusterFlags flags = {}) {
  return DiscoverClusterEnv(flags, [&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

// Compares every field (source, rank, world size, local rank, master address and port).
void ExpectEnv(const absl::StatusOr<ClusterEnv>& env, const ClusterEnv& want) {
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, want.source);
  EXPECT_EQ(env->rank, want.rank);
  EXPECT_EQ(env->world_size, want.world_size);
  EXPECT_EQ(env->local_rank, want.local_rank);
  EXPECT_EQ(env->master_addr, want.master_addr);
  EXPECT_EQ(env->master_port, want.master_port);
}

TEST(ClusterEnvTest, NothingSetIsASingleProcess) {
  ExpectEnv(Discover({}), {0, 1, 0, "127.0.0.1", 29500, "default"});
}

TEST(ClusterEnvTest, FlagsWinOverEveryLauncher) {
  ClusterFlags flags;
  flags.rank = 2;
  flags.world_size = 3;
  flags.master_addr = "10.1.2.3";
  flags.master_port = 4000;
  absl::StatusOr<ClusterEnv> env =
      Discover({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"MASTER_ADDR", "x"}}, flags);
  ExpectEnv(env, {2, 3, 0, "10.1.2.3", 4000, "flags"});
}

TEST(ClusterEnvTest, RankFlagWithoutWorldSizeIsAnError) {
  ClusterFlags flags;
  flags.rank = 1;
  absl::StatusOr<ClusterEnv> env = Discover({}, flags);
  EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(env.status().message().find("--world_size"), std::string::npos);
}

TEST(ClusterEnvTest, MpirunBeforeSlurmAndTorchrun) {
  absl::StatusOr<ClusterEnv> env = Discover({{"OMPI_COMM_WORLD_RANK", "3"},
                                             {"OMPI_COMM_WORLD_SIZE", "4"},
                                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                             {"SLURM_PROCID", "0"},
                                             {"SLURM_NTASKS", "2"},
                                             {"RANK", "0"},
                                             {"WORLD_SIZE", "2"},
                                             {"MASTER_ADDR", "head"},
                                             {"MASTER_PORT", "1234"}});
  // mpirun has no master; MASTER_ADDR and MASTER_PORT supply it.
  ExpectEnv(env, {3, 4, 1, "head", 1234, "mpirun"});
}

TEST(ClusterEnvTest, SlurmTakesTheFirstHostOfTheNodeList) {
  absl::StatusOr<ClusterEnv> env = Discover({{"SLURM_PROCID", "5"},
                                             {"SLURM_NTASKS", "8"},
                                             {"SLURM_LOCALID", "1"},
                                             {"SLURM_NODELIST", "gpu[07-10,12],login1"}});
  ExpectEnv(env, {5, 8, 1, "gpu07", 29500, "slurm"});
}

TEST(ClusterEnvTest, SlurmNodeLists) {
  EXPECT_EQ(*FirstSlurmHost("node[01-04],x"), "node01");
  EXPECT_EQ(*FirstSlurmHost("x,node[01-04]"), "x");
  EXPECT_EQ(*FirstSlurmHost("single"), "single");
  EXPECT_EQ(*FirstSlurmHost("rack[3,5]-n[009-010]"), "rack3-n009");
  EXPECT_EQ(*FirstSlurmHost("n[2]"), "n2");
  EXPECT_EQ(FirstSlurmHost("node[01-04").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FirstSlurmHost("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FirstSlurmHost("n[]").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClusterEnvTest, Torchrun) {
  ExpectEnv(Discover({{"RANK", "1"},
                      {"WORLD_SIZE", "2"},
                      {"LOCAL_RANK", "1"},
                      {"MASTER_ADDR", "10.0.0.9"},
                      {"MASTER_PORT", "29400"}}),
            {1, 2, 1, "10.0.0.9", 29400, "torchrun"});
}

TEST(ClusterEnvTest, FlagsOverrideSingleFieldsOfTheEnvironment) {
  ClusterFlags flags;
  flags.local_rank = 0;
  flags.master_port = 5555;
  absl::StatusOr<ClusterEnv> env = Discover({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}}, flags);
  ExpectEnv(env, {1, 2, 0, "127.0.0.1", 5555, "torchrun"});
}

TEST(ClusterEnvTest, BadValuesNameTheVariable) {
  struct Case {
    std::map<std::string, std::string> vars;
    std::string mentions;
  };
  const Case cases[] = {
      {{{"RANK", "1"}}, "WORLD_SIZE"},                                   // incomplete
      {{{"WORLD_SIZE", "2"}}, "RANK"},                                   // incomplete
      {{{"RANK", "two"}, {"WORLD_SIZE", "2"}}, "RANK='two'"},            // not an integer
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "rank 2 is out of range"},  // rank >= world
      {{{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, "rank -1 is out of range"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "world size 0"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "5"}}, "local rank 5"},
      {{{"OMPI_COMM_WORLD_RANK", "0"}}, "OMPI_COMM_WORLD_SIZE"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "70000"}}, "master port 70000"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "x"}}, "MASTER_PORT='x'"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ClusterEnv> env = Discover(c.vars);
    EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument) << c.mentions;
    EXPECT_NE(env.status().message().find(c.mentions), std::string::npos) << env.status();
  }
}

// Issue 25: --rank/--world_size (or RANK/WORLD_SIZE) without a local rank put every rank of a host on GPU 0.
// Any launcher's local variable that is set now gives it; nothing at all leaves it unknown (to be derived).
TEST(ClusterEnvTest, TheLocalRankComesFromAnyLauncherVariable) {
  ClusterFlags flags;
  flags.rank = 3;
  flags.world_size = 4;
  absl::StatusOr<ClusterEnv> env = Discover({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}, flags);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_rank_source, "OMPI_COMM_WORLD_LOCAL_RANK");

  env = Discover({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"MPI_LOCALRANKID", "2"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_EQ(env->local_rank_source, "MPI_LOCALRANKID");

  env = Discover({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "3"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_rank_source, "LOCAL_RANK");

  flags.local_rank = 0;  // the flag overrides every variable
  env = Discover({{"SLURM_LOCALID", "2"}}, flags);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_EQ(env->local_rank_source, "--local_rank");
}

TEST(ClusterEnvTest, NoLocalRankAnywhereIsUnknownExceptForOneRank) {
  ClusterFlags flags;
  flags.rank = 1;
  flags.world_size = 2;
  absl::StatusOr<ClusterEnv> env = Discover({}, flags);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_EQ(env->local_rank_source, "");
  env = Discover({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_rank_source, "");
  env = Discover({});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_rank_source, "one rank");
}

// Ranks as threads over one store, on hosts a, b, a, a, b: each counts the lower ranks on its host.
TEST(ClusterEnvTest, LocalRanksFromTheRanksSharingAHost) {
  const std::vector<std::string> hosts = {"a", "b", "a", "a", "b"};
  const int n = static_cast<int>(hosts.size());
  InMemoryStore store;
  std::vector<absl::StatusOr<int>> local(n, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back(
        [&, r] { local[r] = LocalRankFromStore(&store, r, n, hosts[r], "job", absl::Seconds(10)); });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<int> want = {0, 0, 1, 2, 1};
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(local[r].ok()) << "rank " << r << ": " << local[r].status();
    EXPECT_EQ(*local[r], want[r]) << "rank " << r;
  }
}

TEST(ClusterEnvTest, DerivingTheLocalRankTimesOutNamingTheMissingRank) {
  InMemoryStore store;
  const absl::StatusOr<int> local = LocalRankFromStore(&store, 1, 2, "a", "job", absl::Milliseconds(50));
  EXPECT_EQ(local.status().code(), absl::StatusCode::kDeadlineExceeded) << local.status();
  EXPECT_NE(local.status().message().find("rank 0 did not publish its host"), std::string::npos)
      << local.status();
}

// A local rank beyond the visible GPUs used to wrap silently (local rank % count) onto a busy GPU.
TEST(ClusterEnvTest, ALocalRankWithoutAGpuOfItsOwnIsAnErrorNamingBoth) {
  EXPECT_EQ(*DeviceForLocalRank(1, "LOCAL_RANK", 2, nullptr), 1);
  EXPECT_EQ(*DeviceForLocalRank(0, "", 8, "0,1,2,3,4,5,6,7"), 0);
  // The launcher bound one GPU to each rank: every local rank drives its only visible device.
  EXPECT_EQ(*DeviceForLocalRank(3, "SLURM_LOCALID", 1, "3"), 0);
  const absl::StatusOr<int> beyond = DeviceForLocalRank(2, "SLURM_LOCALID", 2, "0,1");
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(beyond.status().message().find("local rank 2 (from SLURM_LOCALID)"), std::string::npos)
      << beyond.status();
  EXPECT_NE(beyond.status().message().find("sees 2 CUDA devices (CUDA_VISIBLE_DEVICES=0,1)"),
            std::string::npos)
      << beyond.status();
  const absl::StatusOr<int> one_gpu_unbound = DeviceForLocalRank(1, "--local_rank", 1, nullptr);
  EXPECT_NE(one_gpu_unbound.status().message().find("sees 1 CUDA device (CUDA_VISIBLE_DEVICES=unset)"),
            std::string::npos)
      << one_gpu_unbound.status();
  EXPECT_FALSE(DeviceForLocalRank(-1, "x", 4, nullptr).ok());
}

}  // namespace
}  // namespace psring
