#include "bench/hosts/host_list.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace psring::bench {
namespace {

TEST(ParseHostList, NamesAndSlots) {
  absl::StatusOr<std::vector<HostSlots>> hosts = ParseHostList("node1:4, node2,10.0.0.3:2");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[0].name, "node1");
  EXPECT_EQ((*hosts)[0].slots, 4);
  EXPECT_EQ((*hosts)[1].name, "node2");
  EXPECT_EQ((*hosts)[1].slots, 1);
  EXPECT_EQ((*hosts)[2].name, "10.0.0.3");
  EXPECT_EQ((*hosts)[2].slots, 2);
}

TEST(ParseHostList, BadEntriesAreNamed) {
  for (const char* bad : {"", "node1:0", "node1:x", ":3"}) {
    absl::StatusOr<std::vector<HostSlots>> hosts = ParseHostList(bad);
    EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(ParseHostList("node1:x").status().message().find("node1:x"), std::string::npos);
}

TEST(ReadHostfile, OpenMpiFormat) {
  const std::string dir = testing::FreshTempPath("host_list_test");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/hostfile";
  std::ofstream(path) << "# two hosts\nnode1 slots=4 max_slots=8\n\n  node2   # one slot\n";
  absl::StatusOr<std::vector<HostSlots>> hosts = ReadHostfile(path);
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 2u);
  EXPECT_EQ((*hosts)[0].slots, 4);
  EXPECT_EQ((*hosts)[1].name, "node2");
  EXPECT_EQ((*hosts)[1].slots, 1);

  std::ofstream(path) << "node1 cpus=4\n";
  absl::StatusOr<std::vector<HostSlots>> bad = ReadHostfile(path);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(":1"), std::string::npos) << bad.status();
  EXPECT_EQ(ReadHostfile(dir + "/absent").status().code(), absl::StatusCode::kNotFound);
}

TEST(ExpandSlurmNodelist, RangesAndPadding) {
  absl::StatusOr<std::vector<std::string>> hosts = ExpandSlurmNodelist("gpu[08-10,15],login1");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(*hosts, (std::vector<std::string>{"gpu08", "gpu09", "gpu10", "gpu15", "login1"}));
  EXPECT_FALSE(ExpandSlurmNodelist("gpu[3-1]").ok());
  EXPECT_FALSE(ExpandSlurmNodelist("gpu[1-2").ok());
}

TEST(ExpandSlurmCounts, Repeats) {
  absl::StatusOr<std::vector<int>> counts = ExpandSlurmCounts("4(x3),2");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(*counts, (std::vector<int>{4, 4, 4, 2}));
  EXPECT_FALSE(ExpandSlurmCounts("4(x0)").ok());
}

TEST(SlurmHostsFromEnv, AllocationOrError) {
  unsetenv("SLURM_JOB_NODELIST");
  EXPECT_EQ(SlurmHostsFromEnv().status().code(), absl::StatusCode::kFailedPrecondition);
  setenv("SLURM_JOB_NODELIST", "n[1-3]", 1);
  setenv("SLURM_JOB_CPUS_PER_NODE", "2(x2),1", 1);
  absl::StatusOr<std::vector<HostSlots>> hosts = SlurmHostsFromEnv();
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[2].name, "n3");
  EXPECT_EQ((*hosts)[2].slots, 1);
  setenv("SLURM_JOB_CPUS_PER_NODE", "2", 1);  // one count for three nodes
  EXPECT_EQ(SlurmHostsFromEnv().status().code(), absl::StatusCode::kInvalidArgument);
  unsetenv("SLURM_JOB_NODELIST");
  unsetenv("SLURM_JOB_CPUS_PER_NODE");
}

TEST(MapByNode, RoundRobinWithinSlots) {
  const std::vector<HostSlots> hosts = {{"a", 1}, {"b", 3}, {"c", 2}};
  absl::StatusOr<std::vector<int>> map = MapByNode(hosts, 6);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(*map, (std::vector<int>{0, 1, 2, 1, 2, 1}));
  absl::StatusOr<std::vector<int>> too_many = MapByNode(hosts, 7);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(too_many.status().message().find("a:1,b:3,c:2"), std::string::npos) << too_many.status();
}

}  // namespace
}  // namespace psring::bench
