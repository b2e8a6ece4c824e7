// DDP's correctness property for the ring: N ranks with per-rank batch b reach the same parameters after 20
// steps as one process with batch N*b (up to float summation order), and the same test accuracy.
// Ranks are threads over the real TCP ring on loopback; the single process uses LocalExchange.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "ring/ring_exchange.h"
#include "ring/thread_ranks.h"
#include "trainer/exchange.h"
#include "trainer/train.h"

namespace psring::ring {
namespace {

trainer::TrainOptions Options(int batch) {
  trainer::TrainOptions o;
  o.hidden = {64, 32};
  o.batch_size = batch;
  o.max_steps = 20;
  o.dataset = "synthetic";
  o.synthetic_samples = 4096;
  o.device = "cpu";
  o.log_every = 0;
  o.seed = 7;
  return o;
}

class EquivalenceTest : public ::testing::TestWithParam<int> {};

TEST_P(EquivalenceTest, RanksWithBatchBMatchOneProcessWithBatchNB) {
  const int n = GetParam();
  constexpr int kBatch = 16;
  trainer::LocalExchange local;
  absl::StatusOr<trainer::TrainResult> single = trainer::Train(Options(n * kBatch), &local);
  ASSERT_TRUE(single.ok()) << single.status();

  std::vector<trainer::TrainResult> ranks(n);
  std::vector<absl::Status> status =
      RunRanksOwning(n, LoopbackOptions(), [&](int rank, std::unique_ptr<ProcessGroup> group) {
        RingExchange exchange(std::move(group));
        absl::StatusOr<trainer::TrainResult> r = trainer::Train(Options(kBatch), &exchange);
        if (!r.ok()) return r.status();
        ranks[rank] = std::move(*r);
        return absl::OkStatus();
      });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];

  const std::vector<float>& want = single->params;
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(ranks[r].steps, 20);
    ASSERT_EQ(ranks[r].params.size(), want.size());
    // Ranks are bit-identical to each other (the allgather copies one reduced block around).
    EXPECT_EQ(ranks[r].params, ranks[0].params) << "rank " << r << " diverged from rank 0";
    float worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(ranks[r].params[i] - want[i]));
    EXPECT_LE(worst, 1e-5f * scale) << "rank " << r << ": max |difference| " << worst << ", scale " << scale;
    EXPECT_NEAR(ranks[r].test_accuracy, single->test_accuracy, 1e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, EquivalenceTest, ::testing::Values(2, 4));

}  // namespace
}  // namespace psring::ring
