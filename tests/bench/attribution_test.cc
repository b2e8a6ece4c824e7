#include "bench/core/attribution.h"

#include <vector>

#include "gtest/gtest.h"

namespace psring::bench {
namespace {

TEST(AttributeSteps, NamesTheRankReadyLastInMostSteps) {
  // Rank 2 is ready 50 ms after the others in steps 0, 1, 3; rank 0 is last by 1 ms in step 2.
  const std::vector<std::vector<double>> ready = {
      {10.000, 11.000, 12.051, 13.000},
      {10.001, 11.001, 12.050, 13.001},
      {10.050, 11.051, 12.049, 13.052},
  };
  const StepAttribution a = AttributeSteps(ready);
  EXPECT_EQ(a.steps, 4);
  EXPECT_EQ(a.last_rank, (std::vector<int>{2, 2, 0, 2}));
  EXPECT_EQ(a.last_counts, (std::vector<int>{1, 0, 3}));
  EXPECT_EQ(a.straggler, 2);
  EXPECT_DOUBLE_EQ(a.share, 0.75);
  EXPECT_NEAR(a.median_lag_s, 0.050, 1e-6);
}

TEST(AttributeSteps, NobodyStandsOutWithoutAMajorityOrALag) {
  // Last ranks alternate: no majority.
  EXPECT_EQ(AttributeSteps({{0, 1.01, 2, 3.01}, {0.01, 1, 2.01, 3}}).straggler, -1);
  // Always the same rank, but by 0.5 ms only: jitter, not a straggler.
  EXPECT_EQ(AttributeSteps({{0, 1, 2}, {0.0005, 1.0005, 2.0005}}).straggler, -1);
  // One rank: nothing to attribute.
  EXPECT_EQ(AttributeSteps({{0, 1}}).steps, 0);
  // Ranks with different step counts: the common steps only.
  EXPECT_EQ(AttributeSteps({{0, 1, 2}, {0.1, 1.1}}).steps, 2);
}

TEST(QuorumStepSeconds, TheNMinusBthFastestRanksPace) {
  const std::vector<double> paces = {0.10, 0.40, 0.11, 0.12};  // rank 1 at factor 4
  EXPECT_DOUBLE_EQ(QuorumStepSeconds(paces, 0), 0.40);  // no backup workers: the slowest rank's
  EXPECT_DOUBLE_EQ(QuorumStepSeconds(paces, 1), 0.12);  // the first 3 of 4 close a step
  EXPECT_DOUBLE_EQ(QuorumStepSeconds(paces, 2), 0.11);
  EXPECT_DOUBLE_EQ(QuorumStepSeconds(paces, 3), 0.10);
  // Out of range: clamped to 0 <= B <= N-1; nobody reported: 0.
  EXPECT_DOUBLE_EQ(QuorumStepSeconds(paces, 9), 0.10);
  EXPECT_DOUBLE_EQ(QuorumStepSeconds(paces, -1), 0.40);
  EXPECT_DOUBLE_EQ(QuorumStepSeconds({}, 1), 0);
}

}  // namespace
}  // namespace psring::bench
