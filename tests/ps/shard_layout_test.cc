// The element layout (ps/shard_layout.h): every element held by exactly one shard once, each shard's slice
// of each bucket balanced and in bucket order, the wire order a permutation that round-trips; sizes not
// divisible by K, buckets of one element, K larger than a bucket or than the model; invalid bucket lists.
#include "ps/shard_layout.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace psring::ps {
namespace {

struct Case {
  uint64_t total;
  std::vector<uint64_t> buckets;  // launch order; empty: flat
};

// Where bucket b (launch order) begins in the flat vector.
std::vector<uint64_t> BucketBegins(const ShardLayout& layout) {
  std::vector<uint64_t> begins;
  uint64_t end = layout.total();
  for (uint64_t n : layout.buckets()) {
    end -= n;
    begins.push_back(end);
  }
  return begins;
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {1, {}},              {7, {}},           {1000, {}},          {10, {10}},
      {10, {4, 6}},         {1001, {200, 500, 1, 300}},             {17, {1, 1, 1, 14}},
      {12, {3, 3, 3, 3}},   {5, {1, 1, 1, 1, 1}},                   {100, {2, 97, 1}},
  };
  return cases;
}

TEST(ShardLayoutTest, EveryElementOnceEachSliceBalancedAndInBucketOrder) {
  for (const Case& c : Cases()) {
    for (int k = 1; k <= 5; ++k) {
      SCOPED_TRACE(absl::StrCat("total ", c.total, " buckets ", c.buckets.size(), " K ", k));
      absl::StatusOr<ShardLayout> layout = ShardLayout::Create(c.total, c.buckets, k);
      ASSERT_TRUE(layout.ok()) << layout.status();
      EXPECT_EQ(layout->flat(), c.buckets.size() <= 1);
      const std::vector<uint64_t> begins = BucketBegins(*layout);
      std::vector<int> owner(c.total, -1);
      uint64_t wire = 0;
      for (int s = 0; s < k; ++s) {
        const ShardRange range = layout->WireRange(s);
        EXPECT_EQ(range.begin, wire) << "shard " << s << " does not follow the shard before it";
        uint64_t held = 0;
        for (size_t b = 0; b < layout->buckets().size(); ++b) {
          const uint64_t n = layout->buckets()[b];
          const ShardRange slice = layout->Slice(s, b);
          // Inside its bucket, balanced: n / K rounded down or up.
          EXPECT_GE(slice.begin, begins[b]);
          EXPECT_LE(slice.end, begins[b] + n);
          EXPECT_TRUE(slice.size() == n / k || slice.size() == (n + k - 1) / k) << "bucket " << b;
          // Slices follow each other in shard order inside the bucket.
          EXPECT_EQ(slice.begin, s == 0 ? begins[b] : layout->Slice(s - 1, b).end);
          for (uint64_t i = slice.begin; i < slice.end; ++i) {
            EXPECT_EQ(owner[i], -1) << "element " << i << " held twice";
            owner[i] = s;
          }
          held += slice.size();
        }
        EXPECT_EQ(range.size(), held);
        wire = range.end;
      }
      EXPECT_EQ(wire, c.total);
      EXPECT_EQ(std::count(owner.begin(), owner.end(), -1), 0) << "an element nobody holds";
    }
  }
}

// The wire order is shard 0's slices in bucket order, then shard 1's, ...; FromWire inverts ToWire.
TEST(ShardLayoutTest, WireOrderIsEachShardsSlicesInBucketOrderAndRoundTrips) {
  for (const Case& c : Cases()) {
    for (int k = 1; k <= 5; ++k) {
      SCOPED_TRACE(absl::StrCat("total ", c.total, " buckets ", c.buckets.size(), " K ", k));
      absl::StatusOr<ShardLayout> layout = ShardLayout::Create(c.total, c.buckets, k);
      ASSERT_TRUE(layout.ok()) << layout.status();
      std::vector<float> flat(c.total);
      std::iota(flat.begin(), flat.end(), 0.0f);  // value = index
      std::vector<float> want;
      for (int s = 0; s < k; ++s) {
        for (size_t b = 0; b < layout->buckets().size(); ++b) {
          const ShardRange slice = layout->Slice(s, b);
          for (uint64_t i = slice.begin; i < slice.end; ++i) want.push_back(static_cast<float>(i));
        }
      }
      std::vector<float> wire(c.total, -1.0f);
      layout->ToWire(flat.data(), wire.data());
      EXPECT_EQ(wire, want);
      std::vector<float> back(c.total, -1.0f);
      layout->FromWire(wire.data(), back.data());
      EXPECT_EQ(back, flat);
    }
  }
}

// The flat layout (one bucket) is the contiguous ranges of ComputeShardRange, so flat mode is unchanged on
// the wire: the wire order is the vector's own.
TEST(ShardLayoutTest, FlatLayoutIsTheContiguousRanges) {
  for (uint64_t total : {1u, 2u, 7u, 10u, 1001u}) {
    for (int k = 1; k <= 4 && static_cast<uint64_t>(k) <= total; ++k) {
      const ShardLayout flat = ShardLayout::Flat(total, k);
      absl::StatusOr<ShardLayout> one_bucket = ShardLayout::Create(total, {total}, k);
      ASSERT_TRUE(one_bucket.ok());
      EXPECT_EQ(flat, *one_bucket);
      EXPECT_TRUE(flat.flat());
      EXPECT_EQ(flat.Describe(), "flat");
      for (int s = 0; s < k; ++s) {
        EXPECT_EQ(flat.WireRange(s), ComputeShardRange(total, s, k));
        EXPECT_EQ(flat.Slice(s, 0), ComputeShardRange(total, s, k));
      }
    }
  }
  // Balanced in bytes: 7 over 3 is 2, 2, 3.
  EXPECT_EQ(ComputeShardRange(7, 0, 3), (ShardRange{0, 2}));
  EXPECT_EQ(ComputeShardRange(7, 2, 3), (ShardRange{4, 7}));
}

// A bucket smaller than K leaves some shards without a slice of it; they still hold the other buckets.
TEST(ShardLayoutTest, BucketsSmallerThanTheShardCount) {
  absl::StatusOr<ShardLayout> layout = ShardLayout::Create(9, {1, 2, 6}, 4);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->Describe(), "3 buckets");
  EXPECT_EQ(layout->Slice(0, 0).size(), 0u);  // bucket 0 = element 8 goes to shard 3 alone
  EXPECT_EQ(layout->Slice(3, 0), (ShardRange{8, 9}));
  EXPECT_EQ(layout->Slice(0, 1).size(), 0u);  // bucket 1 = elements 6, 7: shards 1 and 3
  EXPECT_EQ(layout->Slice(1, 1), (ShardRange{6, 7}));
  EXPECT_EQ(layout->Slice(3, 1), (ShardRange{7, 8}));
  uint64_t sizes = 0;
  for (int s = 0; s < 4; ++s) sizes += layout->WireRange(s).size();
  EXPECT_EQ(sizes, 9u);
  // Every shard gets something of the 6-element bucket, so none is empty here.
  for (int s = 0; s < 4; ++s) EXPECT_GT(layout->WireRange(s).size(), 0u) << s;
}

TEST(ShardLayoutTest, LayoutsDifferByBucketsAndShards) {
  const ShardLayout a = *ShardLayout::Create(10, {4, 6}, 2);
  EXPECT_EQ(a, *ShardLayout::Create(10, {4, 6}, 2));
  EXPECT_NE(a, *ShardLayout::Create(10, {6, 4}, 2));
  EXPECT_NE(a, *ShardLayout::Create(10, {4, 6}, 3));
  EXPECT_NE(a, ShardLayout::Flat(10, 2));
}

TEST(ShardLayoutTest, InvalidBucketListsAreRefused) {
  EXPECT_TRUE(absl::IsInvalidArgument(ShardLayout::Create(10, {4, 5}, 2).status()));     // short
  EXPECT_TRUE(absl::IsInvalidArgument(ShardLayout::Create(10, {4, 7}, 2).status()));     // too long
  EXPECT_TRUE(absl::IsInvalidArgument(ShardLayout::Create(10, {4, 0, 6}, 2).status()));  // empty bucket
  EXPECT_TRUE(absl::IsInvalidArgument(ShardLayout::Create(10, {10}, 0).status()));       // no shards
  // Sums that wrap around 2^64 do not pass for the total.
  EXPECT_TRUE(absl::IsInvalidArgument(ShardLayout::Create(10, {~uint64_t{0}, 11}, 2).status()));
  std::vector<uint64_t> many(kMaxLayoutBuckets + 1, 1);
  absl::Status too_many = ShardLayout::Create(many.size(), many, 2).status();
  EXPECT_TRUE(absl::IsInvalidArgument(too_many)) << too_many;
  EXPECT_NE(too_many.message().find("--bucket_mb"), absl::string_view::npos) << too_many;
}

}  // namespace
}  // namespace psring::ps
