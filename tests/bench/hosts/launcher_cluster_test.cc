// LauncherCluster with Open MPI's real mpirun on this machine's own name (mpirun starts local processes
// without ssh): the probe's host report, the command lines, and the errors a user meets first (a program
// missing on a host, too few slots). Skips without mpirun.
#include "bench/hosts/launcher_cluster.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace psring::bench {
namespace {

using ::bazel::tools::cpp::runfiles::Runfiles;

class LauncherClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindExecutable("mpirun").find('/') == std::string::npos) GTEST_SKIP() << "needs mpirun (openmpi-bin)";
    std::string error;
    runfiles_.reset(Runfiles::CreateForTest(&error));
    ASSERT_NE(runfiles_, nullptr) << error;
    options_.launcher = "mpirun";
    options_.hosts = {{"localhost", 3}};
    options_.processes = 3;
    options_.link_probe = runfiles_->Rlocation("psring/bench/hosts/link_probe");
    options_.programs = {options_.link_probe};
  }

  std::unique_ptr<Runfiles> runfiles_;
  LauncherOptions options_;
};

TEST_F(LauncherClusterTest, ProbesTheHostAndWrapsCommands) {
  options_.port_buffer_bytes = 2e6;  // --port_buffer_kb=2000
  absl::StatusOr<std::unique_ptr<LauncherCluster>> cluster = LauncherCluster::Create(options_);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  // Real hosts: the port the user gave (scaling --ps_chunks=capped caps the PS's bursts with it).
  EXPECT_EQ((*cluster)->port_buffer_bytes(), 2e6);
  EXPECT_EQ((*cluster)->hosts(), 3);
  EXPECT_EQ((*cluster)->HostAddress(2), "127.0.0.1");
  EXPECT_EQ((*cluster)->box_cores(), 0);  // real hosts: cores of their own, not this box's
  ASSERT_EQ((*cluster)->host_reports().size(), 1u);
  EXPECT_GE((*cluster)->host_reports()[0].cores, 1);
  const std::vector<std::string> argv = (*cluster)->Command(1, {"/bin/echo", "hi"});
  const std::string line = absl::StrJoin(argv, " ");
  EXPECT_NE(line.find("--host localhost:1 -np 1 --bind-to none"), std::string::npos) << line;
  EXPECT_EQ(argv.back(), "hi");
  // The command really runs through mpirun.
  absl::StatusOr<std::vector<ProcessResult>> ran = RunJob({{"echo", argv}}, JobOptions());
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ((*ran)[0].exit_code, 0) << (*ran)[0].stderr_tail;
  EXPECT_EQ((*ran)[0].stdout_text, "hi\n");
  // One host: no link to measure, and the report says so.
  EXPECT_EQ((*cluster)->LinkMatrix(), "");
  EXPECT_NE((*cluster)->Describe().find("one host"), std::string::npos) << (*cluster)->Describe();
  // The harness's link check still works between two processes on it.
  absl::StatusOr<double> rtt = (*cluster)->MeasureRtt(0, 1, 5);
  ASSERT_TRUE(rtt.ok()) << rtt.status();
  EXPECT_GT(*rtt, 0);
}

TEST_F(LauncherClusterTest, AProgramMissingOnAHostIsNamed) {
  options_.programs.push_back("/nonexistent/psring/ring_worker");
  absl::StatusOr<std::unique_ptr<LauncherCluster>> cluster = LauncherCluster::Create(options_);
  EXPECT_EQ(cluster.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(cluster.status().message().find("host localhost lacks /nonexistent/psring/ring_worker"), std::string::npos)
      << cluster.status();
}

TEST_F(LauncherClusterTest, TooFewSlotsForThePlan) {
  options_.processes = 4;
  absl::StatusOr<std::unique_ptr<LauncherCluster>> cluster = LauncherCluster::Create(options_);
  EXPECT_EQ(cluster.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(cluster.status().message().find("localhost:3 have 3 slots"), std::string::npos) << cluster.status();
}

TEST_F(LauncherClusterTest, UnknownLauncherAndMissingProbe) {
  options_.launcher = "pdsh";
  EXPECT_EQ(LauncherCluster::Create(options_).status().code(), absl::StatusCode::kInvalidArgument);
  options_.launcher = "mpirun";
  options_.link_probe = "";
  EXPECT_EQ(LauncherCluster::Create(options_).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psring::bench
