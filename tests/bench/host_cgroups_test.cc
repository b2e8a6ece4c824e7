// The per-host CPU groups (bench/emulator/host_cgroups.h) on this machine's cgroup v2: a wrapped command runs
// in its host's group, the group's CPU stall grows when more busy tasks than cores run in it, and an empty
// group's stays at zero. Skips where the machine has no cgroup v2 with PSI or no permission to make groups.
#include "bench/emulator/host_cgroups.h"

#include <unistd.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"

namespace psring::bench {
namespace {

std::string Prefix() { return absl::StrCat("psrtest", getpid(), "-"); }

TEST(HostCgroupsTest, AWrappedCommandRunsInItsHostsGroup) {
  HostCgroups groups = HostCgroups::Create(Prefix(), 2);
  if (!groups.available()) GTEST_SKIP() << "no per-host groups here: " << groups.reason();
  JobOptions options;
  options.timeout = absl::Seconds(30);
  auto results = RunJob({{"cat", groups.Wrap(1, {"cat", "/proc/self/cgroup"})}}, options);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ((*results)[0].exit_code, 0) << (*results)[0].stderr_tail;
  EXPECT_TRUE(absl::StrContains((*results)[0].stdout_text, absl::StrCat("/psring/", Prefix(), "h1")))
      << (*results)[0].stdout_text;
  EXPECT_TRUE(groups.Remove().ok());
}

TEST(HostCgroupsTest, MoreBusyTasksThanCoresMakeTheirHostWaitAndNoOtherHost) {
  HostCgroups groups = HostCgroups::Create(Prefix(), 2);
  if (!groups.available()) GTEST_SKIP() << "no per-host groups here: " << groups.reason();
  const std::vector<int64_t> before = groups.StallMicros();
  ASSERT_EQ(before.size(), 2u);
  // 2 x cores + 1 busy loops for 0.5 s in host 0: at least cores + 1 of them are runnable with a core busy.
  const unsigned loops = 2 * std::max(1u, std::thread::hardware_concurrency()) + 1;
  const std::string script =
      absl::StrCat("i=0; while [ $i -lt ", loops,
                   " ]; do timeout 0.5 sh -c 'while :; do :; done' & i=$((i+1)); done; wait");
  JobOptions options;
  options.timeout = absl::Seconds(30);
  auto results = RunJob({{"busy", groups.Wrap(0, {"sh", "-c", script})}}, options);
  ASSERT_TRUE(results.ok()) << results.status();
  const std::vector<int64_t> after = groups.StallMicros();
  ASSERT_EQ(after.size(), 2u);
  // Some loop waited for most of the 0.5 s; at least 50 ms is far below that and far above a quiet group's 0.
  EXPECT_GT(after[0] - before[0], 50000) << "host 0 waited " << after[0] - before[0] << " us";
  EXPECT_EQ(after[1], before[1]) << "host 1 has no process";
  EXPECT_TRUE(groups.Remove().ok());
}

TEST(HostCgroupsTest, NoGroupsLeaveTheCommandAsItIs) {
  HostCgroups none;
  const std::vector<std::string> argv = {"ip", "netns", "exec", "x", "true"};
  EXPECT_EQ(none.Wrap(0, argv), argv);
  EXPECT_TRUE(none.StallMicros().empty());
  EXPECT_TRUE(none.Remove().ok());
}

}  // namespace
}  // namespace psring::bench
