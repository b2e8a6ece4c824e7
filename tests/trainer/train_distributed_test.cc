// Train() with several ranks as threads over an in-memory exchange: the DDP property (N ranks with batch b
// equal one rank with batch N*b), identical parameters on every rank, the kParametersUpdated path (optimizer
// applied by the exchange, as the parameter server does), metric averaging and rank-0-only checkpoints.
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"
#include "trainer/exchange.h"
#include "trainer/optimizer.h"
#include "trainer/train.h"

namespace psring::trainer {
namespace {

// Rendezvous of `size` threads: the last to arrive runs `combine` over every rank's argument, then all
// return.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), slots_(size) {}
  int size() const { return size_; }

  absl::Status Collective(int rank, void* arg,
                          const std::function<void(const std::vector<void*>&)>& combine) {
    absl::MutexLock lock(&mu_);
    slots_[rank] = arg;
    const int64_t generation = generation_;
    if (++arrived_ == size_) {
      combine(slots_);
      arrived_ = 0;
      ++generation_;
      return absl::OkStatus();
    }
    auto done = [this, generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return generation_ != generation; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(60))) {
      return absl::DeadlineExceededError("ThreadGroup: other ranks did not arrive within 60 s");
    }
    return absl::OkStatus();
  }

 private:
  const int size_;
  absl::Mutex mu_;
  std::vector<void*> slots_ ABSL_GUARDED_BY(mu_);
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

// Server-side optimizer state for kParametersUpdated mode.
struct ServerState {
  SgdOptions sgd;
  std::vector<float> params;
  std::vector<float> velocity;
};

// A GradientExchange over a ThreadGroup. Sums in rank order, so every run is deterministic.
class ThreadExchange final : public GradientExchange {
 public:
  ThreadExchange(ThreadGroup* group, int rank, ServerState* server)
      : group_(group), rank_(rank), server_(server) {}

  std::string name() const override { return server_ != nullptr ? "threads-ps" : "threads-allreduce"; }
  int rank() const override { return rank_; }
  int world_size() const override { return group_->size(); }
  OptimizerInfo optimizer() const override {
    if (server_ == nullptr) return OptimizerInfo{OptimizerOwner::kTrainer};
    return OptimizerInfo{OptimizerOwner::kServer, ServerUpdate::kMeanPerStep, server_->sgd};
  }
  uint64_t bytes_sent() const override { return 0; }
  uint64_t bytes_received() const override { return 0; }

  absl::Status SyncInitialParameters(FloatBuffer params) override {
    EXPECT_EQ(params.memory, MemoryKind::kHost);
    return group_->Collective(rank_, &params, [this](const std::vector<void*>& all) {
      const FloatBuffer& root = *static_cast<FloatBuffer*>(all[0]);
      for (void* p : all) std::copy(root.data, root.data + root.count, static_cast<FloatBuffer*>(p)->data);
      if (server_ != nullptr) {
        server_->params.assign(root.data, root.data + root.count);
        server_->velocity.assign(root.count, 0.0f);
      }
    });
  }

  absl::StatusOr<ExchangeOutcome> Exchange(int64_t, FloatBuffer grads, FloatBuffer params) override {
    std::pair<FloatBuffer, FloatBuffer> mine(grads, params);
    absl::Status s = group_->Collective(rank_, &mine, [this](const std::vector<void*>& all) {
      const size_t n = static_cast<std::pair<FloatBuffer, FloatBuffer>*>(all[0])->first.count;
      std::vector<float> mean(n, 0.0f);
      for (void* p : all) {
        const float* g = static_cast<std::pair<FloatBuffer, FloatBuffer>*>(p)->first.data;
        for (size_t i = 0; i < n; ++i) mean[i] += g[i];
      }
      for (float& v : mean) v /= static_cast<float>(all.size());
      if (server_ != nullptr) {
        SgdMomentumStep(server_->sgd, mean.data(), server_->params.data(), server_->velocity.data(), n);
      }
      for (void* p : all) {
        auto* bufs = static_cast<std::pair<FloatBuffer, FloatBuffer>*>(p);
        if (server_ != nullptr) {
          std::copy(server_->params.begin(), server_->params.end(), bufs->second.data);
        } else {
          std::copy(mean.begin(), mean.end(), bufs->first.data);
        }
      }
    });
    if (!s.ok()) return s;
    return server_ != nullptr ? ExchangeOutcome::kParametersUpdated : ExchangeOutcome::kGradientsAveraged;
  }

  absl::Status AverageMetrics(absl::Span<double> values) override {
    return group_->Collective(rank_, &values, [](const std::vector<void*>& all) {
      const size_t n = static_cast<absl::Span<double>*>(all[0])->size();
      std::vector<double> mean(n, 0.0);
      for (void* p : all) {
        for (size_t i = 0; i < n; ++i) mean[i] += (*static_cast<absl::Span<double>*>(p))[i];
      }
      for (void* p : all) {
        for (size_t i = 0; i < n; ++i) (*static_cast<absl::Span<double>*>(p))[i] = mean[i] / all.size();
      }
    });
  }

  absl::Status Barrier() override {
    return group_->Collective(rank_, nullptr, [](const std::vector<void*>&) {});
  }

 private:
  ThreadGroup* group_;
  int rank_;
  ServerState* server_;
};

std::vector<absl::StatusOr<TrainResult>> TrainRanks(const TrainOptions& o, int world, bool server_side) {
  ThreadGroup group(world);
  ServerState server{SgdOptions{o.lr, o.momentum, o.weight_decay}, {}, {}};
  std::vector<absl::StatusOr<TrainResult>> results(world, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      ThreadExchange exchange(&group, r, server_side ? &server : nullptr);
      results[r] = Train(o, &exchange);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

TrainOptions Small(int batch) {
  TrainOptions o;
  o.hidden = {24, 12};
  o.batch_size = batch;
  o.epochs = 2;
  o.device = "cpu";
  o.dataset = "synthetic";
  o.synthetic_samples = 1536;
  o.log_every = 4;
  o.seed = 21;
  return o;
}

using psring::testing::FreshTempPath;

TEST(TrainDistributedTest, FourRanksEqualOneRankWithFourTimesTheBatch) {
  LocalExchange local;
  absl::StatusOr<TrainResult> single = Train(Small(64), &local);
  ASSERT_TRUE(single.ok()) << single.status();
  const auto ranks = TrainRanks(Small(16), 4, /*server_side=*/false);
  for (const auto& r : ranks) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->steps, single->steps);
    // Every rank holds the same parameters, bit for bit.
    EXPECT_EQ(r->params, ranks[0]->params);
    EXPECT_DOUBLE_EQ(r->test_accuracy, ranks[0]->test_accuracy);
    EXPECT_DOUBLE_EQ(r->final_loss, ranks[0]->final_loss);
  }
  // The same samples per step; only the float summation order differs.
  ASSERT_EQ(ranks[0]->params.size(), single->params.size());
  for (size_t i = 0; i < single->params.size(); ++i) {
    ASSERT_NEAR(ranks[0]->params[i], single->params[i], 2e-4) << i;
  }
  EXPECT_NEAR(ranks[0]->final_loss, single->final_loss, 1e-3);
  EXPECT_NEAR(ranks[0]->test_accuracy, single->test_accuracy, 0.005);
}

TEST(TrainDistributedTest, ServerSideOptimizerMatchesTrainerSideOptimizer) {
  const auto averaged = TrainRanks(Small(16), 3, /*server_side=*/false);
  const auto updated = TrainRanks(Small(16), 3, /*server_side=*/true);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(averaged[r].ok()) << averaged[r].status();
    ASSERT_TRUE(updated[r].ok()) << updated[r].status();
    EXPECT_EQ(updated[r]->params, averaged[r]->params) << "rank " << r;
  }
}

TEST(TrainDistributedTest, OnlyRankZeroCheckpointsAndResumeIsExact) {
  TrainOptions whole = Small(16);
  const auto uninterrupted = TrainRanks(whole, 2, false);
  ASSERT_TRUE(uninterrupted[0].ok()) << uninterrupted[0].status();

  TrainOptions first = Small(16);
  first.checkpoint_dir = FreshTempPath("distributed_ckpt");
  first.max_steps = 30;  // mid-epoch 1 (48 steps per epoch)
  const auto part = TrainRanks(first, 2, false);
  ASSERT_TRUE(part[0].ok() && part[1].ok());
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(first.checkpoint_dir)) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "latest.npz");
  }
  EXPECT_EQ(files, 1);

  TrainOptions second = Small(16);
  second.checkpoint_dir = first.checkpoint_dir;
  second.resume = true;
  const auto rest = TrainRanks(second, 2, false);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(rest[r].ok()) << rest[r].status();
    EXPECT_EQ(rest[r]->params, uninterrupted[r]->params) << "rank " << r;
  }
  // A different world size cannot continue the same sample order.
  const auto wrong_world = TrainRanks(second, 3, false);
  EXPECT_EQ(wrong_world[0].status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TrainDistributedTest, ServerOwnedOptimizerRefusesTrainerCheckpoints) {
  // The momentum lives on the servers: a worker checkpoint could not hold it, so neither is accepted.
  TrainOptions save = Small(16);
  save.checkpoint_dir = FreshTempPath("server_owned_ckpt");
  TrainOptions resume = save;
  resume.resume = true;
  for (const TrainOptions& o : {save, resume}) {
    const auto ranks = TrainRanks(o, 2, /*server_side=*/true);
    for (const auto& r : ranks) {
      ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
      EXPECT_NE(r.status().message().find("give the servers --checkpoint_dir"), absl::string_view::npos)
          << r.status();
    }
  }
  EXPECT_FALSE(std::filesystem::exists(save.checkpoint_dir));
}

TEST(TrainDistributedTest, WorldSizeNotDividingTheDataSet) {
  TrainOptions o = Small(16);
  o.synthetic_samples = 1000;  // 3 ranks: 334 each with 2 padded samples, 20 full batches
  const auto ranks = TrainRanks(o, 3, false);
  for (const auto& r : ranks) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->steps, 2 * (334 / 16));
    EXPECT_EQ(r->params, ranks[0]->params);
  }
}

}  // namespace
}  // namespace psring::trainer
