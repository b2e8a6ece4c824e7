// Shard checkpoints: exact round trip, atomic replacement (no temporary left behind), and every kind of
// damage detected; a server resumes from its checkpoint and refuses one of another layout.
#include "ps/checkpoint.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ps/server.h"
#include "ps/service.h"
#include "tests/testing/temp_dir.h"

namespace psring::ps {
namespace {

std::string TempDir(const std::string& name) {
  const std::string dir = psring::testing::FreshTempPath(name);
  std::filesystem::create_directories(dir);
  return dir;
}

ShardCheckpoint Sample() {
  ShardCheckpoint c;
  c.shard = 1;
  c.num_shards = 2;
  c.total_params = 7;
  c.begin = 3;
  c.end = 7;
  c.version = 42;
  c.hyperparameters = {0.1f, 0.9f, 1e-3f};
  c.layout_buckets = {7};  // flat
  c.layout_settings = "--bucket_mb=0";
  c.clocks = {14, 13, 15};  // async: each push moved one clock and the version
  c.params = {1.5f, -2.0f, 3.25f, 1e-30f};
  c.momentum = {0.0f, 0.5f, -0.5f, 7.0f};
  return c;
}

TEST(CheckpointTest, RoundTripIsExact) {
  const std::string dir = TempDir("roundtrip");
  const std::string path = ShardCheckpointPath(dir, 1, 2);
  const ShardCheckpoint c = Sample();
  ASSERT_TRUE(WriteShardCheckpoint(path, c, c.params, c.momentum).ok());
  absl::StatusOr<ShardCheckpoint> read = ReadShardCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->version, 42u);
  EXPECT_EQ(read->begin, 3u);
  EXPECT_EQ(read->clocks, c.clocks);
  EXPECT_EQ(read->layout_buckets, c.layout_buckets);
  EXPECT_EQ(read->layout_settings, c.layout_settings);
  EXPECT_EQ(read->params, c.params);
  EXPECT_EQ(read->momentum, c.momentum);
  EXPECT_EQ(read->hyperparameters.weight_decay, 1e-3f);
  // Overwriting goes through a temporary file that is renamed away.
  ASSERT_TRUE(WriteShardCheckpoint(path, c, c.params, c.momentum).ok());
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files += entry.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(CheckpointTest, MissingTruncatedAndCorruptFiles) {
  const std::string dir = TempDir("damage");
  const std::string path = ShardCheckpointPath(dir, 1, 2);
  EXPECT_TRUE(absl::IsNotFound(ReadShardCheckpoint(path).status()));
  const ShardCheckpoint c = Sample();
  ASSERT_TRUE(WriteShardCheckpoint(path, c, c.params, c.momentum).ok());
  const auto size = std::filesystem::file_size(path);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [&](const std::string& content) { std::ofstream(path, std::ios::binary) << content; };
  write(bytes.substr(0, size - 3));
  EXPECT_TRUE(absl::IsDataLoss(ReadShardCheckpoint(path).status()));
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x40;
  write(flipped);
  EXPECT_TRUE(absl::IsDataLoss(ReadShardCheckpoint(path).status()));
  write("not a checkpoint at all");
  EXPECT_TRUE(absl::IsDataLoss(ReadShardCheckpoint(path).status()));
  // Sizes that do not match the range are refused before anything is written.
  EXPECT_FALSE(WriteShardCheckpoint(path, c, absl::MakeConstSpan(c.params).subspan(1), c.momentum).ok());
}

TEST(CheckpointTest, ServiceResumesAndChecksLayout) {
  const std::string dir = TempDir("resume");
  // The flat layout gives shard 1 of 2 of 7 elements the range [3, 7).
  const ShardCheckpoint c = Sample();
  ASSERT_TRUE(WriteShardCheckpoint(ShardCheckpointPath(dir, 1, 2), c, c.params, c.momentum).ok());
  ServiceOptions options;
  options.shard = 1;
  options.num_shards = 2;
  options.workers = 3;
  options.checkpoint_dir = dir;
  absl::StatusOr<std::unique_ptr<ParameterServerService>> service = ParameterServerService::Create(options);
  ASSERT_TRUE(service.ok()) << service.status();
  EXPECT_EQ((*service)->version(), 42u);
  EXPECT_EQ((*service)->CopyParameters(), c.params);
  // A checkpoint whose range does not match the layout is refused.
  ShardCheckpoint wrong = c;
  wrong.begin = 2;
  wrong.params.push_back(0);
  wrong.momentum.push_back(0);
  ASSERT_TRUE(WriteShardCheckpoint(ShardCheckpointPath(dir, 1, 2), wrong, wrong.params, wrong.momentum).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(ParameterServerService::Create(options).status()));
}

// Issue 24: a restarted server resumed (version 117 -> 234) without a word. It now says from which file and
// at which version; a fresh start says nothing of the kind.
TEST(CheckpointTest, ServerSaysItResumedWithVersionAndPath) {
  const std::string dir = TempDir("resume_message");
  ServerOptions options;
  options.bind_addr = "127.0.0.1";
  options.service.shard = 1;
  options.service.num_shards = 2;
  options.service.workers = 3;
  options.service.checkpoint_dir = dir;
  ::testing::internal::CaptureStderr();
  absl::StatusOr<std::unique_ptr<PsServer>> fresh = PsServer::Start(options);
  std::string printed = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(printed.find("resumed"), std::string::npos) << printed;
  fresh->reset();

  const ShardCheckpoint c = Sample();  // version 42
  const std::string path = ShardCheckpointPath(dir, 1, 2);
  ASSERT_TRUE(WriteShardCheckpoint(path, c, c.params, c.momentum).ok());
  ::testing::internal::CaptureStderr();
  absl::StatusOr<std::unique_ptr<PsServer>> resumed = PsServer::Start(options);
  printed = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_NE(printed.find(absl::StrCat("ps shard 1: resumed from ", path, " at version 42")), std::string::npos)
      << printed;
}

TEST(CheckpointTest, ServiceCreatesTheCheckpointFolder) {
  ServiceOptions options;
  options.checkpoint_dir = TempDir("create") + "/not/yet/there";
  absl::StatusOr<std::unique_ptr<ParameterServerService>> service = ParameterServerService::Create(options);
  ASSERT_TRUE(service.ok()) << service.status();
  EXPECT_TRUE(std::filesystem::is_directory(options.checkpoint_dir));
  // A folder that cannot be created fails at start, naming the flag.
  options.checkpoint_dir = "/proc/psring-cannot-create-this";
  absl::Status status = ParameterServerService::Create(options).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_NE(status.message().find("--checkpoint_dir"), absl::string_view::npos) << status;
}

// Issue 22: a non-finite state never replaces the last good checkpoint.
TEST(CheckpointTest, NonFiniteStateIsNotWrittenAndTheOldFileStays) {
  const std::string dir = TempDir("nonfinite");
  const std::string path = ShardCheckpointPath(dir, 1, 2);
  const ShardCheckpoint c = Sample();
  ASSERT_TRUE(WriteShardCheckpoint(path, c, c.params, c.momentum).ok());
  std::vector<float> bad = c.params;
  bad[2] = std::numeric_limits<float>::infinity();
  absl::Status refused = WriteShardCheckpoint(path, c, bad, c.momentum);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_NE(refused.message().find("parameter 5 is inf; the previous checkpoint is kept"), std::string::npos)
      << refused;
  refused = WriteShardCheckpoint(path, c, c.params, std::vector<float>(4, std::nanf("")));
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  absl::StatusOr<ShardCheckpoint> read = ReadShardCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->params, c.params);
}

// Issue 22: clocks and version are checked like every other field (a rank cannot have pushed more steps
// than the shard has versions, nor a negative number).
TEST(CheckpointTest, InconsistentClocksAndVersionAreRefused) {
  const std::string dir = TempDir("clocks");
  const std::string path = ShardCheckpointPath(dir, 1, 2);
  const auto refused = [&](const ShardCheckpoint& c, const std::string& fragment) {
    ASSERT_TRUE(WriteShardCheckpoint(path, c, c.params, c.momentum).ok());
    absl::StatusOr<ShardCheckpoint> read = ReadShardCheckpoint(path);
    ASSERT_TRUE(absl::IsDataLoss(read.status())) << read.status();
    EXPECT_NE(read.status().message().find(fragment), std::string::npos) << read.status();
  };
  ShardCheckpoint c = Sample();
  c.clocks = {14, -1, 15};
  refused(c, "the clock of rank 1 (-1) does not fit version 42");
  c.clocks = {14, 13, 16};  // 43 pushes in 42 versions
  refused(c, "the clock of rank 2 (16) does not fit version 42");
  c = Sample();
  c.version = (uint64_t{1} << 62) + 1;
  refused(c, "beyond any run");
}

}  // namespace
}  // namespace psring::ps
