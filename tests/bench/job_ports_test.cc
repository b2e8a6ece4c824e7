#include "bench/core/job_ports.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace psring::bench {
namespace {

// JobPortRanges() parsed back into [first, last] pairs.
std::vector<std::pair<int, int>> Ranges() {
  std::vector<std::pair<int, int>> ranges;
  const std::vector<std::string> parts = absl::StrSplit(JobPortRanges(), ',');
  for (const std::string& part : parts) {
    std::vector<std::string> ends = absl::StrSplit(part, '-');
    EXPECT_EQ(ends.size(), 2u) << JobPortRanges();
    int first = 0, last = 0;
    EXPECT_TRUE(absl::SimpleAtoi(ends[0], &first) && absl::SimpleAtoi(ends[1], &last)) << part;
    EXPECT_LE(first, last) << part;
    ranges.emplace_back(first, last);
  }
  return ranges;
}

bool Reserved(int port) {
  for (const auto& [first, last] : Ranges()) {
    if (port >= first && port <= last) return true;
  }
  return false;
}

TEST(JobPortsTest, EachSlotHasTheMasterThenOnePortPerServer) {
  EXPECT_EQ(JobPorts(0, 2), (std::vector<int>{29500, 50051, 50052}));
  EXPECT_EQ(JobPorts(3, 1), (std::vector<int>{30400, 50951}));
  EXPECT_EQ(JobPorts(kJobPortSlots + 3, 1), JobPorts(3, 1)) << "the slots rotate";
  EXPECT_EQ(JobPorts(5, 0).size(), 1u) << "a ring run has the master only";
}

TEST(JobPortsTest, NoTwoSlotsShareAPortAndTheRetryTakesAnotherSlot) {
  constexpr int kMostServers = 256;
  std::set<int> seen;
  for (int slot = 0; slot < kJobPortSlots; ++slot) {
    for (int port : JobPorts(slot, kMostServers)) {
      EXPECT_TRUE(seen.insert(port).second) << "port " << port << " again in slot " << slot;
    }
    const int retry = RetrySlot(slot);
    EXPECT_NE(retry % kJobPortSlots, slot) << "slot " << slot;
    for (int port : JobPorts(retry, kMostServers)) {
      for (int first : JobPorts(slot, kMostServers)) EXPECT_NE(port, first) << "slot " << slot;
    }
  }
  EXPECT_EQ(RetrySlot(20) % kJobPortSlots, 12);
}

TEST(JobPortsTest, TheReservedRangesHoldEveryPortAndLittleElse) {
  std::set<int> used;
  for (int slot = 0; slot < kJobPortSlots; ++slot) {
    for (int port : JobPorts(slot, kJobPortStride - 1)) {
      EXPECT_TRUE(Reserved(port)) << port << " is not in " << JobPortRanges();
      used.insert(port);
    }
  }
  int reserved = 0;
  for (const auto& [first, last] : Ranges()) reserved += last - first + 1;
  // Between two slots, the master's range holds the 299 ports from one master to the next and the servers'
  // range the one port after a slot's 299 servers: nothing else.
  EXPECT_EQ(reserved, static_cast<int>(used.size()) + (kJobPortSlots - 1) * kJobPortStride);
  EXPECT_EQ(JobPortRanges(), "29500-34000,50051-54849");
  EXPECT_FALSE(Reserved(29499));
  EXPECT_FALSE(Reserved(54850));
}

}  // namespace
}  // namespace psring::bench
