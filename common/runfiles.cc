#include "common/runfiles.h"

#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "absl/strings/str_cat.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace psring {

std::string RunfilePath(const char* argv0, const std::string& rlocation) {
  if (argv0 == nullptr) return "";
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::Create(argv0, &error));
  return runfiles != nullptr ? runfiles->Rlocation(rlocation) : "";
}

absl::StatusOr<std::string> FindRunfile(const char* argv0, const RunfileRequest& request) {
  const std::string path = request.given.empty() ? RunfilePath(argv0, request.rlocation) : request.given;
  if (path.empty() || access(path.c_str(), request.executable ? X_OK : R_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot find ", request.executable ? "an executable " : "",
                                            request.rlocation, " (tried '", path, "'): ", request.hint,
                                            ", or pass ", request.flag, "=PATH"));
  }
  return path;
}

std::string FromWhereTyped(const std::string& path) {
  const char* typed_in = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || typed_in == nullptr || *typed_in == '\0') return path;
  return absl::StrCat(typed_in, "/", path);
}

}  // namespace psring
