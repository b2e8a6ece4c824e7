#include "common/read_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psring {

absl::StatusOr<std::string> ReadFileToString(const std::string& path, absl::string_view what) {
  const std::string context = what.empty() ? absl::StrCat("cannot read ", path) : std::string(what);
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::DataLossError(absl::StrCat(context, " (it is a directory)"));
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(context, " (", errno != 0 ? std::strerror(errno) : "cannot open it", ")"));
  }
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof(chunk)) || in.gcount() > 0)
    text.append(chunk, static_cast<size_t>(in.gcount()));
  if (in.bad()) return absl::DataLossError(absl::StrCat(context, " (reading it failed midway)"));
  return text;
}

}  // namespace psring
