// A path for a test's files under Bazel's TEST_TMPDIR (/tmp when run outside Bazel), with whatever an earlier
// run left there removed, so every run starts from nothing. The folder itself is not created: callers that
// need it call std::filesystem::create_directories.
#ifndef PSRING_TESTS_TESTING_TEMP_DIR_H_
#define PSRING_TESTS_TESTING_TEMP_DIR_H_

#include <cstdlib>
#include <filesystem>
#include <string>

namespace psring::testing {

inline std::string FreshTempPath(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(root != nullptr ? root : "/tmp") + "/" + name;
  std::filesystem::remove_all(path);
  return path;
}

}  // namespace psring::testing

#endif  // PSRING_TESTS_TESTING_TEMP_DIR_H_
