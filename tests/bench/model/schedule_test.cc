#include "bench/model/schedule.h"

#include "gtest/gtest.h"

namespace psring::bench::model {
namespace {

// ring at N = 2 on a 1 MB/s link, no latency or software: x = S/B (2(N-1)/N = 1), easy to schedule by hand.
const ExchangeParams kParams{0};
const Conditions kTwoNodes{2, 0, 0, 1e6};

TEST(ScheduleTest, FlatIsForwardBackwardExchange) {
  absl::StatusOr<StepTime> t = PredictStep(Topology::kRing, kParams, kTwoNodes, FlatStep(0.1, 0.2, 0.5e6));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->step_s, 0.1 + 0.2 + 0.5);
  EXPECT_DOUBLE_EQ(t->exposed_s, 0.5);
  EXPECT_EQ(t->bound, Bound::kLink);
}

TEST(ScheduleTest, BucketsWaitForBackwardAndForTheStream) {
  // r = 0.1, 0.15, 0.4 (backward 0.4); x = 0.2, 0.1, 0.05:
  // e1 = 0.1 + 0.2 = 0.3; e2 = max(0.15, 0.3) + 0.1 = 0.4; e3 = max(0.4, 0.4) + 0.05 = 0.45.
  const StepShape shape{0.05, 0.4, {{0.1, 0.2e6}, {0.15, 0.1e6}, {0.4, 0.05e6}}};
  absl::StatusOr<StepTime> t = PredictStep(Topology::kRing, kParams, kTwoNodes, shape);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->buckets.size(), 3u);
  EXPECT_DOUBLE_EQ(t->buckets[0].end_s, 0.3);
  EXPECT_DOUBLE_EQ(t->buckets[1].start_s, 0.3);
  EXPECT_DOUBLE_EQ(t->buckets[1].end_s, 0.4);
  EXPECT_DOUBLE_EQ(t->buckets[2].end_s, 0.45);
  EXPECT_DOUBLE_EQ(t->step_s, 0.05 + 0.45);
  EXPECT_DOUBLE_EQ(t->exchange_s, 0.35);
  EXPECT_NEAR(t->exposed_s, 0.05, 1e-12);
}

TEST(ScheduleTest, HiddenExchangeIsComputeBound) {
  const StepShape shape{0.05, 1.0, {{0.1, 0.2e6}, {0.5, 0.2e6}}};
  absl::StatusOr<StepTime> t = PredictStep(Topology::kRing, kParams, kTwoNodes, shape);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->step_s, 1.05);
  EXPECT_EQ(t->exposed_s, 0);
  EXPECT_EQ(t->bound, Bound::kCompute);
}

// 1 ms one-way, 0.1 ms per message; four buckets of 10 bytes released when backward (10 ms) ends.
const ExchangeParams kSoftware{1e-4};
Conditions OneMillisecond() {
  Conditions c = kTwoNodes;
  c.latency_s = 1e-3;
  return c;
}
const StepShape kFourTinyBuckets{0, 0.01, {{0.01, 10}, {0.01, 10}, {0.01, 10}, {0.01, 10}}};

TEST(ScheduleTest, RingChargesEveryTermPerBucket) {
  // Four buckets of 10 bytes at N = 2 (one chunk of 5 bytes, 2 hops of 1 ms, 2 messages of 0.1 ms each):
  // every collective is a ring of its own, so 4 * (2 * (1 ms + 5 B / 1 MB/s) + 0.2 ms), not once per step.
  // Tiny buckets: latency binds.
  absl::StatusOr<StepTime> t = PredictStep(Topology::kRing, kSoftware, OneMillisecond(), kFourTinyBuckets);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(t->exchange_s, 4 * (2 * (1e-3 + 5 / 1e6) + 2e-4), 1e-12);
  EXPECT_NEAR(t->exposed_s, t->exchange_s, 1e-12);
  EXPECT_EQ(t->bound, Bound::kLatency);
}

TEST(ScheduleTest, PsStreamsBucketsThroughOneRoundTrip) {
  // ps-1 at N = 2, 1 ms one-way, 0.1 ms per message: the server link carries N * S of each bucket (20 B at
  // 1 MB/s = 20 us), and the stream's round trip (2 ms) and 4 messages (0.4 ms) are paid once per step.
  absl::StatusOr<StepTime> t = PredictStep(Topology::kPsOne, kSoftware, OneMillisecond(), kFourTinyBuckets);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(t->exchange_s, 4 * 20e-6 + 2.4e-3, 1e-12);
  EXPECT_NEAR(t->buckets[3].end_s, 0.01 + 4 * 20e-6, 1e-12);
  EXPECT_NEAR(t->step_s, 0.01 + 4 * 20e-6 + 2.4e-3, 1e-12);
  EXPECT_EQ(t->bound, Bound::kLatency);
  // A bucket released while the stream is busy waits for the bytes before it, not for a round trip:
  // r = 0, 0.001 with 2000 B each (4 ms of N*S each): e1 = 4 ms, e2 = 8 ms, end = 8 + 2.4 ms.
  const StepShape busy{0, 0.001, {{0, 2000}, {0.001, 2000}}};
  t = PredictStep(Topology::kPsOne, kSoftware, OneMillisecond(), busy);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(t->step_s, 8e-3 + 2.4e-3, 1e-12);
  EXPECT_EQ(t->bound, Bound::kLink);
}

TEST(ScheduleTest, PsStreamDrainsOncePerStep) {
  // ps-1 at N = 2 on a 1 MB/s link, 1 ms one-way, a 100 kB window and a drain of one window a stream: each
  // bucket of 500 kB alone would take 1 MB / 1 MB/s of link time plus 2 * 100 kB / 1 MB/s of drain. Streamed
  // back to back, only the last bucket's streams drain after the step's last byte: 2 * 1 s + 0.2 s + 2 ms.
  ExchangeParams p{0, 1, 100e3, 0};
  p.drain_windows = 1;
  const StepShape two{0, 0.001, {{0, 500e3}, {0.001, 500e3}}};
  absl::StatusOr<StepTime> t = PredictStep(Topology::kPsOne, p, OneMillisecond(), two);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(t->buckets[0].collective.drain_s, 0.2, 1e-12);
  EXPECT_NEAR(t->buckets[0].end_s, 1, 1e-12);
  EXPECT_NEAR(t->step_s, 2 * 1 + 0.2 + 2e-3, 1e-12);
  // One bucket (the flat exchange) keeps its drain: the collective's own time.
  t = PredictStep(Topology::kPsOne, p, OneMillisecond(), FlatStep(0, 0.001, 1e6));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(t->step_s,
              0.001 + PredictCollective(Topology::kPsOne, p,
                                        [] {
                                          Conditions c = OneMillisecond();
                                          c.bytes = 1e6;
                                          return c;
                                        }())
                          ->seconds,
              1e-12);
}

TEST(ScheduleTest, RejectsBadShapes) {
  const StepShape late{0, 0.1, {{0.2, 1}}};
  absl::StatusOr<StepTime> t = PredictStep(Topology::kRing, kParams, kTwoNodes, late);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("non-decreasing"), std::string::npos) << t.status();
  const StepShape unordered{0, 0.3, {{0.2, 1}, {0.1, 1}}};
  EXPECT_FALSE(PredictStep(Topology::kRing, kParams, kTwoNodes, unordered).ok());
  const StepShape negative{-1, 0.3, {}};
  EXPECT_FALSE(PredictStep(Topology::kRing, kParams, kTwoNodes, negative).ok());
}

}  // namespace
}  // namespace psring::bench::model
