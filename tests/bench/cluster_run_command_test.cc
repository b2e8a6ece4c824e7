// //bench:cluster_run's per-host command (bench/cluster_flags.h HostCommand): placeholders, and workspace
// paths made absolute under `bazel run` (issue 24: `bench/tools/gloo_allreduce.py` failed from the runfiles
// tree).
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/emulator/cluster_flags.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace psring::bench {
namespace {

using Argv = std::vector<std::string>;

TEST(HostCommandTest, ReplacesEveryPlaceholder) {
  EXPECT_EQ(HostCommand({"/bin/echo", "--rank={rank}", "{world}", "{addr}:{master_addr}"}, 2, 4, "198.18.0.3",
                        "198.18.0.1", ""),
            (Argv{"/bin/echo", "--rank=2", "4", "198.18.0.3:198.18.0.1"}));
}

TEST(HostCommandTest, MakesWorkspacePathsAbsolute) {
  const std::string workspace = testing::FreshTempPath("host_command_workspace");
  std::filesystem::create_directories(workspace + "/bench/tools");
  std::ofstream(workspace + "/bench/tools/gloo_allreduce.py") << "print('hi')\n";
  const Argv argv = HostCommand({"/usr/bin/python3", "bench/tools/gloo_allreduce.py", "--rank={rank}", "bench",
                                 "not/there.py", "-v", "--script=bench/tools/gloo_allreduce.py"},
                                1, 2, "a", "m", workspace);
  EXPECT_EQ(argv, (Argv{"/usr/bin/python3", workspace + "/bench/tools/gloo_allreduce.py", "--rank=1",
                        workspace + "/bench", "not/there.py", "-v", "--script=bench/tools/gloo_allreduce.py"}));
}

TEST(HostCommandTest, LeavesPathsAloneOutsideBazelRun) {
  EXPECT_EQ(HostCommand({"python3", "bench/tools/gloo_allreduce.py"}, 0, 1, "a", "m", ""),
            (Argv{"python3", "bench/tools/gloo_allreduce.py"}));
}

}  // namespace
}  // namespace psring::bench
