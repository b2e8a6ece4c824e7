// The emulated hosts as ssh hosts: mpirun in host 0's namespace starts programs over ssh in other hosts'
// namespaces, their output comes back line by line, their traffic crosses the emulated links, and killing
// mpirun leaves nothing running on the remote host. Skips without root (network namespaces), sshd or mpirun.
#include "bench/emulator/ssh_hosts.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/emulator/cluster.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace psring::bench {
namespace {

// Not a benchmark's family: its leftover cleanup never touches a concurrent run's namespaces.
constexpr char kFamily[] = "psrtest";

// Why this test cannot run here, or "" (namespaces are checked by creating the cluster).
std::string MissingProgram() {
  if (access("/usr/sbin/sshd", X_OK) != 0) return "needs sshd: apt-get install openssh-server";
  if (FindExecutable("mpirun").find('/') == std::string::npos) return "needs mpirun: apt-get install openmpi-bin";
  return "";
}

class SshHostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string missing = MissingProgram();
    if (!missing.empty()) GTEST_SKIP() << missing;
    ClusterOptions options;
    options.hosts = 4;
    options.link = "200mbit";
    options.family = kFamily;
    options.allow_loopback_fallback = true;  // only to learn why there are no namespaces (no root)
    auto cluster = EmulatedCluster::Create(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    if (!cluster_->emulated()) GTEST_SKIP() << "needs network namespaces: " << cluster_->fallback_reason();
    const absl::Time start = absl::Now();
    auto ssh = SshHosts::Start(*cluster_, testing::FreshTempPath("ssh_hosts"));
    ASSERT_TRUE(ssh.ok()) << ssh.status();
    std::cout << "SshHosts::Start for 4 hosts: " << absl::ToDoubleMilliseconds(absl::Now() - start) << " ms\n";
    ssh_ = std::move(*ssh);
  }

  // Host 0's `mpirun <MpirunArgs> --host <host 1>:1,... -np <hosts> argv`.
  std::vector<std::string> Mpirun(const std::vector<int>& hosts, const std::vector<std::string>& argv) const {
    std::vector<std::string> command = {FindExecutable("mpirun")};
    for (const std::string& arg : ssh_->MpirunArgs()) command.push_back(arg);
    std::string host_list;
    for (int h : hosts) absl::StrAppend(&host_list, host_list.empty() ? "" : ",", cluster_->HostAddress(h), ":1");
    command.insert(command.end(), {"--host", host_list, "-np", absl::StrCat(hosts.size())});
    command.insert(command.end(), argv.begin(), argv.end());
    return cluster_->Command(0, command);
  }

  ProcessResult Run(const std::vector<std::string>& argv) const {
    JobOptions options;
    options.timeout = absl::Seconds(60);
    auto results = RunJob({{"mpirun", argv}}, options);
    EXPECT_TRUE(results.ok()) << results.status();
    return results.ok() ? (*results)[0] : ProcessResult{};
  }

  // Pids of the processes in host `host`'s namespace whose command is `comm`.
  std::vector<int> ProcessesNamed(int host, const std::string& comm) const {
    std::vector<int> found;
    auto pids = RunCommand({FindExecutable("ip"), "netns", "pids", cluster_->HostNamespace(host)});
    if (!pids.ok()) return found;
    for (absl::string_view token : absl::StrSplit(*pids, '\n', absl::SkipEmpty())) {
      int pid = 0;
      if (!absl::SimpleAtoi(token, &pid)) continue;
      std::ifstream in(absl::StrCat("/proc/", pid, "/comm"));
      std::string name;
      if (std::getline(in, name) && name == comm) found.push_back(pid);
    }
    return found;
  }

  // Starts a long `sleep` on host 2 through mpirun and waits until it runs there.
  Subprocess StartRemoteSleep() {
    SpawnOptions spawn;
    spawn.stdout_file = "/dev/null";
    auto mpirun = Subprocess::Start(Mpirun({2}, {"/bin/sleep", "300"}), spawn);
    EXPECT_TRUE(mpirun.ok()) << mpirun.status();
    if (!mpirun.ok()) return Subprocess();
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (ProcessesNamed(2, "sleep").empty() && absl::Now() < deadline && !mpirun->Poll()) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    EXPECT_EQ(ProcessesNamed(2, "sleep").size(), 1u) << "the remote sleep did not start";
    return std::move(*mpirun);
  }

  // True once host 2 runs neither the program nor an orted (within 15 s).
  bool Host2Empties() const {
    const absl::Time deadline = absl::Now() + absl::Seconds(15);
    while (absl::Now() < deadline) {
      if (ProcessesNamed(2, "sleep").empty() && ProcessesNamed(2, "orted").empty()) return true;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return false;
  }

  void TearDown() override {
    if (ssh_ != nullptr) {
      EXPECT_TRUE(ssh_->Stop().ok());
    }
    ssh_.reset();
    if (cluster_ != nullptr) {
      EXPECT_TRUE(cluster_->Destroy().ok());
    }
  }

  std::unique_ptr<EmulatedCluster> cluster_;
  std::unique_ptr<SshHosts> ssh_;
};

TEST_F(SshHostsTest, MpirunStartsTheProgramInTheNamedHostsNamespace) {
  for (int k = 1; k < 4; ++k) {
    auto before = cluster_->AllHostLinkBytes();
    ASSERT_TRUE(before.ok()) << before.status();
    const absl::Time start = absl::Now();
    const ProcessResult r = Run(Mpirun({k}, {FindExecutable("ip"), "-4", "-o", "addr", "show", "dev", "eth0"}));
    std::cout << "mpirun -np 1 on host " << k << ": " << absl::ToDoubleMilliseconds(absl::Now() - start)
              << " ms\n";
    ASSERT_EQ(r.exit_code, 0) << r.stderr_tail;
    EXPECT_TRUE(absl::StrContains(r.stdout_text, " inet " + cluster_->HostAddress(k) + "/15"))
        << "host " << k << " printed: " << r.stdout_text;
    auto after = cluster_->AllHostLinkBytes();
    ASSERT_TRUE(after.ok()) << after.status();
    // ssh and Open MPI's own connection went over host 0's and host k's links, and not over the others'.
    EXPECT_GT((*after)[k].second - (*before)[k].second, 2000);
    EXPECT_GT((*after)[0].first - (*before)[0].first, 2000);
    std::cout << "  bytes received: host " << k << " " << (*after)[k].second - (*before)[k].second;
    for (int other = 1; other < 4; ++other) {
      if (other != k) std::cout << ", host " << other << " " << (*after)[other].second - (*before)[other].second;
    }
    std::cout << "\n";
    for (int other = 1; other < 4; ++other) {
      if (other == k) continue;
      EXPECT_LT((*after)[other].second - (*before)[other].second, 1000)
          << "host " << other << " received bytes while mpirun ran on host " << k << " (host " << k << ": "
          << (*after)[k].second - (*before)[k].second << ")";
    }
  }
}

// A login runs none of root's shell start-up files (bash run by sshd sources ~/.bashrc; a stale pyenv lock
// there once made every login wait 60 s): the session's HOME is the hosts' own directory, which has none.
TEST_F(SshHostsTest, LoginsSkipRootsShellStartupFiles) {
  const std::string home = ssh_->ssh_command().substr(ssh_->ssh_command().find(" -i ") + 4);
  const std::string dir = home.substr(0, home.find("/client_key"));
  ASSERT_FALSE(dir.empty()) << ssh_->ssh_command();
  std::vector<std::string> argv = absl::StrSplit(ssh_->ssh_command(), ' ');
  argv.insert(argv.end(), {cluster_->HostAddress(1), "echo $HOME"});
  JobOptions options;
  options.timeout = absl::Seconds(30);
  auto results = RunJob({{"ssh", cluster_->Command(0, argv)}}, options);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ((*results)[0].exit_code, 0) << (*results)[0].stderr_tail;
  EXPECT_EQ(absl::StripAsciiWhitespace((*results)[0].stdout_text), dir);
}

TEST_F(SshHostsTest, OutputOfEveryRankComesBackLineByLine) {
  // Ranks on hosts 1..3, each printing two result lines a moment apart (the harness parses these).
  const ProcessResult r = Run(Mpirun(
      {1, 2, 3}, {"/bin/sh", "-c",
                  "echo \"PSRING_RESULT rank=$OMPI_COMM_WORLD_RANK step=1\"; sleep 0.2; "
                  "echo \"PSRING_RESULT rank=$OMPI_COMM_WORLD_RANK step=2\"; echo to-stderr >&2"}));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_tail;
  std::vector<std::string> lines = absl::StrSplit(r.stdout_text, '\n', absl::SkipEmpty());
  EXPECT_EQ(lines.size(), 6u) << r.stdout_text;
  for (int rank = 0; rank < 3; ++rank) {
    for (int step = 1; step <= 2; ++step) {
      const std::string line = absl::StrCat("PSRING_RESULT rank=", rank, " step=", step);
      EXPECT_NE(std::find(lines.begin(), lines.end(), line), lines.end()) << line << " in\n" << r.stdout_text;
    }
  }
  EXPECT_TRUE(absl::StrContains(r.stderr_tail, "to-stderr")) << r.stderr_tail;
}

TEST_F(SshHostsTest, KillingMpirunEndsTheRemoteProgram) {
  // SIGTERM to mpirun alone: it tears its job down.
  Subprocess terminated = StartRemoteSleep();
  ASSERT_TRUE(terminated.running());
  ASSERT_EQ(kill(terminated.pid(), SIGTERM), 0);
  EXPECT_TRUE(terminated.Wait(absl::Seconds(15)));
  EXPECT_TRUE(Host2Empties()) << "orphans on host 2 after SIGTERM to mpirun";
  // SIGKILL to mpirun's process group (what RunJob does at a deadline): the orted loses mpirun and ends.
  Subprocess killed = StartRemoteSleep();
  ASSERT_TRUE(killed.running());
  killed.Kill();
  EXPECT_TRUE(Host2Empties()) << "orphans on host 2 after SIGKILL to mpirun";
}

TEST(SshHostsLoopbackTest, NeedsAnEmulatedCluster) {
  ClusterOptions options;
  options.hosts = 2;
  options.force_loopback = true;
  auto cluster = EmulatedCluster::Create(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto ssh = SshHosts::Start(**cluster, testing::FreshTempPath("ssh_hosts_loopback"));
  EXPECT_EQ(ssh.status().code(), absl::StatusCode::kFailedPrecondition) << ssh.status();
}

}  // namespace
}  // namespace psring::bench
