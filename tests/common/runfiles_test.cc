#include "common/runfiles.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace psring {
namespace {

// Under `bazel run` a relative path is the user's, from where they typed the command; otherwise, and for
// absolute or empty paths, it is kept as given.
TEST(FromWhereTypedTest, RelativePathsComeFromWhereBazelRunWasTyped) {
  ASSERT_EQ(setenv("BUILD_WORKING_DIRECTORY", "/home/user/psring", 1), 0);
  EXPECT_EQ(FromWhereTyped("bench/results/committed_model.json"),
            "/home/user/psring/bench/results/committed_model.json");
  EXPECT_EQ(FromWhereTyped("/tmp/model.json"), "/tmp/model.json");
  EXPECT_EQ(FromWhereTyped(""), "");
  ASSERT_EQ(setenv("BUILD_WORKING_DIRECTORY", "", 1), 0);
  EXPECT_EQ(FromWhereTyped("model.json"), "model.json");
  ASSERT_EQ(unsetenv("BUILD_WORKING_DIRECTORY"), 0);
  EXPECT_EQ(FromWhereTyped("out/x.svg"), "out/x.svg");
}

// A missing file names the flag that fixes it.
TEST(FindRunfileTest, AMissingFileNamesTheFlag) {
  absl::StatusOr<std::string> path = FindRunfile(
      nullptr, {"/nonexistent/psring/model.json", "psring/x", "--model", "pass an existing file"});
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(path.status().message().find("--model"), std::string::npos) << path.status();
}

}  // namespace
}  // namespace psring
