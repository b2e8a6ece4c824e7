// BucketPlan: which layers travel together in a bucketed exchange (trainer/exchange.h).
#include <cstddef>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/exchange.h"

namespace psring::trainer {
namespace {

constexpr size_t kFloatsPerMb = static_cast<size_t>(kBytesPerMb) / sizeof(float);

// Every element of [0, total) in exactly one bucket, buckets in descending offset order and contiguous.
void ExpectPartition(const BucketPlan& plan) {
  std::vector<int> hits(plan.total(), 0);
  size_t expected_end = plan.total();
  for (const FloatRange& b : plan.buckets()) {
    EXPECT_EQ(b.end(), expected_end) << "buckets must tile the buffer from the end";
    expected_end = b.offset;
    for (size_t i = b.offset; i < b.end(); ++i) ++hits[i];
  }
  EXPECT_EQ(expected_end, 0u);
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "element " << i;
  for (size_t i = 0; i < plan.buckets().size(); ++i) {
    EXPECT_EQ(plan.BucketOf(plan.buckets()[i].offset), static_cast<int>(i));
    EXPECT_EQ(plan.BucketOf(plan.buckets()[i].end() - 1), static_cast<int>(i));
  }
}

TEST(BucketPlanTest, ZeroMeansOneFlatBucket) {
  auto plan = BucketPlan::Create({10, 20, 30}, 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->flat());
  ASSERT_EQ(plan->buckets().size(), 1u);
  EXPECT_EQ(plan->buckets()[0], (FloatRange{0, 60}));
  ExpectPartition(*plan);
}

TEST(BucketPlanTest, ReverseOrderWithSmallFirstBucketAndCap) {
  // Layers of 0.5 MB each, cap 2 MB, first bucket 1 MB: [L7 L6] then [L5..L2] then [L1 L0].
  const size_t half = kFloatsPerMb / 2;
  std::vector<size_t> layers(8, half);
  auto plan = BucketPlan::Create(layers, 2.0, 1.0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->flat());
  ASSERT_EQ(plan->buckets().size(), 3u);
  EXPECT_EQ(plan->buckets()[0], (FloatRange{6 * half, 2 * half}));  // the last layers first
  EXPECT_EQ(plan->buckets()[1], (FloatRange{2 * half, 4 * half}));
  EXPECT_EQ(plan->buckets()[2], (FloatRange{0, 2 * half}));
  ExpectPartition(*plan);
}

TEST(BucketPlanTest, FirstBucketCapIsNeverAboveTheCap) {
  const size_t quarter = kFloatsPerMb / 4;
  auto plan = BucketPlan::Create({quarter, quarter, quarter, quarter}, 0.5, 1.0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buckets().size(), 2u);
  EXPECT_EQ(plan->buckets()[0].count, 2 * quarter);
  ExpectPartition(*plan);
}

TEST(BucketPlanTest, LayerLargerThanTheCapGetsItsOwnBucket) {
  const size_t small = 1000;
  const size_t big = 3 * kFloatsPerMb;  // 3 MB against a 1 MB cap
  auto plan = BucketPlan::Create({small, big, small, small}, 1.0, 1.0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buckets().size(), 3u);
  EXPECT_EQ(plan->buckets()[0], (FloatRange{small + big, 2 * small}));
  EXPECT_EQ(plan->buckets()[1], (FloatRange{small, big}));
  EXPECT_EQ(plan->buckets()[2], (FloatRange{0, small}));
  ExpectPartition(*plan);
}

TEST(BucketPlanTest, DefaultMlpWithTinyCapIsOneBucketPerLayer) {
  // The default MLP: 784-256-256-10 (weights + biases per layer).
  const std::vector<size_t> layers = {784 * 256 + 256, 256 * 256 + 256, 256 * 10 + 10};
  auto plan = BucketPlan::Create(layers, 0.01, 0.01);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buckets().size(), 3u);
  EXPECT_EQ(plan->buckets()[0].count, layers[2]);
  EXPECT_EQ(plan->buckets()[2].count, layers[0]);
  ExpectPartition(*plan);
}

TEST(BucketPlanTest, BadInputIsAClearError) {
  auto negative = BucketPlan::Create({1, 2}, -1);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(negative.status().message().find("--bucket_mb"), absl::string_view::npos);
  auto empty_layer = BucketPlan::Create({1, 0, 2}, 1);
  EXPECT_EQ(empty_layer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty_layer.status().message().find("layer 1"), absl::string_view::npos);
}

}  // namespace
}  // namespace psring::trainer
