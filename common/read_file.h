// Whole-file reads with errors that name the file and say what to do:
//
//   ASSIGN_OR_RETURN(const std::string text,
//                    ReadFileToString(path, absl::StrCat(path, ": cannot read the plan; pass an existing
//                    file")));
//
// Failures: kNotFound when the file cannot be opened, kDataLoss when reading it fails midway (an I/O error, a
// directory). The message is `what` (default "cannot read <path>") followed by the system's reason in
// parentheses, so a caller's advice stays in front.
#ifndef PSRING_COMMON_READ_FILE_H_
#define PSRING_COMMON_READ_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psring {

absl::StatusOr<std::string> ReadFileToString(const std::string& path, absl::string_view what = "");

}  // namespace psring

#endif  // PSRING_COMMON_READ_FILE_H_
