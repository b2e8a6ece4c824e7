// The parameter-server core (ps/shard_core.h) driven directly from threads, without gRPC or sockets: the
// pushes. The synchronous step and its exact result, rollback, the step timeout, trainer-step alignment, the
// lead limit, bounded staleness, non-finite gradients and updates. Expected parameters are computed with the
// trainer's own SgdMomentumStep on the rank-ordered mean, and compared bit for bit.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "ps/checkpoint.h"
#include "ps/shard_core.h"
#include "tests/ps/shard_core_fixture.h"
#include "tests/testing/temp_dir.h"
#include "trainer/optimizer.h"

namespace psring::ps {
namespace {

absl::StatusOr<std::vector<float>> AsyncPushPull(ShardCore* core, const PushInfo& info,
                                                 const std::vector<float>& grad, uint64_t* version) {
  ASSIGN_OR_RETURN(AsyncPush push, core->StartAsyncPush(info));
  std::copy(grad.begin(), grad.end(), push.gradient.begin());
  ASSIGN_OR_RETURN(*version, core->FinishAsyncPush(std::move(push), absl::OkStatus()));
  return core->CopyParameters();
}

ShardOptions AsyncOptions(int workers, absl::Duration step_timeout) {
  ShardOptions options;
  options.workers = workers;
  options.mode = Mode::kAsync;
  options.staleness = 1;
  options.step_timeout = step_timeout;
  return options;
}

TEST_F(ShardCoreTest, SyncStepsApplyTheRankOrderedMeanExactly) {
  Start(SyncOptions(3), 7);
  std::vector<float> params = Initial(7), momentum(7, 0.0f);
  for (int64_t step = 0; step < 3; ++step) {
    std::vector<absl::StatusOr<std::vector<float>>> replies = RunStep(step);
    ReferenceStep({Gradient(0, step, 7), Gradient(1, step, 7), Gradient(2, step, 7)}, &params, &momentum);
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(replies[r].ok()) << "rank " << r << ": " << replies[r].status();
      EXPECT_EQ(*replies[r], params) << "rank " << r << " step " << step;
    }
    EXPECT_EQ(core_->version(), static_cast<uint64_t>(step + 1));
  }
  EXPECT_EQ(core_->CopyParameters(), params);
  // The next push of a step already applied is from the past, one of a step not reached from the future.
  EXPECT_TRUE(absl::IsFailedPrecondition(core_->StartSyncPush(Info(0, 2)).status()));
  EXPECT_TRUE(absl::IsOutOfRange(core_->StartSyncPush(Info(0, 4)).status()));
}

TEST_F(ShardCoreTest, PushBrokenAfterPartWasAppliedRollsBackParamsAndMomentum) {
  ShardOptions options = SyncOptions(2);
  options.checkpoint_dir = psring::testing::FreshTempPath("core_rollback");
  Start(options, 6);
  // One complete step first, so the momentum the rollback must restore is not zero.
  for (const auto& reply : RunStep(0)) ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_TRUE(core_->WriteCheckpoint().ok());
  const std::string path = ShardCheckpointPath(options.checkpoint_dir, 0, 1);
  absl::StatusOr<ShardCheckpoint> before = ReadShardCheckpoint(path);
  ASSERT_TRUE(before.ok()) << before.status();

  absl::StatusOr<SyncPush> whole = core_->StartSyncPush(Info(0, 1));
  ASSERT_TRUE(whole.ok()) << whole.status();
  DeliverAll(core_.get(), &*whole, Gradient(0, 1, 6));
  absl::Status waiter;
  std::thread rank0([&] { waiter = core_->AwaitApplied(*whole, 6).status(); });
  absl::StatusOr<SyncPush> broken = core_->StartSyncPush(Info(1, 1));
  ASSERT_TRUE(broken.ok()) << broken.status();
  const std::vector<float> g1 = Gradient(1, 1, 6);
  std::copy_n(g1.begin(), 3, broken->gradient.begin());
  ASSERT_TRUE(core_->Delivered(&*broken, 3, [] { return false; }).ok());
  // Elements [0, 3) of step 1 were applied: a reply reads them, while the shard's complete version (what
  // pulls and checkpoints see) is still the one before the step.
  std::vector<float> newest(3);
  core_->ReadParameters(0, 3, [&](const float* p) { std::copy_n(p, 3, newest.begin()); });
  ASSERT_NE(newest, std::vector<float>(before->params.begin(), before->params.begin() + 3));
  EXPECT_EQ(core_->CopyParameters(), before->params);
  core_->AbandonSyncPush(*broken, absl::InvalidArgumentError("gradient: a gap"));
  rank0.join();
  EXPECT_TRUE(absl::IsUnavailable(waiter)) << waiter;
  EXPECT_TRUE(Contains(waiter, "rolled back to version 1")) << waiter;
  core_->FinishSyncPush(std::move(*broken), absl::InvalidArgumentError("gradient: a gap"));
  core_->FinishSyncPush(std::move(*whole), waiter);

  EXPECT_EQ(core_->version(), 1u);
  EXPECT_EQ(core_->CopyParameters(), before->params);
  ASSERT_TRUE(core_->WriteCheckpoint().ok());
  absl::StatusOr<ShardCheckpoint> after = ReadShardCheckpoint(path);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->version, 1u);
  EXPECT_EQ(after->params, before->params);
  EXPECT_EQ(after->momentum, before->momentum);
  // Step 1 again, whole: exactly one step on the restored state.
  std::vector<float> params = before->params, momentum = before->momentum;
  ReferenceStep({Gradient(0, 1, 6), Gradient(1, 1, 6)}, &params, &momentum);
  for (const auto& reply : RunStep(1)) {
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(*reply, params);
  }
}

TEST_F(ShardCoreTest, StepTimeoutDropsTheStepAndTheShardKeepsServing) {
  ShardOptions options = SyncOptions(2);
  options.step_timeout = absl::Milliseconds(300);
  Start(options, 5);
  // Rank 1 delivers 2 elements (so [0, 2) is applied) and then stalls.
  absl::StatusOr<SyncPush> stalled = core_->StartSyncPush(Info(1, 0));
  ASSERT_TRUE(stalled.ok());
  const std::vector<float> g1 = Gradient(1, 0, 5);
  std::copy_n(g1.begin(), 2, stalled->gradient.begin());
  ASSERT_TRUE(core_->Delivered(&*stalled, 2, [] { return false; }).ok());
  absl::StatusOr<std::vector<float>> first = absl::UnknownError("not run");
  std::thread rank0([&] { first = PushPull(core_.get(), Info(0, 0), Gradient(0, 0, 5), 5); });
  rank0.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(first.status())) << first.status();
  EXPECT_TRUE(Contains(first.status(), "ranks 1 did not push step 0")) << first.status();
  EXPECT_EQ(core_->CopyParameters(), Initial(5));
  EXPECT_EQ(core_->version(), 0u);
  // The stalled push learns that its step is gone.
  absl::Status late = core_->Delivered(&*stalled, 5, [] { return false; });
  EXPECT_TRUE(absl::IsDeadlineExceeded(late)) << late;
  core_->FinishSyncPush(std::move(*stalled), late);

  std::vector<float> params = Initial(5), momentum(5, 0.0f);
  ReferenceStep({Gradient(0, 0, 5), Gradient(1, 0, 5)}, &params, &momentum);
  for (const auto& reply : RunStep(0)) {
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(*reply, params);
  }
  EXPECT_EQ(core_->version(), 1u);
}

TEST_F(ShardCoreTest, MostAdvancedTrainerStepWinsAndOthersAreAborted) {
  Start(SyncOptions(2), 4);
  // Rank 0 redoes trainer step 5 (it missed the reply before a restart); rank 1 is already at 6.
  absl::StatusOr<SyncPush> behind = core_->StartSyncPush(Info(0, 0, /*trainer_step=*/5));
  ASSERT_TRUE(behind.ok());
  DeliverAll(core_.get(), &*behind, Gradient(0, 0, 4));
  absl::StatusOr<std::vector<float>> ahead = absl::UnknownError("not run");
  std::thread rank1([&] { ahead = PushPull(core_.get(), Info(1, 0, 6), Gradient(1, 0, 4), 4); });
  absl::StatusOr<uint64_t> dropped = core_->AwaitApplied(*behind, 4);
  EXPECT_TRUE(absl::IsAborted(dropped.status())) << dropped.status();
  EXPECT_TRUE(Contains(dropped.status(), "skipped")) << dropped.status();
  core_->FinishSyncPush(std::move(*behind), dropped.status());
  EXPECT_EQ(core_->CopyParameters(), Initial(4));
  // A later push of the lower trainer step is refused; at trainer step 6 it joins and the step forms.
  absl::Status lower = core_->StartSyncPush(Info(0, 0, 5)).status();
  EXPECT_TRUE(absl::IsAborted(lower)) << lower;
  absl::StatusOr<std::vector<float>> joined = PushPull(core_.get(), Info(0, 0, 6), Gradient(0, 0, 4), 1);
  rank1.join();
  ASSERT_TRUE(joined.ok()) << joined.status();
  ASSERT_TRUE(ahead.ok()) << ahead.status();
  std::vector<float> params = Initial(4), momentum(4, 0.0f);
  ReferenceStep({Gradient(0, 0, 4), Gradient(1, 0, 4)}, &params, &momentum);
  EXPECT_EQ(*joined, params);
  EXPECT_EQ(*ahead, params);
  EXPECT_EQ(core_->version(), 1u);
}

TEST_F(ShardCoreTest, PushAheadOfTheSlowestIsHeldUntilItCatchesUp) {
  ShardOptions options = SyncOptions(2);
  options.max_lead_bytes = sizeof(float);
  Start(options, 6);
  absl::StatusOr<SyncPush> fast = core_->StartSyncPush(Info(0, 0));
  ASSERT_TRUE(fast.ok());
  std::atomic<bool> released{false};
  std::thread rank0([&] {
    const std::vector<float> g = Gradient(0, 0, 6);
    std::copy(g.begin(), g.end(), fast->gradient.begin());
    // 3 elements delivered, none of rank 1's: more than one element ahead, so this blocks.
    EXPECT_TRUE(core_->Delivered(&*fast, 3, [] { return false; }).ok());
    released = true;
    EXPECT_TRUE(core_->Delivered(&*fast, 6, [] { return false; }).ok());
  });
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(released);
  absl::StatusOr<std::vector<float>> slow = PushPull(core_.get(), Info(1, 0), Gradient(1, 0, 6), 1);
  rank0.join();
  EXPECT_TRUE(released);
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_TRUE(core_->AwaitApplied(*fast, 6).ok());
  core_->FinishSyncPush(std::move(*fast), absl::OkStatus());
  EXPECT_EQ(core_->version(), 1u);
}

TEST_F(ShardCoreTest, AsyncPusherWaitsForTheSlowestWithinTheStaleness) {
  Start(AsyncOptions(2, absl::Seconds(20)), 3);
  ASSERT_FALSE(core_->aggregating());
  // Each push is one optimizer step on g / N with weight_decay / N, in arrival order.
  trainer::SgdOptions scaled = kHyper;
  scaled.weight_decay /= 2;
  std::vector<float> params = Initial(3), momentum(3, 0.0f);
  const auto reference = [&](int rank, int64_t step) {
    std::vector<float> g = Gradient(rank, step, 3);
    for (float& v : g) v /= 2.0f;
    trainer::SgdMomentumStep(scaled, g.data(), params.data(), momentum.data(), 3);
  };
  uint64_t version = 0;
  // Rank 0, step 0: clock 1, rank 1 at 0 >= 1 - 1: goes on at once.
  ASSERT_TRUE(AsyncPushPull(core_.get(), Info(0, 0), Gradient(0, 0, 3), &version).ok());
  EXPECT_EQ(version, 1u);
  reference(0, 0);
  // Rank 0, step 1: applied, then held (rank 1 would be 2 steps behind).
  std::atomic<bool> done{false};
  absl::StatusOr<std::vector<float>> held = absl::UnknownError("not run");
  uint64_t held_version = 0;
  std::thread rank0([&] {
    held = AsyncPushPull(core_.get(), Info(0, 1), Gradient(0, 1, 3), &held_version);
    done = true;
  });
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (core_->version() < 2 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  reference(0, 1);
  EXPECT_EQ(core_->CopyParameters(), params);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(done);
  // Rank 1's step 0 releases it.
  ASSERT_TRUE(AsyncPushPull(core_.get(), Info(1, 0), Gradient(1, 0, 3), &version).ok());
  reference(1, 0);
  rank0.join();
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(held_version, 3u);
  EXPECT_EQ(core_->CopyParameters(), params);
  // A duplicate of an applied step is from the past.
  EXPECT_TRUE(absl::IsFailedPrecondition(core_->StartAsyncPush(Info(1, 0)).status()));
}

TEST_F(ShardCoreTest, AsyncStalenessWaitTimesOutNamingTheSlowRank) {
  Start(AsyncOptions(3, absl::Milliseconds(200)), 2);
  uint64_t version = 0;
  ASSERT_TRUE(AsyncPushPull(core_.get(), Info(0, 0), Gradient(0, 0, 2), &version).ok());
  ASSERT_TRUE(AsyncPushPull(core_.get(), Info(2, 0), Gradient(2, 0, 2), &version).ok());
  absl::Status held = AsyncPushPull(core_.get(), Info(0, 1), Gradient(0, 1, 2), &version).status();
  EXPECT_TRUE(absl::IsDeadlineExceeded(held)) << held;
  EXPECT_TRUE(Contains(held, "ahead of ranks 1 which did not reach step 1")) << held;
  EXPECT_EQ(core_->version(), 3u);  // applied all the same: the wait comes after
}

TEST_F(ShardCoreTest, NonFiniteSyncGradientIsRefusedAndTheStepRolledBack) {
  Start(SyncOptions(2), 6);
  for (const auto& reply : RunStep(0)) ASSERT_TRUE(reply.ok()) << reply.status();
  const std::vector<float> before = core_->CopyParameters();
  absl::StatusOr<SyncPush> whole = core_->StartSyncPush(Info(0, 1));
  ASSERT_TRUE(whole.ok()) << whole.status();
  DeliverAll(core_.get(), &*whole, Gradient(0, 1, 6));
  absl::StatusOr<SyncPush> poisoned = core_->StartSyncPush(Info(1, 1));
  ASSERT_TRUE(poisoned.ok()) << poisoned.status();
  std::vector<float> g1 = Gradient(1, 1, 6);
  g1[4] = NAN;
  std::copy(g1.begin(), g1.end(), poisoned->gradient.begin());
  ASSERT_TRUE(core_->Delivered(&*poisoned, 3, [] { return false; }).ok());  // [0, 3) is finite: applied
  const absl::Status refused = core_->Delivered(&*poisoned, 6, [] { return false; });
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_TRUE(Contains(refused, "gradient element 4 of rank 1 at step 1")) << refused;
  core_->AbandonSyncPush(*poisoned, refused);
  core_->FinishSyncPush(std::move(*poisoned), refused);
  core_->FinishSyncPush(std::move(*whole), refused);
  EXPECT_EQ(core_->CopyParameters(), before);
  EXPECT_EQ(core_->version(), 1u);
}

TEST_F(ShardCoreTest, NonFiniteAsyncGradientIsRefusedWithoutApplyingIt) {
  Start(AsyncOptions(1, absl::Seconds(5)), 4);
  const std::vector<float> before = core_->CopyParameters();
  uint64_t version = 0;
  std::vector<float> grad = Gradient(0, 0, 4);
  grad[2] = -INFINITY;
  const absl::Status refused = AsyncPushPull(core_.get(), Info(0, 0), grad, &version).status();
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_EQ(core_->CopyParameters(), before);
  EXPECT_EQ(core_->version(), 0u);
  EXPECT_TRUE(AsyncPushPull(core_.get(), Info(0, 0), Gradient(0, 0, 4), &version).ok());  // same step again
}

// Issue 22: finite gradients near FLT_MAX with lr 10 overflow in the update. The step is refused and rolled
// back like any failed step (every rank is told, naming the ranks), the checkpoint on disk stays the last
// good one and loads, and the job can go on with sane gradients.
TEST_F(ShardCoreTest, SyncUpdateThatOverflowsIsRefusedAndTheCheckpointStaysLoadable) {
  ShardOptions options = SyncOptions(2);
  options.checkpoint_dir = psring::testing::FreshTempPath("core_overflow");
  options.checkpoint_every = 1;
  options.max_grad_norm = std::numeric_limits<double>::infinity();  // the update's own check, not the bound's
  hyper_ = {10.0f, 0.9f, 0.0f};
  Start(options, 6);
  for (const auto& reply : RunStep(0)) ASSERT_TRUE(reply.ok()) << reply.status();
  const std::vector<float> good = core_->CopyParameters();
  const std::string path = ShardCheckpointPath(options.checkpoint_dir, 0, 1);

  const std::vector<float> huge(6, 3.0e38f);  // finite, but lr * g is not
  std::vector<absl::StatusOr<std::vector<float>>> replies(2, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] { replies[r] = PushPull(core_.get(), Info(r, 1), huge, 6); });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(replies[r].ok()) << "rank " << r;
    EXPECT_TRUE(absl::IsInvalidArgument(replies[r].status())) << replies[r].status();
    EXPECT_TRUE(Contains(replies[r].status(), "is not finite")) << replies[r].status();
    EXPECT_TRUE(Contains(replies[r].status(), "ranks 0,1")) << replies[r].status();
    EXPECT_TRUE(Contains(replies[r].status(), "lower --lr")) << replies[r].status();
  }
  EXPECT_EQ(core_->version(), 1u);
  EXPECT_EQ(core_->CopyParameters(), good);
  absl::StatusOr<ShardCheckpoint> saved = ReadShardCheckpoint(path);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->version, 1u);
  EXPECT_EQ(saved->params, good);

  // The job goes on: the same step with sane gradients is applied, and saved.
  for (const auto& reply : RunStep(1)) ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(core_->version(), 2u);
  saved = ReadShardCheckpoint(path);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->version, 2u);
}

// Issue 34: a gradient over --max_grad_norm is refused naming rank, step and norm, the step it was part of
// is rolled back (the other rank is told to push again), and the same step with sane gradients then goes on.
TEST_F(ShardCoreTest, SyncGradientOverTheNormBoundIsRefusedAndTheStepGoesOn) {
  ShardOptions options = SyncOptions(2);
  options.max_grad_norm = 100;
  Start(options, 6);
  const std::vector<float> before = core_->CopyParameters();
  const std::vector<float> huge(6, 50.0f);  // norm 122.5
  std::vector<absl::StatusOr<std::vector<float>>> replies(2, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] { replies[r] = PushPull(core_.get(), Info(r, 0), r == 1 ? huge : Gradient(r, 0, 6), 6); });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_FALSE(replies[1].ok());
  EXPECT_TRUE(absl::IsInvalidArgument(replies[1].status())) << replies[1].status();
  EXPECT_TRUE(Contains(replies[1].status(), "rank 1 step 0: gradient norm 122.47")) << replies[1].status();
  EXPECT_TRUE(Contains(replies[1].status(), "--max_grad_norm=100")) << replies[1].status();
  EXPECT_FALSE(replies[0].ok());  // its step was dropped: it pushes again
  EXPECT_EQ(core_->version(), 0u);
  EXPECT_EQ(core_->CopyParameters(), before);
  for (const auto& reply : RunStep(0)) ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(core_->version(), 1u);
}

TEST_F(ShardCoreTest, AsyncGradientOverTheNormBoundChangesNothing) {
  ShardOptions options = AsyncOptions(1, absl::Seconds(20));
  options.max_grad_norm = 10;
  Start(options, 4);
  const std::vector<float> before = core_->CopyParameters();
  uint64_t version = 0;
  absl::StatusOr<std::vector<float>> refused =
      AsyncPushPull(core_.get(), Info(0, 0), std::vector<float>(4, 6.0f), &version);  // norm 12
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(Contains(refused.status(), "rank 0 step 0: gradient norm 12 ")) << refused.status();
  EXPECT_EQ(core_->CopyParameters(), before);
  ASSERT_TRUE(AsyncPushPull(core_.get(), Info(0, 0), Gradient(0, 0, 4), &version).ok());
  EXPECT_EQ(version, 1u);
}

TEST_F(ShardCoreTest, AsyncPushWhoseUpdateOverflowsChangesNothing) {
  hyper_ = {10.0f, 0.9f, 0.0f};
  ShardOptions options = AsyncOptions(1, absl::Seconds(20));
  options.max_grad_norm = std::numeric_limits<double>::infinity();
  Start(options, 5);
  const std::vector<float> before = core_->CopyParameters();
  uint64_t version = 0;
  std::vector<float> huge(5, 1.0f);
  huge[3] = 3.0e38f;
  absl::StatusOr<std::vector<float>> refused = AsyncPushPull(core_.get(), Info(0, 0), huge, &version);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_TRUE(Contains(refused.status(), "update of element 3 by the push of rank 0")) << refused.status();
  EXPECT_EQ(core_->CopyParameters(), before);  // not even the finite elements moved
  EXPECT_EQ(core_->version(), 0u);
  // The rank's clock did not move: it pushes the same step again.
  ASSERT_TRUE(AsyncPushPull(core_.get(), Info(0, 0), Gradient(0, 0, 5), &version).ok());
  EXPECT_EQ(version, 1u);
}

// Issue 22: an asynchronous push that hangs must not keep the rank's next session (a re-registered
// worker) from pushing; the hung push then fails as stale and changes nothing.
TEST_F(ShardCoreTest, HungAsyncPushDoesNotBlockTheRanksNextSession) {
  Start(AsyncOptions(2, absl::Seconds(20)), 4);
  absl::StatusOr<AsyncPush> hung = core_->StartAsyncPush(Info(0, 0));
  ASSERT_TRUE(hung.ok()) << hung.status();
  ASSERT_TRUE(Register(0, {}).ok());
  absl::StatusOr<AsyncPush> fresh = core_->StartAsyncPush(Info(0, 0));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  // The same session still cannot have two pushes in flight.
  EXPECT_TRUE(absl::IsAlreadyExists(core_->StartAsyncPush(Info(0, 0)).status()));
  std::fill(hung->gradient.begin(), hung->gradient.end(), 1.0f);
  EXPECT_TRUE(absl::IsFailedPrecondition(core_->FinishAsyncPush(std::move(*hung), absl::OkStatus()).status()));
  std::fill(fresh->gradient.begin(), fresh->gradient.end(), 1.0f);
  // Staleness 1 lets rank 0 go one step ahead of rank 1, which has not pushed.
  absl::StatusOr<uint64_t> applied = core_->FinishAsyncPush(std::move(*fresh), absl::OkStatus());
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(*applied, 1u);
}

}  // namespace
}  // namespace psring::ps
