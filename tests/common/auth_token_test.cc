// LoadAuthToken (common/auth.h): where the token comes from, and the messages a user sees when it is too
// short or cannot be read (issue 22).
#include <sys/stat.h>
#include <unistd.h>

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
using ::testing::Not;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// A token file as the README says to keep one: mode 600 unless `mode` says otherwise.
std::string WriteFile(const std::string& name, const std::string& contents, mode_t mode = 0600) {
  const std::string path = TempPath(name);
  ::unlink(path.c_str());
  std::ofstream(path, std::ios::binary) << contents;
  ::chmod(path.c_str(), mode);
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

// Issue 34: a token file other users may read or change is refused, naming the fix; a symbolic link is not
// followed (O_NOFOLLOW), nor is a folder read as a token. The landed loader read all of them.
TEST_F(LoadAuthTokenTest, TokenFilesMustBePrivateRegularFiles) {
  const std::string token = "0123456789abcdef0123";
  for (mode_t mode : {0640, 0604, 0620, 0602, 0644, 0666}) {
    SCOPED_TRACE(mode);
    const std::string file = WriteFile("shared", token, mode);
    absl::StatusOr<std::string> loaded = LoadAuthToken("", file);
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kPermissionDenied) << loaded.status();
    EXPECT_THAT(loaded.status().message(), HasSubstr("chmod 600 " + file));
    EXPECT_THAT(loaded.status().message(), Not(HasSubstr(token)));
  }
  EXPECT_EQ(*LoadAuthToken("", WriteFile("private", token, 0600)), token);
  EXPECT_EQ(*LoadAuthToken("", WriteFile("read_only", token, 0400)), token);

  const std::string link = TempPath("link_to_token");
  ::unlink(link.c_str());
  ASSERT_EQ(::symlink(WriteFile("target", token).c_str(), link.c_str()), 0);
  absl::StatusOr<std::string> through_link = LoadAuthToken("", link);
  EXPECT_EQ(through_link.status().code(), absl::StatusCode::kPermissionDenied) << through_link.status();
  EXPECT_THAT(through_link.status().message(), HasSubstr("symbolic link"));

  const char* dir = std::getenv("TEST_TMPDIR");
  absl::StatusOr<std::string> folder = LoadAuthToken("", dir != nullptr ? dir : "/tmp");
  EXPECT_FALSE(folder.ok());
}

// Issue 34: one rule off loopback for every program (the PS server and workers, ring_worker): a token, or
// --insecure. Loopback is decided by resolving the name: "127.x.example" is a name (that does not resolve
// here), not a loopback address; "::1" and "localhost" are loopback.
TEST(RequireTokenOffLoopbackTest, OneRuleAndOneMessage) {
  EXPECT_TRUE(RequireTokenOffLoopback("test", "127.0.0.1", false, false).ok());
  EXPECT_TRUE(RequireTokenOffLoopback("test", "localhost", false, false).ok());
  EXPECT_TRUE(RequireTokenOffLoopback("test", "::1", false, false).ok());
  EXPECT_TRUE(RequireTokenOffLoopback("test", "10.0.0.1", true, false).ok());
  for (const char* address : {"10.0.0.1", "0.0.0.0", "", "127.x.example"}) {
    SCOPED_TRACE(address);
    const absl::Status refused = RequireTokenOffLoopback("test", address, false, false);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    EXPECT_EQ(refused.message(), std::string(address) + " " + kNoTokenOffLoopback);
    EXPECT_THAT(refused.message(), HasSubstr("--insecure on a trusted network"));
  }
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(RequireTokenOffLoopback("test", "10.0.0.1", false, true).ok());
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("test: warning: --insecure"));
}

}  // namespace
}  // namespace psring
