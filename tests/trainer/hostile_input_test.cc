// Hostile sizes and values (issue 13): limits checked before allocation, non-finite values refused, and
// damaged checkpoints (flipped bytes, truncation, NaN with a valid CRC, absurd claimed sizes) reported as
// errors, never a crash or a silent resume.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint.h"
#include "trainer/limits.h"
#include "trainer/npz.h"

namespace psring::trainer {
namespace {

using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

CheckpointState State() {
  CheckpointState s;
  s.params = {0.5f, -0.25f, 1.0f};
  s.momentum_buffer = {0.0f, 0.1f, -0.1f};
  s.step = 10;
  s.hidden = {3};
  s.batch_size = 2;
  s.world_size = 1;
  s.dataset = "synthetic";
  s.lr = 0.05f;
  s.momentum = 0.9f;
  return s;
}

TEST(LimitsTest, HyperparametersMustBeFiniteAndInRange) {
  EXPECT_TRUE(ValidateSgdOptions({0.05f, 0.9f, 5e-4f}).ok());
  for (const SgdOptions& bad : {SgdOptions{INFINITY, 0.9f, 0}, SgdOptions{1e30f, 0.9f, 0}, SgdOptions{0, 0.9f, 0},
                                SgdOptions{NAN, 0.9f, 0}, SgdOptions{0.1f, 1.0f, 0}, SgdOptions{0.1f, NAN, 0},
                                SgdOptions{0.1f, 0.9f, -1e-3f}, SgdOptions{0.1f, 0.9f, INFINITY}}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ValidateSgdOptions(bad))) << bad.lr << " " << bad.momentum;
  }
  EXPECT_THAT(ValidateSgdOptions({INFINITY, 0.9f, 0}).message(), HasSubstr("--lr=inf"));
}

TEST(LimitsTest, TimeoutsMustBeFinitePositiveSeconds) {
  EXPECT_EQ(*TimeoutFromSeconds("timeout", 2.5), absl::Milliseconds(2500));
  for (double bad : std::vector<double>{NAN, INFINITY, -INFINITY, 0.0, -1.0, 1e300}) {
    absl::StatusOr<absl::Duration> d = TimeoutFromSeconds("step_timeout", bad);
    EXPECT_TRUE(absl::IsInvalidArgument(d.status())) << bad;
  }
  EXPECT_THAT(TimeoutFromSeconds("timeout", NAN).status().message(), HasSubstr("--timeout=nan"));
}

TEST(LimitsTest, HugeModelsAndBatchesAreRefusedBeforeAllocation) {
  EXPECT_TRUE(CheckModelSize("--model_bytes=4000", 1000, 3).ok());
  EXPECT_FALSE(CheckModelSize("--model_bytes=1000000000000", 250000000000ull, 3).ok());
  EXPECT_TRUE(CheckMlpSize(784, {256, 256}, 10).ok());
  EXPECT_FALSE(CheckMlpSize(784, {2000000000, 2000000000}, 10).ok());
  EXPECT_TRUE(CheckBatchFits(60000, 4, 64).ok());
  EXPECT_TRUE(CheckBatchFits(7, 2, 4).ok());  // padded to 4 per rank
  EXPECT_THAT(CheckBatchFits(60000, 1, 10000000).message(), HasSubstr("fewer than one batch"));
  EXPECT_FALSE(CheckBatchFits(60000, 1, 100000000).ok());
  EXPECT_EQ(FirstNonFinite(nullptr, 0), 0u);
  const float values[] = {1, 2, NAN, INFINITY};
  EXPECT_EQ(FirstNonFinite(values, 4), 2u);
  EXPECT_EQ(FirstNonFinite(values, 2), 2u);
}

// FirstNonFinite scans in blocks (issue 23): the first bad element is found at every position around the
// block boundaries, for each kind of non-finite value, and the largest finite values pass.
TEST(LimitsTest, FirstNonFiniteFindsTheFirstBadElementAcrossBlocks) {
  std::vector<float> v(3000, std::numeric_limits<float>::max());
  v[7] = -std::numeric_limits<float>::max();
  v[8] = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(FirstNonFinite(v.data(), v.size()), v.size());
  for (size_t bad : {size_t{0}, size_t{1023}, size_t{1024}, size_t{2047}, size_t{2999}}) {
    for (float value : {NAN, INFINITY, -INFINITY}) {
      std::vector<float> w = v;
      w[bad] = value;
      if (bad + 1 < w.size()) w[w.size() - 1] = NAN;  // a later one must not win
      EXPECT_EQ(FirstNonFinite(w.data(), w.size()), bad) << "value " << value << " at " << bad;
      EXPECT_EQ(FirstNonFinite(w.data(), bad), bad) << "the range ends before it";
    }
  }
}

// A wide model with a huge batch passes the model-size checks but its batch buffers do not fit (issue 13
// follow-up: `train --batch_size=60000 --hidden=1000000` ended in std::bad_alloc, SIGABRT).
TEST(LimitsTest, BatchBuffersThatDoNotFitAreRefusedBeforeAllocation) {
  // 784-256-256-10: 269,322 parameters (x3) and per sample 784 inputs, 522 outputs and 2 x 256 deltas.
  EXPECT_EQ(TrainingMemoryBytes(784, {256, 256}, 10, 128), 4.0 * (3 * 269322 + 128 * (784 + 522 + 512)));
  EXPECT_TRUE(CheckTrainingMemory(784, {256, 256}, 10, 128).ok());
  EXPECT_TRUE(CheckMlpSize(784, {1000000}, 10).ok());
  absl::Status huge = CheckTrainingMemory(784, {1000000}, 10, 1 << 20);  // 4 TiB of activations
  EXPECT_TRUE(absl::IsResourceExhausted(huge)) << huge;
  EXPECT_THAT(huge.message(), HasSubstr("--batch_size=1048576 with --hidden=1000000"));
}

TEST(LimitsTest, DivergedLossAndResumeBeyondTheEndAreErrors) {
  EXPECT_TRUE(CheckLoss(12.5, 3).ok());
  EXPECT_THAT(CheckLoss(NAN, 41).message(), HasSubstr("at step 41"));
  EXPECT_FALSE(CheckLoss(INFINITY, 0).ok());
  EXPECT_TRUE(CheckResumeStep(100, 100).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(CheckResumeStep(int64_t{1} << 62, 938)));
}

TEST(HostileCheckpointTest, NonFiniteValuesWithAValidCrcAreRefused) {
  for (const bool in_momentum : {false, true}) {
    for (const float bad : {NAN, INFINITY, -INFINITY}) {
      const std::string path = LatestCheckpointPath(TempDir("ckpt_nonfinite"));
      // SaveCheckpoint refuses non-finite values, so the file is rewritten by hand: valid, CRC and all.
      ASSERT_TRUE(SaveCheckpoint(path, State()).ok());
      absl::StatusOr<NpzReader> saved = NpzReader::Open(path);
      ASSERT_TRUE(saved.ok()) << saved.status();
      NpzWriter w;
      for (const char* name : {"params", "momentum_buffer", "step", "epoch", "hidden", "batch_size", "world_size",
                               "seed", "dataset", "lr", "momentum", "weight_decay"}) {
        absl::StatusOr<NpyArray> array = saved->Get(name);
        ASSERT_TRUE(array.ok()) << array.status();
        if (std::string(name) == (in_momentum ? "momentum_buffer" : "params")) {
          std::memcpy(array->data.data() + sizeof(float), &bad, sizeof(float));
        }
        w.Add(name, *array);
      }
      ASSERT_TRUE(w.WriteAtomically(path).ok());
      absl::StatusOr<CheckpointState> loaded = LoadCheckpoint(path);
      EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
      EXPECT_THAT(loaded.status().message(), HasSubstr(in_momentum ? "'momentum_buffer'[1]" : "'params'[1]"));
    }
  }
}

// Central directory field offsets of the first entry (zip APPNOTE 4.3.12).
size_t CentralDirectory(const std::string& zip) {
  const size_t end = zip.size() - 22;
  return static_cast<uint8_t>(zip[end + 16]) | static_cast<uint8_t>(zip[end + 17]) << 8 |
         static_cast<uint8_t>(zip[end + 18]) << 16 | static_cast<size_t>(static_cast<uint8_t>(zip[end + 19])) << 24;
}

TEST(HostileCheckpointTest, DamagedArchivesGetTheRightError) {
  NpzWriter w;
  w.AddFloat32("params", {1, 2, 3, 4}, {4});
  absl::StatusOr<std::string> bytes = w.Serialize();
  ASSERT_TRUE(bytes.ok());
  const size_t dir = CentralDirectory(*bytes);
  // A deflated entry claiming 4 GiB from a few bytes: refused before the 4 GiB are allocated.
  std::string huge = *bytes;
  huge[dir + 10] = 8;  // method: deflate
  for (int i = 0; i < 4; ++i) huge[dir + 24 + i] = static_cast<char>(0xff);  // uncompressed size
  absl::StatusOr<NpzReader> r = NpzReader::Parse(huge, "huge.npz");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("more than deflate can expand"));
  // A stored entry whose sizes disagree is a damaged directory, not an unsupported method.
  std::string sizes = *bytes;
  sizes[dir + 24] ^= 0x01;
  r = NpzReader::Parse(sizes, "sizes.npz");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("damaged central directory"));
  EXPECT_THAT(r.status().message(), ::testing::Not(HasSubstr("method 0")));
  // An unknown method is named.
  std::string method = *bytes;
  method[dir + 10] = 12;
  EXPECT_THAT(NpzReader::Parse(method, "m.npz").status().message(), HasSubstr("zip method 12"));
  // Every single flipped byte and every truncation: an error or (for bytes no check covers, e.g. the
  // timestamps) the same values; never a crash.
  for (size_t i = 0; i < bytes->size(); ++i) {
    std::string flipped = *bytes;
    flipped[i] ^= 0x5a;
    absl::StatusOr<NpzReader> f = NpzReader::Parse(flipped, "flipped.npz");
    if (f.ok()) {
      absl::StatusOr<std::vector<float>> params = f->Float32("params");
      if (params.ok()) {
        EXPECT_EQ(*params, (std::vector<float>{1, 2, 3, 4})) << "byte " << i;
      }
    }
    EXPECT_FALSE(NpzReader::Parse(bytes->substr(0, i), "cut.npz").ok()) << "cut at " << i;
  }
}

// Issue 22: a diverged state (an update that overflowed) never replaces the last good checkpoint.
TEST(HostileCheckpointTest, NonFiniteStateIsNotSavedOverAGoodCheckpoint) {
  const std::string path = TempDir("nonfinite_save.npz");
  ASSERT_TRUE(SaveCheckpoint(path, State()).ok());
  CheckpointState diverged = State();
  diverged.params[1] = -INFINITY;
  absl::Status refused = SaveCheckpoint(path, diverged);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("parameter 1 is -inf (the run diverged); the previous checkpoint is kept"));
  absl::StatusOr<CheckpointState> loaded = LoadCheckpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->params, State().params);
}

// Issue 22: a shape whose element count overflows int64 (2^62 x 4 wraps to 0) must not pass as an empty
// array.
TEST(HostileCheckpointTest, ShapeWhoseElementCountOverflowsIsRefused) {
  const std::string npy = EncodeNpy(NpyArray{"<f4", {int64_t{1} << 62, 4}, ""});
  absl::StatusOr<NpyArray> decoded = DecodeNpy(npy, "overflow");
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << decoded.status();
  EXPECT_THAT(decoded.status().message(), HasSubstr("too many elements"));
  const std::string bytes_npy = EncodeNpy(NpyArray{"<f4", {int64_t{1} << 61, 1}, ""});  // 2^61 x 4 bytes
  decoded = DecodeNpy(bytes_npy, "bytes");
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << decoded.status();
}

// Issue 22: the zip bomb of many directory entries pointing at one (highly compressed) blob is refused
// before anything is inflated: every entry's data must be its own.
TEST(HostileCheckpointTest, DirectoryEntriesSharingOneBlobAreRefused) {
  NpzWriter w;
  w.AddFloat32("params", {1, 2, 3, 4}, {4});
  absl::StatusOr<std::string> bytes = w.Serialize();
  ASSERT_TRUE(bytes.ok());
  const size_t dir = CentralDirectory(*bytes);
  const size_t end = bytes->size() - 22;
  const std::string entry = bytes->substr(dir, end - dir);
  std::string twice = bytes->substr(0, end) + entry;
  std::string record = bytes->substr(end);
  record[8] = record[10] = 2;  // entries on this disk, and in all
  const size_t dir_size = 2 * entry.size();
  for (int i = 0; i < 4; ++i) record[12 + i] = static_cast<char>((dir_size >> (8 * i)) & 0xff);
  twice += record;
  absl::StatusOr<NpzReader> r = NpzReader::Parse(twice, "bomb.npz");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("overlaps another entry's data"));
}

TEST(HostileCheckpointTest, StaleTemporariesOfKilledRunsAreRemovedAtStart) {
  const std::string dir = TempDir("ckpt_stale");
  ASSERT_TRUE(PrepareCheckpointDir(dir).ok());
  // pid 2^22 + 1 is above Linux's pid_max limit: no such process can exist.
  const std::string stale = LatestCheckpointPath(dir) + ".tmp.4194305";
  std::ofstream(stale) << "half a checkpoint";
  ASSERT_TRUE(std::ifstream(stale).good());
  ASSERT_TRUE(PrepareCheckpointDir(dir).ok());
  EXPECT_FALSE(std::ifstream(stale).good());
}

}  // namespace
}  // namespace psring::trainer
