// BucketTracker: buckets are released in plan order as their ranges are reported, and bad reports fail the
// step instead of hanging it.
#include "trainer/bucket_tracker.h"

#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "trainer/exchange.h"

namespace psring::trainer {
namespace {

// Layers {4, 6, 2} with a 1-float cap: buckets [10, 12), [4, 10), [0, 4) in that order.
BucketPlan ThreeBuckets() {
  absl::StatusOr<BucketPlan> plan = BucketPlan::Create({4, 6, 2}, 1e-7, 1e-7);
  EXPECT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->buckets().size(), 3u);
  return *plan;
}

// A step over ThreeBuckets() has begun.
class BucketTrackerTest : public ::testing::Test {
 protected:
  BucketTrackerTest() { tracker_.Begin(plan_); }
  const BucketPlan plan_ = ThreeBuckets();
  BucketTracker tracker_;
};

// A communication thread waiting for bucket `index`; its result lands in *waited.
std::thread WaitInBackground(BucketTracker* tracker, int index, absl::Status* waited) {
  return std::thread([=] { *waited = tracker->WaitFor(index); });
}

TEST_F(BucketTrackerTest, ReleasesBucketsInPlanOrderWhateverTheReportOrder) {
  std::vector<int> released;
  std::thread comm([&] {
    for (int i = 0; i < 3; ++i) {
      if (!tracker_.WaitFor(i).ok()) return;
      released.push_back(i);
    }
  });
  tracker_.Ready(0, 4);   // bucket 2 first: nothing may go yet
  tracker_.Ready(4, 3);   // half of bucket 1
  tracker_.Ready(10, 2);  // bucket 0
  tracker_.Ready(7, 3);   // the rest of bucket 1
  EXPECT_TRUE(tracker_.Close().ok());
  comm.join();
  EXPECT_EQ(released, (std::vector<int>{0, 1, 2}));
}

TEST_F(BucketTrackerTest, ARangeAcrossBucketsCountsInEach) {
  tracker_.Ready(0, 12);
  EXPECT_TRUE(tracker_.WaitFor(2).ok());
  EXPECT_TRUE(tracker_.Close().ok());
}

TEST_F(BucketTrackerTest, MissingElementsFailCloseAndWaiters) {
  absl::Status waited;
  std::thread comm = WaitInBackground(&tracker_, 1, &waited);
  tracker_.Ready(10, 2);
  tracker_.Ready(4, 5);  // one element of bucket 1 never comes
  const absl::Status closed = tracker_.Close();
  comm.join();
  EXPECT_EQ(closed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(closed.message(), "bucket 1")) << closed;
  EXPECT_EQ(waited, closed);
}

TEST_F(BucketTrackerTest, DoubleOrOutOfRangeReportsFailTheStep) {
  tracker_.Ready(10, 2);
  tracker_.Ready(11, 1);
  EXPECT_EQ(tracker_.Close().code(), absl::StatusCode::kInvalidArgument);

  tracker_.Begin(plan_);  // a new step starts clean
  tracker_.Ready(10, 5);
  const absl::Status past = tracker_.Close();
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(past.message(), "past the gradient")) << past;
}

TEST_F(BucketTrackerTest, AbortReleasesWaiters) {
  absl::Status waited;
  std::thread comm = WaitInBackground(&tracker_, 0, &waited);
  tracker_.Abort(absl::CancelledError("stop"));
  comm.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace psring::trainer
