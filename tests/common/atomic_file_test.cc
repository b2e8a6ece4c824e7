#include "common/atomic_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace psring {
namespace {

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The files in `dir` (names only): a leftover temporary file would show here.
std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename());
  return names;
}

TEST(Crc32Test, MatchesTheStandardCheckValueAndContinues) {
  EXPECT_EQ(Crc32("123456789"), 0xCBF43926u);  // the CRC-32 check value of zip, gzip and PNG
  EXPECT_EQ(Crc32("6789", Crc32("12345")), 0xCBF43926u);
  EXPECT_EQ(Crc32(""), 0u);
}

TEST(AtomicFileTest, CreatesTheFolderAndLeavesNoTemporaryFile) {
  const std::string dir = testing::FreshTempPath("atomic_create");
  const std::string path = dir + "/sub/file.bin";
  ASSERT_TRUE(WriteFileAtomically(path, std::string("a\0b", 3)).ok());
  EXPECT_EQ(Contents(path), std::string("a\0b", 3));
  EXPECT_EQ(Files(dir + "/sub"), std::vector<std::string>{"file.bin"});
}

TEST(AtomicFileTest, OldContentsStayUntilCommitThenAreReplacedWhole) {
  const std::string dir = testing::FreshTempPath("atomic_replace");
  const std::string path = dir + "/ckpt";
  ASSERT_TRUE(WriteFileAtomically(path, "old contents").ok());

  absl::StatusOr<AtomicFileWriter> out = AtomicFileWriter::Create(path);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->Append("new ", 4).ok());
  EXPECT_EQ(Contents(path), "old contents");  // a reader (or a crash) mid-write sees the old file
  ASSERT_TRUE(out->Append("contents", 8).ok());
  EXPECT_EQ(out->crc(), Crc32("new contents"));
  ASSERT_TRUE(out->Commit().ok());
  EXPECT_EQ(Contents(path), "new contents");
  EXPECT_EQ(Files(dir), std::vector<std::string>{"ckpt"});
  EXPECT_EQ(out->Append("x", 1).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(AtomicFileTest, AbandonedWriteKeepsTheOldFileAndRemovesTheTemporary) {
  const std::string dir = testing::FreshTempPath("atomic_abandon");
  const std::string path = dir + "/ckpt";
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  {
    absl::StatusOr<AtomicFileWriter> out = AtomicFileWriter::Create(path);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_TRUE(out->Append("partial", 7).ok());
    EXPECT_EQ(Files(dir).size(), 2u);  // the file and the temporary one
  }                                    // destroyed without Commit(), e.g. an error return between two Appends
  EXPECT_EQ(Contents(path), "old");
  EXPECT_EQ(Files(dir), std::vector<std::string>{"ckpt"});
}

// Issue 22: in a folder others can write to, a symlink planted at the temporary name must not make the
// writer clobber the file it points to, and the new file is readable by its owner only.
TEST(AtomicFileTest, PlantedSymlinkIsNotFollowedAndTheFileIsPrivate) {
  const std::string dir = testing::FreshTempPath("atomic_symlink");
  std::filesystem::create_directories(dir);
  const std::string victim = dir + "/victim";
  { std::ofstream(victim) << "precious"; }
  const std::string path = dir + "/ckpt.bin";
  std::filesystem::create_symlink(victim, absl::StrCat(path, ".tmp.", ::getpid()));
  ASSERT_TRUE(WriteFileAtomically(path, "new contents").ok());
  EXPECT_EQ(Contents(victim), "precious");
  EXPECT_EQ(Contents(path), "new contents");
  EXPECT_FALSE(std::filesystem::is_symlink(path));
  const std::filesystem::perms perms = std::filesystem::status(path).permissions();
  EXPECT_EQ(perms & std::filesystem::perms::all, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

TEST(AtomicFileTest, ErrorsNameTheFile) {
  const std::string dir = testing::FreshTempPath("atomic_errors");
  // A folder where the file should go: the rename fails, the temporary file goes.
  std::filesystem::create_directories(dir + "/taken/inside");
  absl::Status renamed = WriteFileAtomically(dir + "/taken", "x");
  EXPECT_FALSE(renamed.ok());
  EXPECT_TRUE(absl::StrContains(renamed.message(), "cannot rename")) << renamed;
  EXPECT_TRUE(absl::StrContains(renamed.message(), dir + "/taken")) << renamed;
  EXPECT_EQ(Files(dir), std::vector<std::string>{"taken"});
  // A folder that cannot be created (a file is in the way).
  ASSERT_TRUE(WriteFileAtomically(dir + "/plain", "x").ok());
  absl::Status folder = WriteFileAtomically(dir + "/plain/file", "x");
  EXPECT_FALSE(folder.ok());
  EXPECT_TRUE(absl::StrContains(folder.message(), "cannot create the folder " + dir + "/plain")) << folder;
}

}  // namespace
}  // namespace psring
