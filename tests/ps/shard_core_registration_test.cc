// The parameter-server core (ps/shard_core.h) driven directly from threads, without gRPC or sockets:
// registration and sessions, the metrics barrier and checkpoints.
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ps/checkpoint.h"
#include "ps/shard_core.h"
#include "tests/ps/shard_core_fixture.h"
#include "tests/testing/temp_dir.h"

namespace psring::ps {
namespace {

TEST_F(ShardCoreTest, MetricsBarrierAveragesEveryRoundInRankOrder) {
  Start(SyncOptions(3), 2);
  for (int round = 0; round < 2; ++round) {
    std::vector<absl::StatusOr<std::vector<double>>> means(3, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r) {
      threads.emplace_back([&, r] {
        means[r] = core_->AverageMetrics(r, sessions_[r], {0.1 * (r + 1) + round, 10.0 * r});
      });
    }
    for (std::thread& t : threads) t.join();
    const std::vector<double> expected = {(((0.1 + round) + (0.2 + round)) + (0.3 + round)) / 3, 10.0};
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(means[r].ok()) << means[r].status();
      EXPECT_EQ(*means[r], expected);
    }
  }
  // An empty list is a plain barrier.
  std::vector<absl::Status> barrier(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] { barrier[r] = core_->AverageMetrics(r, sessions_[r], {}).status(); });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : barrier) EXPECT_TRUE(s.ok()) << s;
}

TEST_F(ShardCoreTest, MetricsBarrierRefusesMismatchesAndTimesOut) {
  ShardOptions options = SyncOptions(2);
  options.step_timeout = absl::Seconds(1);
  Start(options, 2);
  absl::StatusOr<std::vector<double>> alone = absl::UnknownError("not run");
  std::thread rank0([&] { alone = core_->AverageMetrics(0, sessions_[0], {1.0, 2.0}); });
  absl::SleepFor(absl::Milliseconds(200));  // rank 0 arrives first
  absl::Status mismatch = core_->AverageMetrics(1, sessions_[1], {1.0}).status();
  rank0.join();
  EXPECT_TRUE(absl::IsInvalidArgument(mismatch)) << mismatch;
  EXPECT_TRUE(absl::IsDeadlineExceeded(alone.status())) << alone.status();
  EXPECT_TRUE(Contains(alone.status(), "waiting for ranks 1")) << alone.status();
  // The abandoned round is over: a new one completes.
  std::thread again([&] { alone = core_->AverageMetrics(0, sessions_[0], {4.0}); });
  absl::StatusOr<std::vector<double>> mean = core_->AverageMetrics(1, sessions_[1], {6.0});
  again.join();
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ(*mean, std::vector<double>{5.0});
  EXPECT_EQ(*alone, std::vector<double>{5.0});
}

TEST_F(ShardCoreTest, NewRegistrationReplacesTheSessionAndEndsItsWaits) {
  Start(SyncOptions(2), 3);
  // Rank 0 waits in the metrics barrier and has a whole push in the pending step.
  absl::Status metrics;
  std::thread waiter([&] { metrics = core_->AverageMetrics(0, sessions_[0], {1.0}).status(); });
  absl::StatusOr<SyncPush> old_push = core_->StartSyncPush(Info(0, 0));
  ASSERT_TRUE(old_push.ok());
  DeliverAll(core_.get(), &*old_push, Gradient(0, 0, 3));
  absl::SleepFor(absl::Milliseconds(100));
  const absl::uint128 old_session = sessions_[0];
  absl::StatusOr<RegisteredRank> again = Register(0, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(again->session, old_session);
  EXPECT_EQ(again->next_step, 0);
  waiter.join();
  EXPECT_TRUE(absl::IsFailedPrecondition(metrics)) << metrics;
  EXPECT_TRUE(Contains(metrics, "replaced")) << metrics;
  absl::Status push_status = core_->AwaitApplied(*old_push, 3).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(push_status)) << push_status;
  core_->FinishSyncPush(std::move(*old_push), push_status);
  PushInfo stale = Info(0, 0);
  stale.session = old_session;
  EXPECT_TRUE(absl::IsFailedPrecondition(core_->StartSyncPush(stale).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(core_->Pull(0, old_session).status()));
  // The new session's push forms the step with rank 1.
  for (const auto& reply : RunStep(0)) ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(core_->version(), 1u);
  EXPECT_EQ(core_->Stats().registered_workers, 2);
}

TEST(ShardCoreRegistrationTest, ChecksRanksLayoutAndSessions) {
  ShardOptions options = SyncOptions(2);
  options.shard = 1;
  options.num_shards = 2;
  absl::StatusOr<std::unique_ptr<ShardCore>> created = ShardCore::Create(options);
  ASSERT_TRUE(created.ok());
  ShardCore& core = **created;
  EXPECT_TRUE(absl::IsNotFound(core.Pull(0, 1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(core.BeginRegistration({2, 2, 10, kHyper}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(core.BeginRegistration({0, 3, 10, kHyper}).status()));
  absl::StatusOr<ShardRange> range = core.BeginRegistration({0, 2, 10, kHyper});
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->begin, 5u);
  EXPECT_EQ(range->end, 10u);
  const Registration first{0, 2, 10, kHyper};
  EXPECT_TRUE(absl::IsFailedPrecondition(core.CompleteRegistration(first).status()));  // no parameters yet
  // Nothing is fixed before parameters are accepted: another size or other hyperparameters still may be.
  EXPECT_TRUE(core.BeginRegistration({1, 2, 11, kHyper}).ok());
  EXPECT_TRUE(core.BeginRegistration({1, 2, 10, {0.1f, 0.9f, 0.01f}}).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(core.OfferInitialParameters(first, {1, 2, 3})));
  EXPECT_TRUE(absl::IsInvalidArgument(core.OfferInitialParameters(first, {1, 2, NAN, 4, 5})));
  ASSERT_TRUE(core.OfferInitialParameters(first, {1, 2, 3, 4, 5}).ok());
  ASSERT_TRUE(core.OfferInitialParameters(first, {9, 9, 9, 9, 9}).ok());  // the first offer wins
  // Now fixed.
  EXPECT_TRUE(absl::IsInvalidArgument(core.BeginRegistration({1, 2, 11, kHyper}).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(core.BeginRegistration({1, 2, 10, {0.1f, 0.9f, 0.01f}}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(core.OfferInitialParameters({1, 2, 11, kHyper}, std::vector<float>(5, 1))));
  absl::StatusOr<RegisteredRank> registered = core.CompleteRegistration(first);
  ASSERT_TRUE(registered.ok());
  EXPECT_EQ(registered->params, (std::vector<float>{1, 2, 3, 4, 5}));
  absl::StatusOr<ParameterSnapshot> pulled = core.Pull(0, registered->session);
  ASSERT_TRUE(pulled.ok());
  EXPECT_EQ(pulled->params, registered->params);
  EXPECT_EQ(pulled->version, 0u);
  core.BeginShutdown();
  EXPECT_TRUE(absl::IsUnavailable(core.Pull(0, registered->session).status()));
}

TEST(ShardCoreRegistrationTest, RefusedRegistrationsFixNothing) {
  ShardOptions options = SyncOptions(2);
  options.max_params = 100;
  absl::StatusOr<std::unique_ptr<ShardCore>> created = ShardCore::Create(options);
  ASSERT_TRUE(created.ok());
  ShardCore& core = **created;
  // Each of these is refused before it can change anything.
  const Registration refused[] = {
      {0, 2, 101, kHyper},                          // above --max_params
      {0, 2, uint64_t{1} << 62, kHyper},            // absurd
      {0, 2, 0, kHyper},                            // empty
      {0, 2, 10, {0.0f, 0.9f, 0.0f}},               // lr 0
      {0, 2, 10, {1e30f, 0.9f, 0.0f}},              // lr out of range
      {0, 2, 10, {INFINITY, 0.9f, 0.0f}},           // lr inf
      {0, 2, 10, {NAN, 0.9f, 0.0f}},                // lr nan
      {0, 2, 10, {0.1f, 1.0f, 0.0f}},               // momentum 1
      {0, 2, 10, {0.1f, -0.1f, 0.0f}},              // negative momentum
      {0, 2, 10, {0.1f, 0.9f, -1.0f}},              // negative weight decay
      {0, 2, 10, {0.1f, 0.9f, NAN}},                // weight decay nan
  };
  for (const Registration& r : refused) {
    EXPECT_TRUE(absl::IsInvalidArgument(core.BeginRegistration(r).status())) << r.total_params;
    EXPECT_TRUE(absl::IsInvalidArgument(core.OfferInitialParameters(r, std::vector<float>(10, 1.0f))));
  }
  // A registration without parameters is refused and fixes nothing either (the poisoning of issue 13).
  EXPECT_TRUE(absl::IsFailedPrecondition(core.CompleteRegistration({0, 2, 50, {1.0f, 0.0f, 0.0f}}).status()));
  EXPECT_EQ(core.Stats().total_params, 0u);
  EXPECT_TRUE(core.CopyParameters().empty());
  // The legitimate worker still gets in.
  const Registration good{0, 2, 10, kHyper};
  ASSERT_TRUE(core.OfferInitialParameters(good, std::vector<float>(10, 1.0f)).ok());
  absl::StatusOr<RegisteredRank> registered = core.CompleteRegistration(good);
  ASSERT_TRUE(registered.ok()) << registered.status();
  EXPECT_EQ(registered->total_params, 10u);
}

TEST(ShardCoreRegistrationTest, CreateRefusesHugeWorkerCountsAndNonFiniteTimeouts) {
  ShardOptions options = SyncOptions(2000000000);
  EXPECT_TRUE(absl::IsInvalidArgument(ShardCore::Create(options).status()));
  options = SyncOptions(2);
  options.step_timeout = absl::InfiniteDuration();
  EXPECT_TRUE(absl::IsInvalidArgument(ShardCore::Create(options).status()));
}

TEST(ShardCoreCheckpointTest, PeriodicCheckpointsHoldExactVersionsAndResume) {
  ShardOptions options = SyncOptions(1);
  options.checkpoint_dir = psring::testing::FreshTempPath("core_checkpoint");
  options.checkpoint_every = 2;
  constexpr size_t kN = 5;
  std::vector<float> params = Initial(kN), momentum(kN, 0.0f);
  {
    absl::StatusOr<std::unique_ptr<ShardCore>> core = ShardCore::Create(options);
    ASSERT_TRUE(core.ok());
    const Registration registration{0, 1, kN, kHyper};
    ASSERT_TRUE((*core)->BeginRegistration(registration).ok());
    ASSERT_TRUE((*core)->OfferInitialParameters(registration, Initial(kN)).ok());
    absl::StatusOr<RegisteredRank> registered = (*core)->CompleteRegistration(registration);
    ASSERT_TRUE(registered.ok());
    for (int64_t step = 0; step < 3; ++step) {
      ASSERT_TRUE(PushPull(core->get(), {0, registered->session, step, kN, step}, Gradient(0, step, kN), 2).ok());
      ReferenceStep({Gradient(0, step, kN)}, &params, &momentum);
      if (step == 1) {  // version 2 was written by the push that completed it
        absl::StatusOr<ShardCheckpoint> saved = ReadShardCheckpoint(ShardCheckpointPath(options.checkpoint_dir, 0, 1));
        ASSERT_TRUE(saved.ok()) << saved.status();
        EXPECT_EQ(saved->version, 2u);
        EXPECT_EQ(saved->params, params);
        EXPECT_EQ(saved->momentum, momentum);
      }
    }
    EXPECT_EQ((*core)->Stats().checkpoints_written, 1u);
    ASSERT_TRUE((*core)->WriteCheckpoint().ok());
    EXPECT_EQ((*core)->Stats().checkpoints_written, 2u);
  }
  absl::StatusOr<std::unique_ptr<ShardCore>> resumed = ShardCore::Create(options);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ((*resumed)->version(), 3u);
  EXPECT_EQ((*resumed)->CopyParameters(), params);
}

TEST_F(ShardCoreTest, SessionIdsAreRandomAcrossRegistrations) {
  Start(SyncOptions(2), 3);
  const absl::uint128 first = sessions_[0];
  ASSERT_TRUE(Register(0, {}).ok());
  const absl::uint128 second = sessions_[0];
  // Not a counter: both halves differ (2^-64 chance each of a false failure).
  EXPECT_NE(absl::Uint128High64(first), absl::Uint128High64(second));
  EXPECT_NE(absl::Uint128Low64(first), absl::Uint128Low64(second));
  EXPECT_NE(absl::Uint128Low64(second) - absl::Uint128Low64(first), 1u);
}

}  // namespace
}  // namespace psring::ps
