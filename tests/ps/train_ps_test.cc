// trainer::Train() over the parameter server, ranks as threads, servers in-process on 127.0.0.1:
//  - the DDP property: synchronous PS with N = 2, 4 ranks and K = 1, 2 shards equals one process with batch
//    N*b after 20 steps (1e-5 relative), and every rank ends with the same parameters;
//  - asynchronous mode with bounded staleness converges on the real Fashion-MNIST (> 80% after 2 epochs);
//  - a server killed mid-training and restarted from its checkpoint: training resumes and finishes.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "ps/client.h"
#include "tests/ps/ps_cluster.h"
#include "trainer/train.h"

namespace psring::ps {
namespace {

trainer::TrainOptions SmallSynthetic(int batch_size) {
  trainer::TrainOptions o;
  o.hidden = {32, 16};
  o.batch_size = batch_size;
  o.epochs = 1;
  o.max_steps = 20;
  o.device = "cpu";
  o.dataset = "synthetic";
  o.synthetic_samples = 2048;
  o.log_every = 0;
  o.evaluate = false;
  o.seed = 7;
  return o;
}

// Runs Train() on `n` threads, each with its own PsExchange to `cluster`.
std::vector<absl::StatusOr<trainer::TrainResult>> TrainOnPs(const testing::LocalCluster& cluster, int n,
                                                            const trainer::TrainOptions& options) {
  std::vector<absl::StatusOr<trainer::TrainResult>> results(n, absl::UnknownError("not run"));
  testing::RunRanks(n, [&](int rank) -> absl::Status {
    PsClientOptions client = testing::ClientOptionsFor(cluster, rank, n);
    client.hyperparameters = {options.lr, options.momentum, options.weight_decay};
    client.chunk_bytes = 4096;  // several chunks per shard even for the small model
    absl::StatusOr<std::unique_ptr<PsExchange>> exchange = PsExchange::Create(client);
    if (!exchange.ok()) return exchange.status();
    results[rank] = trainer::Train(options, exchange->get());
    return results[rank].status();
  });
  return results;
}

double MaxRelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(b[i])));
  }
  return max_diff / max_abs;
}

TEST(TrainPsTest, SyncEqualsOneProcessWithNTimesTheBatch) {
  constexpr int kBatch = 16;
  for (int n : {2, 4}) {
    trainer::LocalExchange local;
    absl::StatusOr<trainer::TrainResult> reference = trainer::Train(SmallSynthetic(n * kBatch), &local);
    ASSERT_TRUE(reference.ok()) << reference.status();
    ASSERT_EQ(reference->steps, 20);
    for (int k : {1, 2}) {
      SCOPED_TRACE(absl::StrCat("N=", n, " K=", k));
      ServiceOptions service;
      service.workers = n;
      service.step_timeout = absl::Seconds(30);
      absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(k, service);
      ASSERT_TRUE(cluster.ok()) << cluster.status();
      std::vector<absl::StatusOr<trainer::TrainResult>> results =
          TrainOnPs(*cluster, n, SmallSynthetic(kBatch));
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
        EXPECT_EQ(results[r]->steps, 20);
        EXPECT_EQ(results[r]->params, results[0]->params) << "rank " << r << " differs from rank 0";
      }
      ASSERT_EQ(results[0]->params.size(), reference->params.size());
      EXPECT_LE(MaxRelativeDifference(results[0]->params, reference->params), 1e-5);
      // The parameters really moved (the comparison is not between two initialisations).
      trainer::TrainOptions none = SmallSynthetic(kBatch);
      none.max_steps = 0;
      absl::StatusOr<trainer::TrainResult> initial = trainer::Train(none, &local);
      ASSERT_TRUE(initial.ok());
      EXPECT_GT(MaxRelativeDifference(results[0]->params, initial->params), 1e-3);
      for (auto& server : cluster->servers) EXPECT_EQ(server->service()->version(), 20u);
    }
  }
}

TEST(TrainPsTest, AsyncConvergesOnFashionMnist) {
  if (!std::ifstream("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz").good()) {
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  }
  constexpr int kWorkers = 4;
  ServiceOptions service;
  service.workers = kWorkers;
  service.mode = Mode::kAsync;
  service.staleness = 2;
  service.step_timeout = absl::Seconds(30);
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(2, service);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  trainer::TrainOptions o;  // the default MLP 256,256, lr 0.05, momentum 0.9
  o.hidden = {128};         // keeps the test quick on two cores
  o.batch_size = 32;        // per rank; one round of 4 pushes ~ a batch of 128
  o.epochs = 2;
  o.device = "cpu";
  o.log_every = 0;
  std::vector<absl::StatusOr<trainer::TrainResult>> results = TrainOnPs(*cluster, kWorkers, o);
  for (int r = 0; r < kWorkers; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
    EXPECT_EQ(results[r]->steps, 2 * (60000 / kWorkers / 32));
  }
  EXPECT_GT(results[0]->test_accuracy, 0.80);
  // Every push was applied on arrival: the version counts all ranks' steps.
  EXPECT_EQ(cluster->servers[0]->service()->version(), static_cast<uint64_t>(kWorkers * results[0]->steps));
}

TEST(TrainPsTest, ServerKilledAndRestartedFromCheckpoint) {
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/ckpt";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  constexpr int kWorkers = 2;
  ServiceOptions service;
  service.workers = kWorkers;
  service.step_timeout = absl::Seconds(20);
  service.checkpoint_dir = dir;
  service.checkpoint_every = 4;
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(2, service);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  trainer::TrainOptions o = SmallSynthetic(16);
  o.max_steps = 60;

  uint64_t version_at_crash = 0, version_at_restart = 0;
  absl::Status restart = absl::UnknownError("no crash happened");
  std::thread killer([&] {
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (cluster->servers[1]->service()->version() < 10 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    // A crash: no final checkpoint, in-flight calls cut at once (some ranks may get the last reply, some not).
    restart = cluster->servers[1]->Stop(/*write_checkpoint=*/false, /*grace=*/absl::ZeroDuration());
    version_at_crash = cluster->servers[1]->service()->version();     // final once stopped
    absl::SleepFor(absl::Milliseconds(300));                          // the workers retry meanwhile
    if (restart.ok()) restart = testing::RestartShard(&*cluster, 1);
    if (restart.ok()) version_at_restart = cluster->servers[1]->service()->version();
  });
  std::vector<absl::StatusOr<trainer::TrainResult>> results = TrainOnPs(*cluster, kWorkers, o);
  killer.join();
  ASSERT_TRUE(restart.ok()) << restart;
  for (int r = 0; r < kWorkers; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
    EXPECT_EQ(results[r]->steps, 60);
    EXPECT_EQ(results[r]->params, results[0]->params);
  }
  EXPECT_GE(version_at_crash, 10u);
  // Resumed from the last checkpoint (a multiple of 4, at most the version at the crash), not from scratch.
  EXPECT_GT(version_at_restart, 0u);
  EXPECT_EQ(version_at_restart % 4, 0u);
  EXPECT_LE(version_at_restart, version_at_crash);
  // Shard 0 applied all 60 steps; shard 1 lost the steps between its checkpoint and the crash, and applied
  // one step per remaining Exchange after the restart.
  EXPECT_EQ(cluster->servers[0]->service()->version(), 60u);
  const uint64_t final_version = cluster->servers[1]->service()->version();
  EXPECT_GT(final_version, version_at_restart);
  EXPECT_LE(final_version, 60u);
  EXPECT_GE(final_version, 60u - (version_at_crash - version_at_restart) - 1)
      << "crash at " << version_at_crash << ", restart at " << version_at_restart;
}

}  // namespace
}  // namespace psring::ps
