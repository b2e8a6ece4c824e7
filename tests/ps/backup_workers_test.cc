// Backup workers (--backup_workers=B, ps/sync_step.h): a step averages the first N - B pushes that arrive
// whole, the sum of those gradients divided by N - B, and drops the rest. On the shard core (a push outrun
// mid-stream, late pushes, the timeout, withdrawn pushes, the options) and through real gRPC servers and
// clients on loopback (a rank that is always late never holds a step up, gets the current parameters and goes
// on; gradient-only replay with a straggler). Distinct values per rank and step, results compared bit for bit
// with the closed form over the accepted pushes only.
#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ps/client.h"
#include "ps/shard_core.h"
#include "tests/ps/ps_cluster.h"
#include "tests/ps/shard_core_fixture.h"
#include "trainer/gradient_only.h"
#include "trainer/train.h"

namespace psring::ps {
namespace {

ShardOptions BackupOptions(int workers, int backup_workers) {
  ShardOptions options = SyncOptions(workers);
  options.backup_workers = backup_workers;
  // Far below the shard: a push held until the slowest caught up would never finish. Backup steps must not
  // hold any (nothing is applied before the close).
  options.max_lead_bytes = 2 * sizeof(float);
  return options;
}

class BackupWorkersTest : public ShardCoreTest {
 protected:
  // Starts a push and delivers its first `filled` elements of `grad`.
  SyncPush Begin(const PushInfo& info, const std::vector<float>& grad, uint64_t filled) {
    absl::StatusOr<SyncPush> push = core_->StartSyncPush(info);
    EXPECT_TRUE(push.ok()) << push.status();
    if (!push.ok()) return SyncPush();
    Deliver(&*push, grad, filled);
    return std::move(*push);
  }

  void Deliver(SyncPush* push, const std::vector<float>& grad, uint64_t filled) {
    std::copy_n(grad.begin(), filled, push->gradient.begin());
    const absl::Status status = core_->Delivered(push, filled, [] { return false; });
    EXPECT_TRUE(status.ok()) << status;
  }

  // The whole reply of a delivered push, and the push finished.
  StepReply Finish(SyncPush push) {
    absl::StatusOr<StepReply> reply = core_->AwaitStepReply(push);
    core_->FinishSyncPush(std::move(push), reply.status());
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : StepReply();
  }

  std::vector<uint64_t> Dropped() { return core_->Stats().dropped_by_rank; }
};

TEST_F(BackupWorkersTest, StepAveragesTheFirstPushesInAndDropsTheOthersWhole) {
  Start(BackupOptions(3, 1), 7);
  std::vector<float> params = Initial(7), momentum(7, 0.0f);

  // Step 0: rank 2 is mid-push (3 of 7 elements) when ranks 0 and 1 complete theirs: the step closes on
  // those two, and none of rank 2's elements reach it.
  SyncPush late2 = Begin(Info(2, 0, 0), Gradient(2, 0, 7), 3);
  SyncPush push0 = Begin(Info(0, 0, 0), Gradient(0, 0, 7), 7);
  EXPECT_EQ(core_->version(), 0u);
  SyncPush push1 = Begin(Info(1, 0, 0), Gradient(1, 0, 7), 7);
  EXPECT_EQ(core_->version(), 1u);
  ReferenceStep({Gradient(0, 0, 7), Gradient(1, 0, 7)}, &params, &momentum);
  for (SyncPush* push : {&push0, &push1}) {
    const StepReply reply = Finish(std::move(*push));
    EXPECT_FALSE(reply.dropped);
    ASSERT_NE(reply.parameters, nullptr);
    EXPECT_EQ(reply.parameters->version, 1u);
    EXPECT_EQ(reply.parameters->params, params);
  }
  // The outrun push is read to its end and answered with the new parameters, not an error.
  Deliver(&late2, Gradient(2, 0, 7), 7);
  StepReply reply = Finish(std::move(late2));
  EXPECT_TRUE(reply.dropped);
  EXPECT_EQ(reply.parameters->version, 1u);
  EXPECT_EQ(reply.parameters->params, params);
  EXPECT_EQ(Dropped(), (std::vector<uint64_t>{0, 0, 1}));

  // Step 1: ranks 2 and 0 first this time; rank 1 arrives after the close and is dropped at once.
  SyncPush push2 = Begin(Info(2, 1, 1), Gradient(2, 1, 7), 7);
  push0 = Begin(Info(0, 1, 1), Gradient(0, 1, 7), 7);
  ReferenceStep({Gradient(0, 1, 7), Gradient(2, 1, 7)}, &params, &momentum);
  SyncPush late1 = Begin(Info(1, 1, 1), Gradient(1, 1, 7), 7);
  EXPECT_TRUE(late1.late);
  reply = Finish(std::move(late1));
  EXPECT_TRUE(reply.dropped);
  EXPECT_EQ(reply.parameters->version, 2u);
  EXPECT_EQ(reply.parameters->params, params);
  for (SyncPush* push : {&push2, &push0}) EXPECT_FALSE(Finish(std::move(*push)).dropped);

  // Tagged with an older trainer step (at the current version), or an older version: dropped too.
  for (const PushInfo& info : {Info(1, 2, 1), Info(1, 0, 0)}) {
    SyncPush stale = Begin(info, Gradient(1, 9, 7), 7);
    EXPECT_TRUE(stale.late);
    EXPECT_TRUE(Finish(std::move(stale)).dropped);
  }
  EXPECT_EQ(Dropped(), (std::vector<uint64_t>{0, 3, 1}));
  EXPECT_EQ(core_->Stats().dropped_pushes, 4u);
  EXPECT_EQ(core_->version(), 2u);
  EXPECT_EQ(core_->CopyParameters(), params);
  // A step from the future is still refused.
  EXPECT_TRUE(absl::IsOutOfRange(core_->StartSyncPush(Info(0, 5, 5)).status()));
  // A registration forgets the last closed trainer step: a new job counting from 0 is not dropped forever.
  ASSERT_TRUE(Register(1, {}).ok());
  SyncPush restarted = Begin(Info(1, 2, 0), Gradient(1, 2, 7), 7);
  EXPECT_FALSE(restarted.late);
  core_->FinishSyncPush(std::move(restarted), absl::CancelledError("the test ends"));
}

TEST_F(BackupWorkersTest, WithdrawnPushNoLongerCountsTowardsTheStep) {
  Start(BackupOptions(3, 1), 5);
  SyncPush push0 = Begin(Info(0, 0), Gradient(0, 0, 5), 5);
  core_->FinishSyncPush(std::move(push0), absl::UnavailableError("client went away"));
  SyncPush push1 = Begin(Info(1, 0), Gradient(1, 0, 5), 5);
  EXPECT_EQ(core_->version(), 0u) << "the step closed on a withdrawn push";
  SyncPush push2 = Begin(Info(2, 0), Gradient(2, 0, 5), 5);
  std::vector<float> params = Initial(5), momentum(5, 0.0f);
  ReferenceStep({Gradient(1, 0, 5), Gradient(2, 0, 5)}, &params, &momentum);
  for (SyncPush* push : {&push1, &push2}) EXPECT_EQ(Finish(std::move(*push)).parameters->params, params);
  EXPECT_EQ(core_->Stats().dropped_pushes, 0u);
}

TEST_F(BackupWorkersTest, TooFewPushesTimeOutAndTheShardKeepsServing) {
  ShardOptions options = BackupOptions(3, 1);
  options.step_timeout = absl::Milliseconds(300);
  Start(options, 4);
  SyncPush alone = Begin(Info(0, 0), Gradient(0, 0, 4), 4);
  const absl::Time start = absl::Now();
  absl::StatusOr<StepReply> reply = core_->AwaitStepReply(alone);
  core_->FinishSyncPush(std::move(alone), reply.status());
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  ASSERT_TRUE(absl::IsDeadlineExceeded(reply.status())) << reply.status();
  EXPECT_TRUE(Contains(reply.status(), "only 1 of the 2 pushes")) << reply.status();
  EXPECT_EQ(core_->version(), 0u);
  EXPECT_EQ(core_->CopyParameters(), Initial(4));
  // The step again, with two ranks: served as usual.
  SyncPush push1 = Begin(Info(1, 0), Gradient(1, 0, 4), 4);
  SyncPush push2 = Begin(Info(2, 0), Gradient(2, 0, 4), 4);
  for (SyncPush* push : {&push1, &push2}) EXPECT_FALSE(Finish(std::move(*push)).dropped);
  EXPECT_EQ(core_->version(), 1u);
}

TEST(BackupWorkersOptionsTest, BadValuesAreRefused) {
  ShardOptions options = BackupOptions(3, 3);
  absl::Status status = ShardCore::Create(options).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(Contains(status, "--backup_workers=3 must be in [0, --workers=3)")) << status;
  options.backup_workers = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(ShardCore::Create(options).status()));
  options.backup_workers = 1;
  options.mode = Mode::kAsync;
  for (int staleness : {0, 2}) {
    options.staleness = staleness;
    status = ShardCore::Create(options).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_TRUE(Contains(status, "needs --mode=sync")) << status;
  }
  options.mode = Mode::kSync;
  EXPECT_TRUE(ShardCore::Create(options).ok());
}

// N = 3 workers with B = 1 on `num_shards` servers on loopback; pushes and replies in chunks of
// `chunk_floats`.
absl::StatusOr<testing::LocalCluster> StartBackupCluster(int num_shards, size_t chunk_floats) {
  ServiceOptions service;
  service.workers = 3;
  service.backup_workers = 1;
  service.step_timeout = absl::Seconds(20);
  service.chunk_bytes = chunk_floats * sizeof(float);
  return testing::StartCluster(num_shards, service);
}

absl::StatusOr<std::unique_ptr<PsExchange>> BackupClient(const testing::LocalCluster& cluster, int rank,
                                                         const trainer::SgdOptions& hyperparameters) {
  PsClientOptions options = testing::ClientOptionsFor(cluster, rank, 3);
  options.chunk_bytes = cluster.service.chunk_bytes;
  options.hyperparameters = hyperparameters;
  return PsExchange::Create(options);
}

// Real servers and clients: ranks 0 and 1 step as fast as they can; rank 2 pushes each step only once both
// shards closed it (so it is always late). The fast ranks never wait for it (if a step waited for rank 2,
// that would deadlock until the step timeout), rank 2's Exchange succeeds with the current parameters, and
// everyone ends at the closed form of the mean of ranks 0 and 1 only.
TEST(BackupWorkersServiceTest, LateRankNeverHoldsAStepUpAndItsPushesNeverCount) {
  constexpr int kSteps = 4;
  constexpr size_t kCount = 1001;  // not divisible by the 2 shards; chunks of 60 floats
  absl::StatusOr<testing::LocalCluster> cluster = StartBackupCluster(2, 60);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const auto closed = [&](int64_t step) {
    for (auto& server : cluster->servers) {
      if (server->service()->version() <= static_cast<uint64_t>(step)) return false;
    }
    return true;
  };
  std::vector<std::vector<float>> finals(3);
  std::vector<uint64_t> client_dropped(3);
  const absl::Time start = absl::Now();
  std::atomic<int64_t> fast_done_us{0};
  std::vector<absl::Status> statuses = testing::RunRanks(3, [&](int rank) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<PsExchange> exchange, BackupClient(*cluster, rank, kHyper));
    std::vector<float> params = Initial(kCount);
    const trainer::FloatBuffer p{params.data(), kCount};
    RETURN_IF_ERROR(exchange->SyncInitialParameters(p));
    // Registering forgets the last closed trainer step (a new job may start anywhere): all in before step 0.
    RETURN_IF_ERROR(exchange->Barrier());
    if (exchange->optimizer().server_update != trainer::ServerUpdate::kMeanOfFirstPushes) {
      return absl::InternalError("the client does not report the backup servers' update rule");
    }
    for (int64_t step = 0; step < kSteps; ++step) {
      if (rank == 2) {
        const absl::Time give_up = absl::Now() + absl::Seconds(20);
        while (!closed(step) && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(5));
        absl::SleepFor(absl::Milliseconds(20));
      }
      std::vector<float> grads = Gradient(rank, step, kCount);
      const absl::Time before = absl::Now();
      RETURN_IF_ERROR(exchange->Exchange(step, {grads.data(), kCount}, p).status());
      if (absl::Now() - before > absl::Seconds(5)) return absl::InternalError("a step waited");
    }
    if (rank == 0) fast_done_us = absl::ToInt64Microseconds(absl::Now() - start);
    finals[rank] = params;
    client_dropped[rank] = exchange->dropped_pushes();
    return absl::OkStatus();
  });
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  EXPECT_LT(fast_done_us.load(), 15'000'000) << "the fast ranks waited for the late one";
  std::vector<float> params = Initial(kCount), momentum(kCount, 0.0f);
  for (int64_t step = 0; step < kSteps; ++step) {
    ReferenceStep({Gradient(0, step, kCount), Gradient(1, step, kCount)}, &params, &momentum);
  }
  for (int r = 0; r < 3; ++r) EXPECT_EQ(finals[r], params) << "rank " << r;
  EXPECT_EQ(client_dropped, (std::vector<uint64_t>{0, 0, 2 * kSteps}));  // every step, on both shards
  for (auto& server : cluster->servers) {
    const proto::StatsReply stats = server->service()->GetStats();
    EXPECT_EQ(stats.version(), static_cast<uint64_t>(kSteps));
    EXPECT_EQ(stats.backup_workers(), 1);
    EXPECT_EQ(stats.dropped_pushes(), static_cast<uint64_t>(kSteps));
    ASSERT_EQ(stats.dropped_by_rank_size(), 3);
    EXPECT_EQ(stats.dropped_by_rank(2), static_cast<uint64_t>(kSteps));
  }
}

// Gradient-only replay (trainer/gradient_only.h) with rank 2 computing 4x slower: no rank fails, the check
// (every rank pushes the same values under backup workers) finds nothing wrong, every trainer step closed
// exactly once, and the straggler's late pushes were dropped.
TEST(BackupWorkersServiceTest, GradientOnlyReplayWithAStraggler) {
  constexpr int kWarmup = 1, kSteps = 6;
  absl::StatusOr<testing::LocalCluster> cluster = StartBackupCluster(1, 256);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::vector<::psring::proto::WorkerResult> results(3);
  std::vector<absl::Status> statuses = testing::RunRanks(3, [&](int rank) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<PsExchange> exchange, BackupClient(*cluster, rank, {0.1f, 0.9f, 1e-2f}));
    trainer::GradientOnlyOptions go;
    for (int l = 0; l < 3; ++l) {
      go.layers.push_back(
          {absl::StrCat("layer", l), 700u + 300u * l, absl::Milliseconds(3), absl::Milliseconds(6)});
    }
    go.bucket_mb = 0.004;
    go.warmup_steps = kWarmup;
    go.steps = kSteps;
    go.straggler.slow_rank = 2;
    go.straggler.factor = 4;
    ASSIGN_OR_RETURN(results[rank], trainer::RunGradientOnly(go, exchange.get()));
    return absl::OkStatus();
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    EXPECT_EQ(results[r].wrong(), 0) << "rank " << r;
  }
  const proto::StatsReply stats = cluster->servers[0]->service()->GetStats();
  EXPECT_EQ(stats.version(), static_cast<uint64_t>(kWarmup + kSteps));
  ASSERT_EQ(stats.dropped_by_rank_size(), 3);
  EXPECT_GT(stats.dropped_by_rank(2), 0u) << "the 4x slower rank was never late";
}

// Train() on real servers with B = 1 while rank 2 pauses 30 ms before every step, so the steps close without
// it: it skips the steps the job closed without it (PsExchange::TakeSkippedSteps), so the metrics windows and
// held-out evaluations, which are barriers, come at the same job step on every rank. Every rank ends at the
// same step (taken + skipped), rank 0 evaluated at every 10th job step, and rank 2 took fewer steps.
TEST(BackupWorkersServiceTest, TrainingRanksFollowTheJobsStepCount) {
  constexpr int64_t kSteps = 40;
  absl::StatusOr<testing::LocalCluster> cluster = StartBackupCluster(2, 4096);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  trainer::TrainOptions o;
  o.hidden = {24, 12};
  o.batch_size = 16;
  o.device = "cpu";
  o.dataset = "synthetic";
  o.synthetic_samples = 1536;
  o.max_steps = kSteps;
  o.log_every = 4;
  o.seed = 21;
  o.held_out.every = 10;
  o.held_out.samples = 200;
  std::vector<absl::StatusOr<trainer::TrainResult>> results(3, absl::UnknownError("not run"));
  std::vector<absl::Status> statuses = testing::RunRanks(3, [&](int rank) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<PsExchange> exchange,
                     BackupClient(*cluster, rank, {o.lr, o.momentum, o.weight_decay}));
    trainer::TrainOptions mine = o;
    if (rank == 2) {
      mine.straggler.pause_every = 1;
      mine.straggler.pause_s = 0.03;
    }
    results[rank] = trainer::Train(mine, exchange.get());
    return results[rank].status();
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    EXPECT_EQ(results[r]->steps + results[r]->skipped_steps, kSteps) << "rank " << r;
  }
  EXPECT_GT(results[2]->skipped_steps, 0) << "the paused rank never fell behind";
  EXPECT_LT(results[2]->steps, kSteps);
  std::vector<int64_t> evaluated;
  for (const trainer::EvalPoint& e : results[0]->evaluations) evaluated.push_back(e.step);
  EXPECT_EQ(evaluated, (std::vector<int64_t>{0, 10, 20, 30, 40}));
  for (auto& server : cluster->servers) {
    EXPECT_EQ(server->service()->GetStats().version(), static_cast<uint64_t>(kSteps));
  }
}

}  // namespace
}  // namespace psring::ps
