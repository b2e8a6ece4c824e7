// BucketPlan: which layers travel together in a bucketed exchange (trainer/exchange.h).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/exchange.h"
#include "trainer/workload.h"

namespace psring::trainer {
namespace {

constexpr size_t kFloatsPerMb = static_cast<size_t>(kBytesPerMb) / sizeof(float);

// Buckets in descending offset order, contiguous, tiling [0, total) (cheap enough for BERT's 110 M elements).
void ExpectTiling(const BucketPlan& plan) {
  size_t expected_end = plan.total();
  for (const FloatRange& b : plan.buckets()) {
    ASSERT_EQ(b.end(), expected_end) << "buckets must tile the buffer from the end";
    ASSERT_GT(b.count, 0u);
    expected_end = b.offset;
  }
  EXPECT_EQ(expected_end, 0u);
}

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

TEST(BucketPlanTest, LayerLargerThanTheCapClosesTheBucketItJoins) {
  // DDP adds the layer first and then closes: the 3 MB layer shares its bucket with the two small layers
  // that became ready before it (the rule before DDP's closed the small ones' bucket first).
  const size_t small = 1000;
  const size_t big = 3 * kFloatsPerMb;  // 3 MB against a 1 MB cap
  auto plan = BucketPlan::Create({small, big, small, small}, 1.0, 1.0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buckets().size(), 2u);
  EXPECT_EQ(plan->buckets()[0], (FloatRange{small, big + 2 * small}));
  EXPECT_EQ(plan->buckets()[1], (FloatRange{0, small}));
  ExpectPartition(*plan);
}

TEST(BucketPlanTest, BucketClosesOnceItReachesTheCapNotBeforeItWouldPassIt) {
  // Layers of 1.5 MB, cap 2 MB (first bucket too): 1.5 < 2 stays open, 3 >= 2 closes. Closing before the
  // cap would be passed (the rule before DDP's) gave one layer per bucket.
  const size_t layer = 3 * kFloatsPerMb / 2;
  auto plan = BucketPlan::Create({layer, layer, layer, layer, layer}, 2.0, 2.0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buckets().size(), 3u);
  EXPECT_EQ(plan->buckets()[0], (FloatRange{3 * layer, 2 * layer}));
  EXPECT_EQ(plan->buckets()[1], (FloatRange{layer, 2 * layer}));
  EXPECT_EQ(plan->buckets()[2], (FloatRange{0, layer}));  // what is left: the first layers
  ExpectPartition(*plan);
}

TEST(BucketPlanTest, ExactlyTheCapCloses) {
  // DDP compares the bucket's bytes with >= the cap: two half-MiB layers fill a 1 MiB bucket exactly and
  // close it; one float less and the bucket stays open for the next layer.
  const size_t half = kFloatsPerMb / 2;
  auto exact = BucketPlan::Create({1, half, half}, 1.0, 1.0);
  ASSERT_TRUE(exact.ok()) << exact.status();
  ASSERT_EQ(exact->buckets().size(), 2u);
  EXPECT_EQ(exact->buckets()[0], (FloatRange{1, 2 * half}));
  EXPECT_EQ(exact->buckets()[1], (FloatRange{0, 1}));
  ExpectPartition(*exact);
  auto short_by_one = BucketPlan::Create({1, half, half - 1}, 1.0, 1.0);
  ASSERT_TRUE(short_by_one.ok()) << short_by_one.status();
  ASSERT_EQ(short_by_one->buckets().size(), 1u);
  EXPECT_EQ(short_by_one->buckets()[0], (FloatRange{0, 2 * half}));
  ExpectPartition(*short_by_one);
}

TEST(BucketPlanTest, DefaultMlpWithTinyCapIsOneBucketPerLayer) {
  // The default MLP: 784-256-256-10 (weights + biases per layer).
  const std::vector<size_t> layers = {784 * 256 + 256, 256 * 256 + 256, 256 * 10 + 10};
  // Caps below the smallest layer (10280 bytes): each layer fills and closes its own bucket.
  auto plan = BucketPlan::Create(layers, 0.005, 0.005);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buckets().size(), 3u);
  EXPECT_EQ(plan->buckets()[0].count, layers[2]);
  EXPECT_EQ(plan->buckets()[2].count, layers[0]);
  ExpectPartition(*plan);
}

// PyTorch DDP's compute_bucket_assignment_by_size (torch/csrc/distributed/c10d/reducer.cpp), written from its
// rule and not from BucketPlan: the tensors in the order their gradients become ready (the Reducer's rebuilt
// order, reverse forward order); each joins the open bucket, which closes once its bytes are >= the current
// limit; the limits are {first bucket, cap}, the last one repeating. Returns each bucket's bytes.
std::vector<int64_t> DdpBucketBytes(const std::vector<int64_t>& forward_params, const std::vector<int64_t>& limits) {
  std::vector<int64_t> buckets;
  int64_t open = 0;
  size_t limit = 0;
  for (auto it = forward_params.rbegin(); it != forward_params.rend(); ++it) {
    open += *it * 4;
    if (open >= limits[limit]) {
      buckets.push_back(open);
      open = 0;
      if (limit + 1 < limits.size()) ++limit;
    }
  }
  if (open > 0) buckets.push_back(open);
  return buckets;
}

std::vector<int64_t> PresetParams(const std::string& name) {
  absl::StatusOr<proto::Workload> workload = LoadWorkload(name);
  EXPECT_TRUE(workload.ok()) << workload.status();
  std::vector<int64_t> params;
  if (workload.ok()) {
    for (const proto::WorkloadLayer& l : workload->layers()) params.push_back(l.params());
  }
  return params;
}

std::vector<int64_t> PlanBucketBytes(const std::vector<int64_t>& forward_params, double bucket_mb,
                                     double first_bucket_mb) {
  const std::vector<size_t> layers(forward_params.begin(), forward_params.end());
  absl::StatusOr<BucketPlan> plan = BucketPlan::Create(layers, bucket_mb, first_bucket_mb);
  EXPECT_TRUE(plan.ok()) << plan.status();
  std::vector<int64_t> bytes;
  if (plan.ok()) {
    ExpectTiling(*plan);
    for (const FloatRange& b : plan->buckets()) bytes.push_back(static_cast<int64_t>(b.count * sizeof(float)));
  }
  return bytes;
}

constexpr int64_t kMiB = 1 << 20;

TEST(BucketPlanTest, ResNet50IsDdpsAssignment) {
  const std::vector<int64_t> params = PresetParams("resnet50");
  ASSERT_EQ(params.size(), 107u);
  const std::vector<int64_t> ddp = DdpBucketBytes(params, {1 * kMiB, 25 * kMiB});
  EXPECT_EQ(PlanBucketBytes(params, 25, 1), ddp);
  // DDP's buckets for ResNet-50 (bytes / 1e6): fc alone first, then 31.5 26.3 26.6, and 9.7 MB left for the
  // first layers (the rule before DDP's left 24.2 MB there).
  const std::vector<double> expected_mb = {8.2, 31.5, 26.3, 26.6, 9.7};
  ASSERT_EQ(ddp.size(), expected_mb.size());
  for (size_t i = 0; i < ddp.size(); ++i) EXPECT_NEAR(ddp[i] / 1e6, expected_mb[i], 0.05) << "bucket " << i;
}

TEST(BucketPlanTest, BertBaseIsDdpsAssignment) {
  const std::vector<int64_t> params = PresetParams("bert_base");
  ASSERT_FALSE(params.empty());
  EXPECT_EQ(PlanBucketBytes(params, 25, 1), DdpBucketBytes(params, {1 * kMiB, 25 * kMiB}));
  // Other caps and first buckets, DDP's rule every time.
  for (const double cap_mb : {1.0, 5.0, 25.0, 100.0}) {
    for (const double first_mb : {0.0, 0.25, 1.0, 4.0}) {
      const int64_t cap = static_cast<int64_t>(cap_mb * kMiB);
      const int64_t first = std::min(cap, static_cast<int64_t>(first_mb * kMiB));
      EXPECT_EQ(PlanBucketBytes(params, cap_mb, first_mb), DdpBucketBytes(params, {first, cap}))
          << "cap " << cap_mb << " MiB, first bucket " << first_mb << " MiB";
    }
  }
}

TEST(BucketPlanTest, DividingLayersAndCapsByTheSameScaleKeepsDdpsBuckets) {
  // What --bytes_scale=64 does: every layer / 64 and both caps / 64 (25 and 1 MiB). The layers' rounding moves
  // sizes a little, but the buckets still group the same layers as the real model's.
  const std::vector<int64_t> params = PresetParams("resnet50");
  std::vector<int64_t> scaled;
  for (int64_t p : params) scaled.push_back(std::max<int64_t>(1, (p + 32) / 64));
  auto layers_per_bucket = [](const std::vector<int64_t>& forward, double cap_mb, double first_mb) {
    const std::vector<size_t> layers(forward.begin(), forward.end());
    absl::StatusOr<BucketPlan> plan = BucketPlan::Create(layers, cap_mb, first_mb);
    EXPECT_TRUE(plan.ok()) << plan.status();
    std::vector<size_t> offsets;  // each bucket's first layer
    if (!plan.ok()) return offsets;
    size_t layer = 0, offset = 0;
    for (auto it = plan->buckets().rbegin(); it != plan->buckets().rend(); ++it) {
      while (offset < it->offset) offset += layers[layer++];
      offsets.push_back(layer);
    }
    return offsets;
  };
  const std::vector<size_t> real = layers_per_bucket(params, 25, 1);
  EXPECT_EQ(real.size(), 5u);
  EXPECT_EQ(layers_per_bucket(scaled, 25.0 / 64, 1.0 / 64), real);
  // Not scaling the first bucket's cap (the bug this guards) makes fc share its bucket with layer4.
  EXPECT_NE(layers_per_bucket(scaled, 25.0 / 64, 1.0), real);
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
