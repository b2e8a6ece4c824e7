// .npz archives and checkpoints: round trip, NumPy-compatible bytes, corruption detection.
#include "trainer/checkpoint.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/npz.h"

namespace psring::trainer {
namespace {

using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

CheckpointState SampleState() {
  CheckpointState s;
  for (int i = 0; i < 1000; ++i) {
    s.params.push_back(0.001f * i - 0.3f);
    s.momentum_buffer.push_back(-0.5f * i);
  }
  s.step = 1234;
  s.epoch = 2;
  s.hidden = {7, 5};
  s.batch_size = 64;
  s.world_size = 4;
  s.seed = 0xfedcba9876543210ull;
  s.dataset = "fashion-mnist";
  s.lr = 0.05f;
  s.momentum = 0.9f;
  s.weight_decay = 5e-4f;
  return s;
}

TEST(NpyTest, HeaderIsNumPyFormatVersion1) {
  const std::string npy = EncodeNpy(NpyArray{"<f4", {3}, std::string(12, '\0')});
  EXPECT_EQ(npy.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<uint8_t>(npy[8]) | (static_cast<uint8_t>(npy[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  const std::string header = npy.substr(10, header_len);
  EXPECT_EQ(header.substr(0, 60), "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }   ");
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(npy.size(), 10 + header_len + 12);
  // Scalars have shape ().
  EXPECT_THAT(EncodeNpy(NpyArray{"<i8", {}, std::string(8, '\0')}), HasSubstr("'shape': ()"));
}

TEST(CheckpointTest, RoundTripKeepsEveryFieldBitForBit) {
  const std::string dir = TempDir("ckpt_round_trip");
  const CheckpointState s = SampleState();
  ASSERT_TRUE(SaveCheckpoint(LatestCheckpointPath(dir), s).ok());
  absl::StatusOr<CheckpointState> back = LoadCheckpoint(LatestCheckpointPath(dir));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->params, s.params);
  EXPECT_EQ(back->momentum_buffer, s.momentum_buffer);
  EXPECT_EQ(back->step, s.step);
  EXPECT_EQ(back->epoch, s.epoch);
  EXPECT_EQ(back->hidden, s.hidden);
  EXPECT_EQ(back->batch_size, s.batch_size);
  EXPECT_EQ(back->world_size, s.world_size);
  EXPECT_EQ(back->seed, s.seed);
  EXPECT_EQ(back->dataset, s.dataset);
  EXPECT_EQ(back->lr, s.lr);
  EXPECT_EQ(back->momentum, s.momentum);
  EXPECT_EQ(back->weight_decay, s.weight_decay);
  // Written through a temporary file that is gone afterwards.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "latest.npz");
  }
  EXPECT_EQ(files, 1);
}

TEST(CheckpointTest, OverwriteReplacesWholeFile) {
  const std::string path = LatestCheckpointPath(TempDir("ckpt_overwrite"));
  CheckpointState s = SampleState();
  ASSERT_TRUE(SaveCheckpoint(path, s).ok());
  s.params.resize(10);
  s.momentum_buffer.resize(10);
  s.step = 7;
  ASSERT_TRUE(SaveCheckpoint(path, s).ok());
  absl::StatusOr<CheckpointState> back = LoadCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->params.size(), 10u);
  EXPECT_EQ(back->step, 7);
}

TEST(CheckpointTest, ArchiveIsAZipOfNpyFiles) {
  NpzWriter w;
  w.AddInt64Scalar("a", 5);
  absl::StatusOr<std::string> bytes = w.Serialize();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->substr(0, 4), std::string("PK\x03\x04", 4));
  EXPECT_THAT(*bytes, HasSubstr("a.npy"));
  EXPECT_EQ(bytes->substr(bytes->size() - 22, 4), std::string("PK\x05\x06", 4));
}

TEST(CheckpointTest, CorruptionIsDetected) {
  const std::string path = LatestCheckpointPath(TempDir("ckpt_corrupt"));
  ASSERT_TRUE(SaveCheckpoint(path, SampleState()).ok());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // A flipped bit inside the parameters fails the CRC.
  std::string flipped = bytes;
  flipped[200] ^= 0x10;
  absl::StatusOr<NpzReader> r = NpzReader::Parse(flipped, "flipped.npz");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("CRC-32"));
  // A truncated file has no end record.
  r = NpzReader::Parse(bytes.substr(0, bytes.size() / 2), "half.npz");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("half.npz"));
  // Missing file.
  EXPECT_EQ(LoadCheckpoint(TempDir("nowhere/latest.npz")).status().code(), absl::StatusCode::kNotFound);
  // Missing array / wrong dtype.
  NpzWriter w;
  w.AddFloat32Scalar("step", 1.0f);
  absl::StatusOr<std::string> other = w.Serialize();
  ASSERT_TRUE(other.ok());
  absl::StatusOr<NpzReader> only_step = NpzReader::Parse(*other, "other.npz");
  ASSERT_TRUE(only_step.ok());
  EXPECT_EQ(only_step->Int64Scalar("step").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(only_step->Float32("params").status().code(), absl::StatusCode::kNotFound);
}

TEST(CheckpointTest, RejectsMismatchedBuffers) {
  CheckpointState s = SampleState();
  s.momentum_buffer.pop_back();
  EXPECT_EQ(SaveCheckpoint(LatestCheckpointPath(TempDir("ckpt_bad")), s).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psring::trainer
