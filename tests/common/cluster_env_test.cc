#include "common/cluster_env.h"

#include <map>
#include <string>

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

TEST(ClusterEnvTest, NothingSetIsASingleProcess) {
  absl::StatusOr<ClusterEnv> env = Discover({});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, "default");
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->world_size, 1);
  EXPECT_EQ(env->master_addr, "127.0.0.1");
  EXPECT_EQ(env->master_port, 29500);
}

TEST(ClusterEnvTest, FlagsWinOverEveryLauncher) {
  ClusterFlags flags;
  flags.rank = 2;
  flags.world_size = 3;
  flags.master_addr = "10.1.2.3";
  flags.master_port = 4000;
  absl::StatusOr<ClusterEnv> env =
      Discover({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"MASTER_ADDR", "x"}}, flags);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, "flags");
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->world_size, 3);
  EXPECT_EQ(env->master_addr, "10.1.2.3");
  EXPECT_EQ(env->master_port, 4000);
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
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, "mpirun");
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->master_addr, "head");  // mpirun has no master; MASTER_ADDR supplies it
  EXPECT_EQ(env->master_port, 1234);
}

TEST(ClusterEnvTest, SlurmTakesTheFirstHostOfTheNodeList) {
  absl::StatusOr<ClusterEnv> env = Discover({{"SLURM_PROCID", "5"},
                                             {"SLURM_NTASKS", "8"},
                                             {"SLURM_LOCALID", "1"},
                                             {"SLURM_NODELIST", "gpu[07-10,12],login1"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, "slurm");
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->master_addr, "gpu07");
  EXPECT_EQ(env->master_port, 29500);
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
  absl::StatusOr<ClusterEnv> env = Discover(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.0.0.9"}, {"MASTER_PORT", "29400"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, "torchrun");
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->master_addr, "10.0.0.9");
  EXPECT_EQ(env->master_port, 29400);
}

TEST(ClusterEnvTest, FlagsOverrideSingleFieldsOfTheEnvironment) {
  ClusterFlags flags;
  flags.local_rank = 0;
  flags.master_port = 5555;
  absl::StatusOr<ClusterEnv> env = Discover({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}}, flags);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, "torchrun");
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_EQ(env->master_port, 5555);
}

TEST(ClusterEnvTest, BadValuesNameTheVariable) {
  struct Case {
    std::map<std::string, std::string> vars;
    std::string mentions;
  };
  const Case cases[] = {
      {{{"RANK", "1"}}, "WORLD_SIZE"},                                        // incomplete
      {{{"WORLD_SIZE", "2"}}, "RANK"},                                        // incomplete
      {{{"RANK", "two"}, {"WORLD_SIZE", "2"}}, "RANK='two'"},                 // not an integer
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "rank 2 is out of range"},       // rank >= world
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

}  // namespace
}  // namespace psring
