// IDX reader on the real Fashion-MNIST files and on malformed files written to TEST_TMPDIR; synthetic data.
#include "trainer/dataset.h"

#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psring::trainer {
namespace {

using ::testing::HasSubstr;

constexpr char kRealDir[] = "/usr/share/datasets/fashion-mnist";

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void Put32(std::string* s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s->push_back(static_cast<char>((v >> shift) & 0xff));
}

// An IDX file of unsigned bytes: magic 0x000008NN, big-endian dims, then `data`.
std::string Idx(const std::vector<uint32_t>& dims, const std::string& data) {
  std::string s = {0, 0, 8, static_cast<char>(dims.size())};
  for (uint32_t d : dims) Put32(&s, d);
  return s + data;
}

std::string WritePlain(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string WriteGzip(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
  return path;
}

std::string Pixels(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i % 251);
  return s;
}

bool RealDataPresent() { return std::ifstream(std::string(kRealDir) + "/train-images-idx3-ubyte.gz").good(); }

TEST(DatasetTest, ReadsRealFashionMnist) {
  if (!RealDataPresent()) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  absl::StatusOr<Dataset> train = LoadFashionMnist(kRealDir, Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->size, 60000);
  EXPECT_EQ(train->dim, 784);
  EXPECT_EQ(train->num_classes, 10);
  absl::StatusOr<Dataset> test = LoadFashionMnist(kRealDir, Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->size, 10000);
  // Fashion-MNIST is balanced: 6000 training and 1000 test images per class.
  std::vector<int> counts(10);
  for (int32_t y : train->labels) ++counts[y];
  for (int c : counts) EXPECT_EQ(c, 6000);
  // Normalised with the training set's statistics: mean ~0, std ~1.
  double sum = 0, sum_sq = 0;
  for (float v : train->images) {
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  const double mean = sum / train->images.size();
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sum_sq / train->images.size() - mean * mean), 1.0, 0.01);
}

TEST(DatasetTest, ReadsPlainAndGzipAlike) {
  const std::string images = Idx({3, 2, 2}, Pixels(12));
  const std::string labels = Idx({3}, std::string{1, 0, 9});
  absl::StatusOr<Dataset> plain =
      LoadIdxDataset(WritePlain("p-images", images), WritePlain("p-labels", labels), 10, 4);
  absl::StatusOr<Dataset> gz =
      LoadIdxDataset(WriteGzip("g-images.gz", images), WriteGzip("g-labels.gz", labels), 10, 4);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(gz.ok()) << gz.status();
  EXPECT_EQ(plain->labels, (std::vector<int32_t>{1, 0, 9}));
  EXPECT_EQ(plain->images, gz->images);
  EXPECT_EQ(plain->labels, gz->labels);
  EXPECT_FLOAT_EQ(plain->images[5], (5 / 255.0f - kPixelMean) / kPixelStd);
}

struct BadFile {
  std::string name;
  std::string bytes;
  absl::StatusCode code;
  std::string message;
};

class MalformedIdxTest : public ::testing::TestWithParam<BadFile> {};

TEST_P(MalformedIdxTest, GivesClearErrorNamingTheFile) {
  const BadFile& bad = GetParam();
  for (bool gzip : {false, true}) {
    const std::string path = gzip ? WriteGzip(bad.name + ".gz", bad.bytes) : WritePlain(bad.name, bad.bytes);
    absl::StatusOr<IdxArray> read = ReadIdxFile(path);
    ASSERT_FALSE(read.ok()) << path;
    EXPECT_EQ(read.status().code(), bad.code) << read.status();
    EXPECT_THAT(read.status().message(), HasSubstr(path));
    EXPECT_THAT(read.status().message(), HasSubstr(bad.message));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedIdxTest,
    ::testing::Values(
        BadFile{"empty", "", absl::StatusCode::kDataLoss, "shorter than the 4-byte magic"},
        BadFile{"bad_magic", "P5\n28 28\n255\n", absl::StatusCode::kInvalidArgument, "bad magic number"},
        BadFile{"float_type", std::string{0, 0, 0x0d, 1, 0, 0, 0, 1, 0, 0, 0, 0},
                absl::StatusCode::kInvalidArgument, "only unsigned bytes"},
        BadFile{"zero_dims", std::string{0, 0, 8, 0}, absl::StatusCode::kInvalidArgument,
                "declares 0 dimensions"},
        BadFile{"short_header", std::string{0, 0, 8, 3, 0, 0, 0, 5}, absl::StatusCode::kDataLoss,
                "truncated inside its header"},
        BadFile{"zero_size", Idx({0, 28, 28}, ""), absl::StatusCode::kInvalidArgument, "of size 0"},
        BadFile{"truncated_data", Idx({10, 28, 28}, Pixels(784 * 9 + 100)), absl::StatusCode::kDataLoss,
                "is truncated: dimensions 10 x 28 x 28 need 7840 data bytes but only 7156"},
        BadFile{"trailing", Idx({2}, "abc"), absl::StatusCode::kDataLoss,
                "1 unexpected bytes after the data"},
        BadFile{"huge_dims", Idx({0xffffffffu, 0xffffffffu}, ""), absl::StatusCode::kInvalidArgument,
                "the header is corrupt"}),
    [](const ::testing::TestParamInfo<BadFile>& info) { return info.param.name; });

TEST(DatasetTest, MissingFileIsNotFound) {
  absl::StatusOr<IdxArray> read = ReadIdxFile(TempPath("does-not-exist.gz"));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(read.status().message(), HasSubstr("does-not-exist.gz"));
  absl::StatusOr<Dataset> ds = LoadFashionMnist(TempPath("no-such-dir"), Split::kTrain);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ds.status().message(), HasSubstr("--data_dir"));
}

TEST(DatasetTest, CorruptGzipStreamIsDataLoss) {
  std::ifstream in(WriteGzip("whole.gz", Idx({2000}, Pixels(2000))), std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Cut the compressed stream in half: zlib must report it, not return a short file silently.
  const std::string path = WritePlain("cut.gz", gz.substr(0, gz.size() / 2));
  absl::StatusOr<IdxArray> read = ReadIdxFile(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(path));
}

TEST(DatasetTest, MismatchedCountsWrongShapeAndBadLabels) {
  const std::string images = WritePlain("m-images", Idx({3, 2, 2}, Pixels(12)));
  const std::string two_labels = WritePlain("m-labels2", Idx({2}, std::string{1, 2}));
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, two_labels, 10, 4);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("holds 3 images but label file " + two_labels + " holds 2"));

  const std::string labels = WritePlain("m-labels3", Idx({3}, std::string{1, 2, 3}));
  ds = LoadIdxDataset(images, labels, 10, 784);
  EXPECT_THAT(ds.status().message(), HasSubstr("2 x 2 = 4 pixels; expected 784"));

  const std::string bad_labels = WritePlain("m-labels-bad", Idx({3}, std::string{1, 10, 3}));
  ds = LoadIdxDataset(images, bad_labels, 10, 4);
  EXPECT_THAT(ds.status().message(), HasSubstr("label 10 at index 1"));

  // Image and label files swapped.
  ds = LoadIdxDataset(labels, images, 10, 4);
  EXPECT_THAT(ds.status().message(), HasSubstr("expected 3 (count x rows x cols)"));
}

TEST(DatasetTest, SyntheticIsDeterministicAndBalancedEnough) {
  const Dataset a = MakeSyntheticDataset(500, 3, Split::kTrain);
  const Dataset b = MakeSyntheticDataset(500, 3, Split::kTrain);
  const Dataset t = MakeSyntheticDataset(500, 3, Split::kTest);
  EXPECT_EQ(a.dim, 784);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.images, t.images);
  std::vector<int> counts(10);
  for (int32_t y : a.labels) ++counts[y];
  for (int c : counts) EXPECT_GT(c, 20);
}

}  // namespace
}  // namespace psring::trainer
