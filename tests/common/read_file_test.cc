#include "common/read_file.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace psring {
namespace {

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// The bytes come back as written, NULs and all, for files larger than one read chunk and for empty ones.
TEST(ReadFileToStringTest, ReturnsEveryByte) {
  const std::string dir = testing::FreshTempPath("read_file");
  std::filesystem::create_directories(dir);
  std::string big(200000, 'x');
  big[7] = '\0';
  big[big.size() - 1] = 'z';
  Write(dir + "/big", big);
  absl::StatusOr<std::string> text = ReadFileToString(dir + "/big");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, big);
  Write(dir + "/empty", "");
  text = ReadFileToString(dir + "/empty");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(text->empty());
}

// A missing file is kNotFound with the caller's advice first and the system's reason after it; a directory
// is kDataLoss, not an empty text.
TEST(ReadFileToStringTest, ErrorsKeepTheCallersAdviceAndGiveTheReason) {
  const std::string dir = testing::FreshTempPath("read_file_errors");
  std::filesystem::create_directories(dir);
  absl::StatusOr<std::string> text = ReadFileToString(dir + "/missing", "the plan: pass an existing file");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StartsWith(text.status().message(), "the plan: pass an existing file ("))
      << text.status();
  EXPECT_TRUE(absl::StrContains(text.status().message(), "No such file")) << text.status();
  text = ReadFileToString(dir + "/missing");
  EXPECT_TRUE(absl::StartsWith(text.status().message(), "cannot read " + dir + "/missing ("))
      << text.status();
  text = ReadFileToString(dir);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kDataLoss) << text.status();
  EXPECT_TRUE(absl::StrContains(text.status().message(), "directory")) << text.status();
}

}  // namespace
}  // namespace psring
