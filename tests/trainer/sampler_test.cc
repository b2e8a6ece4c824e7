// DistributedSampler: disjoint, covering, equal lengths, padding, deterministic per (seed, epoch).
#include "trainer/sampler.h"

#include <algorithm>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace psring::trainer {
namespace {

std::vector<std::vector<int64_t>> AllShards(int64_t n, int world, int64_t epoch, bool drop_last = false,
                                            uint64_t seed = 5) {
  std::vector<std::vector<int64_t>> shards;
  for (int r = 0; r < world; ++r) {
    absl::StatusOr<DistributedSampler> s = DistributedSampler::Create(n, world, r, true, seed, drop_last);
    EXPECT_TRUE(s.ok()) << s.status();
    shards.push_back(s->Indices(epoch));
    EXPECT_EQ(static_cast<int64_t>(shards.back().size()), s->num_samples());
  }
  return shards;
}

TEST(SamplerTest, DivisibleShardsAreDisjointAndCover) {
  const auto shards = AllShards(120, 4, 0);
  std::multiset<int64_t> all;
  for (const auto& s : shards) {
    EXPECT_EQ(s.size(), 30u);
    all.insert(s.begin(), s.end());
  }
  EXPECT_EQ(all.size(), 120u);
  for (int64_t i = 0; i < 120; ++i) EXPECT_EQ(all.count(i), 1u) << i;
}

TEST(SamplerTest, PadsWithRepeatsWhenNotDivisible) {
  // 10 samples over 4 ranks: 3 each, 2 padded repeats; every sample appears at least once.
  const auto shards = AllShards(10, 4, 1);
  std::multiset<int64_t> all;
  for (const auto& s : shards) {
    EXPECT_EQ(s.size(), 3u);
    all.insert(s.begin(), s.end());
  }
  EXPECT_EQ(all.size(), 12u);
  for (int64_t i = 0; i < 10; ++i) EXPECT_GE(all.count(i), 1u) << i;
  // Tiny data set, many ranks: padding wraps more than once.
  const auto tiny = AllShards(3, 7, 0);
  std::set<int64_t> seen;
  for (const auto& s : tiny) {
    ASSERT_EQ(s.size(), 1u);
    seen.insert(s[0]);
  }
  EXPECT_EQ(seen, (std::set<int64_t>{0, 1, 2}));
}

TEST(SamplerTest, DropLastCutsTheTail) {
  const auto shards = AllShards(10, 4, 0, /*drop_last=*/true);
  std::set<int64_t> all;
  for (const auto& s : shards) {
    EXPECT_EQ(s.size(), 2u);
    all.insert(s.begin(), s.end());
  }
  EXPECT_EQ(all.size(), 8u);  // disjoint, 2 samples dropped
}

TEST(SamplerTest, SameOnEveryCallDifferentPerEpochAndSeed) {
  const auto a = AllShards(1000, 3, 4);
  EXPECT_EQ(a, AllShards(1000, 3, 4));
  EXPECT_NE(a, AllShards(1000, 3, 5));
  EXPECT_NE(a, AllShards(1000, 3, 4, false, /*seed=*/6));
  // A real shuffle: not the identity order.
  std::vector<int64_t> sorted = a[0];
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(a[0], sorted);
}

TEST(SamplerTest, InterleavesTheGlobalOrderLikePyTorch) {
  // Rank r takes positions r, r + world, ... of one permutation, so world 1 with the same seed sees the
  // same permutation and rank r's i-th sample is its (i * world + r)-th element.
  const auto one = AllShards(24, 1, 2)[0];
  const auto three = AllShards(24, 3, 2);
  for (int r = 0; r < 3; ++r) {
    for (size_t i = 0; i < three[r].size(); ++i) EXPECT_EQ(three[r][i], one[i * 3 + r]);
  }
}

TEST(SamplerTest, WithoutShuffleKeepsOrder) {
  absl::StatusOr<DistributedSampler> s = DistributedSampler::Create(7, 2, 1, /*shuffle=*/false, 0);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->Indices(0), (std::vector<int64_t>{1, 3, 5, 0}));
}

TEST(SamplerTest, RejectsBadArguments) {
  EXPECT_FALSE(DistributedSampler::Create(0, 1, 0, true, 0).ok());
  EXPECT_FALSE(DistributedSampler::Create(10, 2, 2, true, 0).ok());
  EXPECT_FALSE(DistributedSampler::Create(10, 0, 0, true, 0).ok());
  EXPECT_FALSE(DistributedSampler::Create(3, 4, 0, true, 0, /*drop_last=*/true).ok());
}

}  // namespace
}  // namespace psring::trainer
