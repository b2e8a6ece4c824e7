// The --help setup every psring binary shares: absl only lists the flags of the file holding main() unless
// told which source files to include.
//
//   int main(int argc, char** argv) {
//     psring::InitFlagsUsage("One ring rank.\n  bazel run //ring:ring_worker -- ...",
//                            {"common/", "trainer/", "ring/"});
//     psring::ParseFlags(argc, argv);   // not absl::ParseCommandLine: --help must exit 0
//   }
//
// Not thread-safe: call once from main(), before absl::ParseCommandLine and before any thread starts.
#ifndef PSRING_COMMON_FLAGS_USAGE_H_
#define PSRING_COMMON_FLAGS_USAGE_H_

#include <initializer_list>
#include <vector>

#include "absl/strings/string_view.h"

namespace psring {

// Sets the program's usage message and makes --help list every flag defined in a source file whose path
// (relative to the workspace root) starts with one of `dirs` (e.g. {"common/", "trainer/"}), besides the
// file holding main(). Copies `dirs`; the string literals they point to must outlive the program (pass
// literals).
void InitFlagsUsage(absl::string_view usage, std::initializer_list<absl::string_view> dirs);

// absl::ParseCommandLine, except that a usage flag (--help, --helpfull, --helpshort, --helppackage,
// --helpon=, --helpmatch=, --version, --only_check_args) prints to stdout and exits 0: the user asked for it
// and got it (the Abseil this builds with exits 1 after --help). Unknown or malformed flags still print
// Abseil's error on stderr and exit 1. Returns the positional arguments, argv[0] first.
std::vector<char*> ParseFlags(int argc, char** argv);

}  // namespace psring

#endif  // PSRING_COMMON_FLAGS_USAGE_H_
