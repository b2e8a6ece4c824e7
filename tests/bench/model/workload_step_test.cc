#include "bench/model/workload_step.h"

#include "gtest/gtest.h"
#include "trainer/workload.h"

namespace psring::bench::model {
namespace {

proto::Workload ThreeLayers() {
  proto::Workload w;
  w.set_name("three");
  const int params[] = {100, 200, 300};
  const double backward_ms[] = {1, 2, 3};
  for (int i = 0; i < 3; ++i) {
    proto::WorkloadLayer* l = w.add_layers();
    l->set_name(absl::StrCat("l", i));
    l->set_params(params[i]);
    l->set_forward_ms(0.5);
    l->set_backward_ms(backward_ms[i]);
  }
  return w;
}

TEST(WorkloadStepTest, EachLayerItsOwnBucketReleasedLastLayerFirst) {
  // A cap of a few bytes puts every layer in a bucket of its own (by either bucket rule). Backward runs
  // l2 (3 ms), l1 (2 ms), l0 (1 ms): releases at 3, 5, 6 ms with 1200, 800, 400 bytes.
  absl::StatusOr<StepShape> shape = WorkloadStep(ThreeLayers(), 1e-6, 1e-6);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_DOUBLE_EQ(shape->forward_s, 1.5e-3);
  EXPECT_DOUBLE_EQ(shape->backward_s, 6e-3);
  ASSERT_EQ(shape->buckets.size(), 3u);
  EXPECT_DOUBLE_EQ(shape->buckets[0].ready_s, 3e-3);
  EXPECT_DOUBLE_EQ(shape->buckets[0].bytes, 1200);
  EXPECT_DOUBLE_EQ(shape->buckets[1].ready_s, 5e-3);
  EXPECT_DOUBLE_EQ(shape->buckets[1].bytes, 800);
  EXPECT_DOUBLE_EQ(shape->buckets[2].ready_s, 6e-3);
  EXPECT_DOUBLE_EQ(shape->buckets[2].bytes, 400);
}

TEST(WorkloadStepTest, FlatIsOneBucketAfterBackward) {
  absl::StatusOr<StepShape> shape = WorkloadStep(ThreeLayers(), 0);
  ASSERT_TRUE(shape.ok()) << shape.status();
  ASSERT_EQ(shape->buckets.size(), 1u);
  EXPECT_DOUBLE_EQ(shape->buckets[0].ready_s, shape->backward_s);
  EXPECT_DOUBLE_EQ(shape->buckets[0].bytes, 2400);
}

TEST(WorkloadStepTest, ResNet50AtItsRealSizeAndDdpCaps) {
  absl::StatusOr<proto::Workload> w = trainer::LoadWorkload("resnet50");
  ASSERT_TRUE(w.ok()) << w.status();
  absl::StatusOr<StepShape> shape = WorkloadStep(*w, 25);
  ASSERT_TRUE(shape.ok()) << shape.status();
  double bytes = 0, previous = 0;
  for (const BucketRelease& b : shape->buckets) {
    bytes += b.bytes;
    EXPECT_GE(b.ready_s, previous);
    previous = b.ready_s;
  }
  EXPECT_DOUBLE_EQ(bytes, 4.0 * trainer::WorkloadParameters(*w));  // ~102 MB, not a scaled size
  EXPECT_GT(bytes, 100e6);
  EXPECT_GE(shape->buckets.size(), 4u);
  EXPECT_LE(shape->buckets.size(), 8u);  // DDP's handful of 25 MiB buckets, not dozens
  EXPECT_DOUBLE_EQ(shape->buckets.back().ready_s, shape->backward_s);
}

TEST(WorkloadStepTest, Errors) {
  EXPECT_FALSE(WorkloadStep(ThreeLayers(), -1).ok());
  EXPECT_FALSE(WorkloadStep(proto::Workload(), 25).ok());
}

}  // namespace
}  // namespace psring::bench::model
