// LoadAuthToken (common/auth.h): where the token comes from, and the messages a user sees when it is too
// short or cannot be read (issue 22).
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "common/auth.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psring {
namespace {

using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& contents) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

class LoadAuthTokenTest : public ::testing::Test {
 protected:
  void SetUp() override { ::unsetenv(kAuthTokenEnv); }
  void TearDown() override { ::unsetenv(kAuthTokenEnv); }
};

TEST_F(LoadAuthTokenTest, FlagThenFileThenEnvironment) {
  const std::string token = "0123456789abcdef0123";
  EXPECT_EQ(*LoadAuthToken("", ""), "");  // none: no authentication
  ::setenv(kAuthTokenEnv, "from-the-environment!", 1);
  EXPECT_EQ(*LoadAuthToken("", ""), "from-the-environment!");
  EXPECT_EQ(*LoadAuthToken(token, ""), token);
  // `echo token > file` adds one newline, which is not part of the token.
  EXPECT_EQ(*LoadAuthToken("", WriteFile("token", token + "\n")), token);
  EXPECT_EQ(*LoadAuthToken("", WriteFile("token_raw", token)), token);
}

TEST_F(LoadAuthTokenTest, ShortTokensAreRefusedNamingTheirSource) {
  absl::StatusOr<std::string> short_flag = LoadAuthToken("s3cret", "");
  EXPECT_EQ(short_flag.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_flag.status().message(),
              HasSubstr("the token from --auth_token has 6 bytes; use at least 16 random bytes"));
  ::setenv(kAuthTokenEnv, "short", 1);
  EXPECT_THAT(LoadAuthToken("", "").status().message(), HasSubstr("the token from PSRING_AUTH_TOKEN has 5 bytes"));
  const std::string file = WriteFile("short", "abc\n");
  EXPECT_THAT(LoadAuthToken("", file).status().message(),
              HasSubstr("the token from --auth_token_file=" + file + " has 3 bytes"));
  EXPECT_TRUE(LoadAuthToken(std::string(kMinAuthTokenBytes, 'x'), "").ok());
}

TEST_F(LoadAuthTokenTest, FileProblemsAreClear) {
  absl::StatusOr<std::string> missing = LoadAuthToken("", "/nonexistent/psring-token");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("cannot read --auth_token_file=/nonexistent/psring-token"));
  EXPECT_THAT(LoadAuthToken("", WriteFile("empty", "")).status().message(), HasSubstr("is empty"));
  EXPECT_THAT(LoadAuthToken("0123456789abcdef", WriteFile("both", "0123456789abcdef")).status().message(),
              HasSubstr("not both"));
}

}  // namespace
}  // namespace psring
