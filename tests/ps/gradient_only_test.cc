// Gradient-only mode (trainer/gradient_only.h) through real gRPC servers on loopback, in the configurations
// only the parameter server has (the cases every exchange shares are in tests/exchange/conformance_test.cc):
// sync with N = 1, 2, 4 ranks and K = 1, 2, 3 shards, many small chunks, sizes not divisible by K; async
// with bounded staleness (one update per push); and the 4096x4096 MLP's size (~80 MB) in one round trip.
#include "trainer/gradient_only.h"

#include "gtest/gtest.h"
#include "ps/client.h"
#include "tests/ps/ps_cluster.h"

namespace psring::ps {
namespace {

using testing::ClientOptionsFor;
using testing::RunRanks;
using testing::StartCluster;
using trainer::GradientOnlyOptions;
using trainer::RunGradientOnly;

// layer_sizes non-empty: replay mode, those layers (floats; bytes must be their total) in buckets of bucket_mb.
void RunCase(int n, int k, Mode mode, int staleness, size_t bytes, size_t chunk_bytes, int steps,
             const std::vector<size_t>& layer_sizes = {}, double bucket_mb = 0) {
  SCOPED_TRACE(absl::StrCat("N=", n, " K=", k, " bytes=", bytes));
  ServiceOptions service;
  service.workers = n;
  service.mode = mode;
  service.staleness = staleness;
  service.step_timeout = absl::Seconds(20);
  service.chunk_bytes = chunk_bytes;
  absl::StatusOr<testing::LocalCluster> cluster = StartCluster(k, service);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::vector<::psring::proto::WorkerResult> results(n);
  std::vector<absl::Status> statuses = RunRanks(n, [&](int rank) -> absl::Status {
    PsClientOptions options = ClientOptionsFor(*cluster, rank, n);
    options.chunk_bytes = chunk_bytes;
    options.hyperparameters = {0.1f, 0.9f, 1e-2f};
    absl::StatusOr<std::unique_ptr<PsExchange>> exchange = PsExchange::Create(options);
    if (!exchange.ok()) return exchange.status();
    GradientOnlyOptions go;
    go.bytes = bytes;
    for (size_t l = 0; l < layer_sizes.size(); ++l) {
      go.layers.push_back({absl::StrCat("layer", l), layer_sizes[l], absl::Microseconds(100),
                           absl::Microseconds(200)});
    }
    go.bucket_mb = bucket_mb;
    go.warmup_steps = 1;
    go.steps = steps;
    absl::StatusOr<::psring::proto::WorkerResult> result = RunGradientOnly(go, exchange->get());
    if (!result.ok()) return result.status();
    results[rank] = *result;
    return absl::OkStatus();
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    EXPECT_EQ(results[r].wrong(), 0) << "rank " << r;
    EXPECT_EQ(results[r].steps(), steps);
    EXPECT_EQ(results[r].rank(), r);
    EXPECT_EQ(results[r].world_size(), n);
    EXPECT_EQ(results[r].bytes(), (bytes / 4) * 4);
    EXPECT_EQ(results[r].exchange(), mode == Mode::kSync || staleness == 0 ? "ps-sync" : "ps-async");
    // Each measured step pushes and pulls the whole vector once.
    EXPECT_EQ(results[r].bytes_sent(), static_cast<double>(steps) * (bytes / 4) * 4);
    EXPECT_EQ(results[r].bytes_received(), static_cast<double>(steps) * (bytes / 4) * 4);
  }
  uint64_t expected_version =
      static_cast<uint64_t>(steps + 1) * (mode == Mode::kAsync && staleness > 0 ? n : 1);
  for (auto& server : cluster->servers) EXPECT_EQ(server->service()->version(), expected_version);
}

TEST(GradientOnlyTest, SyncAllShapes) {
  for (int n : {1, 2, 4}) {
    for (int k : {1, 2, 3}) RunCase(n, k, Mode::kSync, 0, 4 * 1001, 60, 3);
  }
}

TEST(GradientOnlyTest, AsyncStalenessZeroIsSync) { RunCase(3, 2, Mode::kAsync, 0, 4 * 777, 100, 4); }

TEST(GradientOnlyTest, AsyncBoundedStaleness) {
  RunCase(3, 2, Mode::kAsync, 1, 4 * 777, 100, 5);
  RunCase(4, 1, Mode::kAsync, 3, 4 * 513, 1 << 20, 6);
}

// Replay with buckets (several per step, one layer bigger than the cap) under bounded staleness: every
// element still checked against the closed form.
TEST(GradientOnlyTest, AsyncReplayWithBuckets) {
  const std::vector<size_t> sizes = {5, 300, 1, 1000, 7};
  RunCase(3, 2, Mode::kAsync, 1, 4 * 1313, 100, 4, sizes, 800.0 * sizeof(float) / trainer::kBytesPerMb);
}

TEST(GradientOnlyTest, TinyVectorOneElementPerShard) { RunCase(2, 3, Mode::kSync, 0, 12, 4, 2); }

TEST(GradientOnlyTest, LargeModelRoundTrip) {
  // The 784-4096-4096-10 MLP: weights and biases of three layers.
  const size_t params = 784 * 4096 + 4096 + 4096 * 4096 + 4096 + 4096 * 10 + 10;
  RunCase(1, 2, Mode::kSync, 0, params * 4, 1 << 20, 1);
}

}  // namespace
}  // namespace psring::ps
