#include "bench/cluster.h"

#include "common/subprocess.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace psring::bench {
namespace {

// Tests use their own family so they never touch a concurrent benchmark's namespaces.
constexpr char kFamily[] = "psrtest";

bool CanAdminNetwork() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "CapEff:")) {
      return (std::stoull(line.substr(7), nullptr, 16) >> 12) & 1;
    }
  }
  return false;
}

TEST(ClusterTest, ParsesLinkRates) {
  EXPECT_DOUBLE_EQ(*ParseLinkRate("100mbit"), 100e6);
  EXPECT_DOUBLE_EQ(*ParseLinkRate("1Gbit"), 1e9);
  EXPECT_DOUBLE_EQ(*ParseLinkRate("2.5kbit"), 2500);
  EXPECT_DOUBLE_EQ(*ParseLinkRate("12345"), 12345);
  EXPECT_FALSE(ParseLinkRate("fast").ok());
  EXPECT_FALSE(ParseLinkRate("100mbps").ok());
}

TEST(ClusterTest, RunCommandReportsStderr) {
  auto out = RunCommand({"/bin/sh", "-c", "echo out"});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "out\n");
  auto failed = RunCommand({"/bin/sh", "-c", "echo why >&2; exit 2"});
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("why"), std::string::npos);
  EXPECT_NE(failed.status().message().find("exit 2"), std::string::npos);
}

TEST(ClusterTest, CreatesShapedHostsAndRemovesThem) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  ClusterOptions options;
  options.hosts = 3;
  options.link = "100mbit";
  options.family = kFamily;
  options.allow_loopback_fallback = false;
  auto cluster = EmulatedCluster::Create(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->emulated()) << (*cluster)->fallback_reason();
  EXPECT_DOUBLE_EQ((*cluster)->link_bytes_per_second(), 12.5e6);
  std::vector<std::string> names;
  for (int i = 0; i < 3; ++i) {
    names.push_back((*cluster)->HostNamespace(i));
    EXPECT_TRUE(NamespaceExists(names.back())) << names.back();
    EXPECT_EQ((*cluster)->HostAddress(i), absl::StrCat("198.18.0.", i + 1));
  }
  // Host 1 has its address and a tbf on its link; the bridge side is shaped too.
  auto addr = RunCommand((*cluster)->Command(1, {FindExecutable("ip"), "-4", "addr", "show", "dev", "eth0"}));
  ASSERT_TRUE(addr.ok()) << addr.status();
  EXPECT_NE(addr->find("198.18.0.2/15"), std::string::npos) << *addr;
  auto qdisc = RunCommand((*cluster)->Command(1, {FindExecutable("tc"), "qdisc", "show", "dev", "eth0"}));
  ASSERT_TRUE(qdisc.ok()) << qdisc.status();
  EXPECT_NE(qdisc->find("tbf"), std::string::npos) << *qdisc;
  EXPECT_NE(qdisc->find("100Mbit"), std::string::npos) << *qdisc;
  const std::string bridge = absl::StrCat(kFamily, getpid(), "-br");
  auto bridge_qdisc = RunCommand({"ip", "netns", "exec", bridge, FindExecutable("tc"), "qdisc", "show", "dev", "h2"});
  ASSERT_TRUE(bridge_qdisc.ok()) << bridge_qdisc.status();
  EXPECT_NE(bridge_qdisc->find("tbf"), std::string::npos) << *bridge_qdisc;
  // Reachability: a stream from host 0 to host 2 through the bridge.
  auto rate = (*cluster)->MeasureStream(0, 2, 1 << 20);
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_GT(*rate, 0);

  ASSERT_TRUE((*cluster)->Destroy().ok());
  for (const auto& name : names) EXPECT_FALSE(NamespaceExists(name)) << name;
  EXPECT_FALSE(NamespaceExists(bridge));
  cluster->reset();
}

TEST(ClusterTest, RemovesLeftoversOfADeadRunOnly) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  // A pid that certainly is not running: a child that has exited and been reaped.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);
  // A family of this process alone, so that a concurrent run of this test cannot clean our stale one first.
  const std::string family = absl::StrCat(kFamily, getpid(), "x");
  const std::string stale = absl::StrCat(family, dead, "-h0");
  const std::string live = absl::StrCat(family, getpid(), "-h9");
  ASSERT_TRUE(RunCommand({"ip", "netns", "add", stale}).ok());
  ASSERT_TRUE(RunCommand({"ip", "netns", "add", live}).ok());
  auto removed = CleanupLeftoverNamespaces(family);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_FALSE(NamespaceExists(stale));
  EXPECT_TRUE(NamespaceExists(live));
  EXPECT_NE(std::find(removed->begin(), removed->end(), stale), removed->end());
  ASSERT_TRUE(RunCommand({"ip", "netns", "del", live}).ok());
}

// Checks the loopback fallback in a child process that gives up CAP_NET_ADMIN (or directly when the test
// already runs without it). Returns "" on success, else what went wrong.
std::string CheckFallback() {
  ClusterOptions options;
  options.hosts = 2;
  options.family = kFamily;
  auto cluster = EmulatedCluster::Create(options);
  if (!cluster.ok()) return "Create failed: " + std::string(cluster.status().message());
  if ((*cluster)->emulated()) return "emulated without CAP_NET_ADMIN";
  if ((*cluster)->fallback_reason().find("CAP_NET_ADMIN") == std::string::npos) return "reason does not say why";
  if ((*cluster)->HostAddress(1) != "127.0.0.1") return "host address is not loopback";
  if ((*cluster)->Command(1, {"x"}) != std::vector<std::string>{"x"}) return "command was wrapped";
  if ((*cluster)->HostLinkBytes(0).ok()) return "link counters on loopback";
  options.allow_loopback_fallback = false;
  if (EmulatedCluster::Create(options).status().code() != absl::StatusCode::kFailedPrecondition) {
    return "no error with the fallback disallowed";
  }
  return "";
}

bool DropCapNetAdmin() {
  __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  data[0].effective &= ~(1u << 12);
  return syscall(SYS_capset, &header, data) == 0;
}

TEST(ClusterTest, FallsBackToLoopbackWithoutCapNetAdmin) {
  if (!CanAdminNetwork()) {
    EXPECT_EQ(CheckFallback(), "");
    return;
  }
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::string problem = DropCapNetAdmin() ? CheckFallback() : "capset failed";
    if (CanAdminNetwork()) problem = "still has CAP_NET_ADMIN";
    ssize_t ignored = write(pipe_fds[1], problem.data(), problem.size());
    (void)ignored;
    _exit(problem.empty() ? 0 : 1);
  }
  close(pipe_fds[1]);
  std::string problem;
  char buf[256];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof(buf))) > 0;) problem.append(buf, n);
  close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << problem;
}

TEST(ClusterTest, SigtermRemovesTheNamespaces) {
  if (!CanAdminNetwork()) GTEST_SKIP() << "needs CAP_NET_ADMIN (root) for network namespaces";
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ClusterOptions options;
    options.hosts = 2;
    options.family = kFamily;
    options.allow_loopback_fallback = false;
    auto cluster = EmulatedCluster::Create(options);
    std::string name = cluster.ok() ? (*cluster)->HostNamespace(1) : "";
    ssize_t ignored = write(pipe_fds[1], name.data(), name.size());
    (void)ignored;
    close(pipe_fds[1]);
    sleep(60);  // killed by the parent long before
    _exit(3);
  }
  close(pipe_fds[1]);
  std::string name;
  char buf[256];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof(buf))) > 0;) name.append(buf, n);
  close(pipe_fds[0]);
  ASSERT_FALSE(name.empty()) << "the child could not create its cluster";
  EXPECT_TRUE(NamespaceExists(name));
  kill(child, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  EXPECT_FALSE(NamespaceExists(name));
  EXPECT_FALSE(NamespaceExists(absl::StrCat(kFamily, child, "-br")));
}

}  // namespace
}  // namespace psring::bench
