// What every psring main() shares around its work: flag parsing, and turning a failed run into a one-line
// error on stderr and the exit code launchers read (common/exit_codes.h). The --help setup is
// psring::InitFlagsUsage (common/flags_usage.h), called first.
//
//   int main(int argc, char** argv) {
//     psring::InitFlagsUsage("One ring rank.\n  ...", {"common/", "trainer/", "ring/"});
//     return psring::RunMain(argc, argv, "ring_worker", [](const std::vector<std::string>&) { ... });
//   }
//
// Not thread-safe: call from main() before any thread starts.
#ifndef PSRING_COMMON_BINARY_MAIN_H_
#define PSRING_COMMON_BINARY_MAIN_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace psring {

// Parses the command line (ParseFlags: exits 1 on unknown flags, 0 after --help), then calls run(positional arguments
// after the program name, i.e. those after a bare `--`). A failed status is printed to stderr as
// "<name>: <status>" on one line. Returns the exit code for main(): ExitCodeFor(status).
int RunMain(int argc, char** argv, absl::string_view name,
            absl::FunctionRef<absl::Status(const std::vector<std::string>&)> run);

}  // namespace psring

#endif  // PSRING_COMMON_BINARY_MAIN_H_
