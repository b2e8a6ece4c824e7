// The element layout is part of the contract between workers, servers and checkpoints (ps/shard_layout.h):
// a worker whose bucket plan lays the elements out differently from what a shard holds (from its first
// registration or its checkpoint) is refused with an error naming both settings, instead of reading the
// shard's values as other parameters; a bucketed checkpoint resumes bucketed; a checkpoint of the format
// before layouts were recorded is read as the flat layout. Real servers on 127.0.0.1, ranks as threads.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "gtest/gtest.h"
#include "ps/checkpoint.h"
#include "ps/client.h"
#include "ps/shard_core.h"
#include "tests/ps/ps_cluster.h"
#include "tests/testing/temp_dir.h"
#include "trainer/exchange.h"

namespace psring::ps {
namespace {

constexpr size_t kCount = 1001;
// Four layers; a 250-float cap makes several buckets whatever the exact closing rule.
const std::vector<size_t> kLayers = {300, 1, 500, 200};
const trainer::SgdOptions kHyper = {0.5f, 0.9f, 0.0f};

trainer::BucketPlan Bucketed() {
  absl::StatusOr<trainer::BucketPlan> plan =
      trainer::BucketPlan::Create(kLayers, 250.0 * sizeof(float) / trainer::kBytesPerMb);
  EXPECT_TRUE(plan.ok()) << plan.status();
  EXPECT_GT(plan->buckets().size(), 1u);
  return *plan;
}

// How a shard names the layout of `plan` chosen by `settings`.
std::string LayoutText(const trainer::BucketPlan& plan, const std::string& settings) {
  const size_t buckets = plan.buckets().size();
  return absl::StrCat(buckets == 1 ? "flat" : absl::StrCat(buckets, " buckets"), " (", settings, ")");
}

std::string BucketedText() { return LayoutText(Bucketed(), "--bucket_mb=25"); }

std::vector<float> Values(float scale) {
  std::vector<float> v(kCount);
  for (size_t i = 0; i < kCount; ++i) v[i] = scale * (static_cast<float>(i % 101) - 50.0f);
  return v;
}

// One client of `cluster` as rank `rank` of `world`, its layout from `plan`.
std::unique_ptr<PsExchange> Client(const testing::LocalCluster& cluster, int rank, int world,
                                   const trainer::BucketPlan& plan, const std::string& settings) {
  PsClientOptions options = testing::ClientOptionsFor(cluster, rank, world);
  options.hyperparameters = kHyper;
  options.chunk_bytes = 256;
  options.reconnect_timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<PsExchange>> exchange = PsExchange::Create(options);
  EXPECT_TRUE(exchange.ok()) << exchange.status();
  if (!exchange.ok()) return nullptr;
  EXPECT_TRUE((*exchange)->SetBucketPlan(plan, settings).ok());
  return std::move(*exchange);
}

absl::Status Register(PsExchange* exchange, std::vector<float>* params) {
  return exchange->SyncInitialParameters({params->data(), params->size()});
}

ServiceOptions Service(int workers, const std::string& checkpoint_dir = "") {
  ServiceOptions service;
  service.workers = workers;
  service.step_timeout = absl::Seconds(20);
  service.chunk_bytes = 256;
  service.checkpoint_dir = checkpoint_dir;
  return service;
}

void ExpectRefusalNamingBoth(const absl::Status& status, const std::string& held, const std::string& worker) {
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), absl::StrCat("holds element layout ", held))) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), absl::StrCat("this worker uses ", worker))) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "same --bucket_mb/--first_bucket_mb")) << status;
}

TEST(LayoutTest, WorkersMixingFlatAndBucketedAreRefusedNamingBoth) {
  for (int shards : {1, 2, 3}) {
    SCOPED_TRACE(absl::StrCat(shards, " shard(s)"));
    for (bool flat_first : {true, false}) {
      absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(shards, Service(2));
      ASSERT_TRUE(cluster.ok()) << cluster.status();
      const trainer::BucketPlan flat = trainer::BucketPlan::Flat(kCount);
      std::unique_ptr<PsExchange> first =
          flat_first ? Client(*cluster, 0, 2, flat, "--bucket_mb=0") : Client(*cluster, 0, 2, Bucketed(), "--bucket_mb=25");
      std::unique_ptr<PsExchange> second =
          flat_first ? Client(*cluster, 1, 2, Bucketed(), "--bucket_mb=25") : Client(*cluster, 1, 2, flat, "--bucket_mb=0");
      ASSERT_TRUE(first != nullptr && second != nullptr);
      std::vector<float> params = Values(0.01f);
      ASSERT_TRUE(Register(first.get(), &params).ok());
      const absl::Status refused = Register(second.get(), &params);
      if (flat_first) {
        ExpectRefusalNamingBoth(refused, "flat (--bucket_mb=0)", BucketedText());
      } else {
        ExpectRefusalNamingBoth(refused, BucketedText(), "flat (--bucket_mb=0)");
      }
      // With one shard the bucketed layout holds the buckets in launch order, still another order.
      EXPECT_TRUE(absl::StrContains(refused.message(), "shard 0")) << refused;
    }
  }
}

TEST(LayoutTest, AnotherBucketPlanIsRefusedAndTheSameOneAccepted) {
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(2, Service(3));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<trainer::BucketPlan> other =
      trainer::BucketPlan::Create(kLayers, 1000.0 * sizeof(float) / trainer::kBytesPerMb);
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_NE(other->buckets(), Bucketed().buckets());
  std::vector<float> params = Values(0.01f);
  ASSERT_TRUE(Register(Client(*cluster, 0, 3, Bucketed(), "--bucket_mb=25").get(), &params).ok());
  EXPECT_TRUE(Register(Client(*cluster, 1, 3, Bucketed(), "--bucket_mb=25").get(), &params).ok());
  ExpectRefusalNamingBoth(Register(Client(*cluster, 2, 3, *other, "--bucket_mb=100").get(), &params),
                          BucketedText(), LayoutText(*other, "--bucket_mb=100"));
}

// BeginStep must be given the plan the layout was made from.
TEST(LayoutTest, BeginStepWithAnotherPlanThanTheRegisteredOneFails) {
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(2, Service(1));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::unique_ptr<PsExchange> exchange = Client(*cluster, 0, 1, trainer::BucketPlan::Flat(kCount), "--bucket_mb=0");
  std::vector<float> params = Values(0.01f), grads = Values(0.001f);
  ASSERT_TRUE(Register(exchange.get(), &params).ok());
  const absl::Status status =
      exchange->BeginStep(0, {grads.data(), kCount}, {params.data(), kCount}, Bucketed());
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "SetBucketPlan")) << status;
  EXPECT_TRUE(absl::IsFailedPrecondition(exchange->SetBucketPlan(Bucketed(), "late")));
}

// One synchronous step of a single worker, then the servers save their checkpoints and stop.
std::vector<float> TrainOneStepAndCheckpoint(testing::LocalCluster* cluster, const trainer::BucketPlan& plan,
                                             const std::string& settings) {
  std::unique_ptr<PsExchange> exchange = Client(*cluster, 0, 1, plan, settings);
  std::vector<float> params = Values(0.01f), grads = Values(0.001f);
  EXPECT_TRUE(Register(exchange.get(), &params).ok());
  EXPECT_TRUE(exchange->Exchange(0, {grads.data(), kCount}, {params.data(), kCount}).ok());
  for (auto& server : cluster->servers) EXPECT_TRUE(server->Stop(/*write_checkpoint=*/true).ok());
  return params;
}

TEST(LayoutTest, FlatCheckpointResumedBucketedIsRefusedAndResumedFlatIsExact) {
  const std::string dir = psring::testing::FreshTempPath("layout-flat-checkpoint");
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(2, Service(1, dir));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const trainer::BucketPlan flat = trainer::BucketPlan::Flat(kCount);
  const std::vector<float> trained = TrainOneStepAndCheckpoint(&*cluster, flat, "--bucket_mb=0");
  ASSERT_FALSE(HasFailure());
  for (int shard = 0; shard < 2; ++shard) ASSERT_TRUE(testing::RestartShard(&*cluster, shard).ok());

  std::vector<float> params = Values(0.5f);
  const absl::Status refused = Register(Client(*cluster, 0, 1, Bucketed(), "--bucket_mb=25").get(), &params);
  ExpectRefusalNamingBoth(refused, "flat (--bucket_mb=0)", BucketedText());
  EXPECT_TRUE(absl::StrContains(refused.message(), "resumed from checkpoint")) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "delete the checkpoint")) << refused;

  ASSERT_TRUE(Register(Client(*cluster, 0, 1, flat, "--bucket_mb=0").get(), &params).ok());
  EXPECT_EQ(params, trained);
}

// Servers, checkpoints and resume follow the bucketed layout: the resumed parameters, in trainer order, are
// exactly those trained; a flat worker is refused.
TEST(LayoutTest, BucketedCheckpointResumesBucketed) {
  const std::string dir = psring::testing::FreshTempPath("layout-bucketed-checkpoint");
  absl::StatusOr<testing::LocalCluster> cluster = testing::StartCluster(3, Service(1, dir));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::vector<float> trained = TrainOneStepAndCheckpoint(&*cluster, Bucketed(), "--bucket_mb=25");
  ASSERT_FALSE(HasFailure());
  for (int shard = 0; shard < 3; ++shard) ASSERT_TRUE(testing::RestartShard(&*cluster, shard).ok());

  std::vector<float> params = Values(0.5f);
  ExpectRefusalNamingBoth(
      Register(Client(*cluster, 0, 1, trainer::BucketPlan::Flat(kCount), "--bucket_mb=0").get(), &params),
      BucketedText(), "flat (--bucket_mb=0)");
  std::unique_ptr<PsExchange> resumed = Client(*cluster, 0, 1, Bucketed(), "--bucket_mb=25");
  ASSERT_TRUE(Register(resumed.get(), &params).ok());
  EXPECT_EQ(params, trained);
  absl::StatusOr<proto::StatsReply> stats = resumed->Stats(1);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->layout(), BucketedText());
  EXPECT_EQ(stats->version(), 1u);
}

// A "PSRCKPT1" file, the format before checkpoints recorded the layout: every field of today's but the
// layout, in the same order.
std::string LegacyCheckpoint(const ShardCheckpoint& c) {
  std::string bytes = "PSRCKPT1";
  const auto put = [&bytes](const auto& value) {
    bytes.append(reinterpret_cast<const char*>(&value), sizeof(value));
  };
  put(c.shard);
  put(c.num_shards);
  put(c.total_params);
  put(c.begin);
  put(c.end);
  put(c.version);
  put(c.hyperparameters.lr);
  put(c.hyperparameters.momentum);
  put(c.hyperparameters.weight_decay);
  put(static_cast<uint32_t>(c.clocks.size()));
  for (int64_t clock : c.clocks) put(clock);
  for (float v : c.params) put(v);
  for (float v : c.momentum) put(v);
  put(Crc32(bytes));
  return bytes;
}

TEST(LayoutTest, CheckpointWithoutLayoutIsReadAsFlat) {
  const std::string dir = psring::testing::FreshTempPath("layout-legacy-checkpoint");
  std::filesystem::create_directories(dir);
  ShardCheckpoint c;
  c.shard = 1;
  c.num_shards = 2;
  c.total_params = 7;
  c.begin = 3;  // shard 1 of 2 of the flat layout: [3, 7)
  c.end = 7;
  c.version = 5;
  c.hyperparameters = kHyper;
  c.clocks = {5};
  c.params = {1.5f, -2.0f, 3.25f, 0.125f};
  c.momentum = {0.0f, 0.5f, -0.5f, 7.0f};
  const std::string path = ShardCheckpointPath(dir, 1, 2);
  std::ofstream(path, std::ios::binary) << LegacyCheckpoint(c);

  absl::StatusOr<ShardCheckpoint> read = ReadShardCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->layout_buckets.empty());
  EXPECT_EQ(read->params, c.params);
  EXPECT_EQ(read->momentum, c.momentum);

  ShardOptions options;
  options.shard = 1;
  options.num_shards = 2;
  options.checkpoint_dir = dir;
  absl::StatusOr<std::unique_ptr<ShardCore>> core = ShardCore::Create(options);
  ASSERT_TRUE(core.ok()) << core.status();
  EXPECT_EQ((*core)->CopyParameters(), c.params);
  Registration flat{0, 1, 7, kHyper};
  absl::StatusOr<ShardRange> range = (*core)->BeginRegistration(flat);
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(*range, (ShardRange{3, 7}));
  Registration bucketed = flat;
  bucketed.layout_buckets = {2, 5};
  bucketed.layout_settings = "--bucket_mb=25";
  const absl::Status refused = (*core)->BeginRegistration(bucketed).status();
  ExpectRefusalNamingBoth(refused, "flat (a checkpoint written before checkpoints recorded the layout)",
                          "2 buckets (--bucket_mb=25)");
  // Its next checkpoint records the flat layout.
  ASSERT_TRUE((*core)->WriteCheckpoint().ok());
  read = ReadShardCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->layout_buckets, std::vector<uint64_t>{7});
}

// A checkpoint whose layout list is valid but does not give the shard its recorded range is refused.
TEST(LayoutTest, CheckpointWhoseLayoutDisagreesWithItsRangeIsRefused) {
  const std::string dir = psring::testing::FreshTempPath("layout-inconsistent-checkpoint");
  ShardCheckpoint c;
  c.shard = 0;
  c.num_shards = 2;
  c.total_params = 10;
  c.begin = 0;
  c.end = 5;                  // the flat layout's range of shard 0 ...
  c.layout_buckets = {3, 7};  // ... but these buckets give it 1 + 3 elements
  c.hyperparameters = kHyper;
  c.params.assign(5, 1.0f);
  c.momentum.assign(5, 0.0f);
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteShardCheckpoint(ShardCheckpointPath(dir, 0, 2), c, c.params, c.momentum).ok());
  ShardOptions options;
  options.num_shards = 2;
  options.checkpoint_dir = dir;
  EXPECT_TRUE(absl::IsFailedPrecondition(ShardCore::Create(options).status()));
  c.layout_buckets = {3, 8};  // does not add up to the model
  ASSERT_TRUE(WriteShardCheckpoint(ShardCheckpointPath(dir, 0, 2), c, c.params, c.momentum).ok());
  EXPECT_TRUE(absl::IsDataLoss(ShardCore::Create(options).status()));
}

}  // namespace
}  // namespace psring::ps
