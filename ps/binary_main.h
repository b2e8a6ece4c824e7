// What //ps:server, //ps:worker and //ps:local share around main(): flag parsing, and turning a failed run
// into a one-line error and an exit code (common/exit_codes.h). The --help setup is psring::InitFlagsUsage (common/flags_usage.h).
//
//   int main(int argc, char** argv) {
//     psring::InitFlagsUsage("One shard of the parameter server.\n  ...", {"common/", "ps/"});
//     return psring::ps::RunMain(argc, argv, "ps server", [](const std::vector<std::string>&) { ... });
//   }
//
// Not thread-safe: call from main() before any thread starts.
#ifndef PSRING_PS_BINARY_MAIN_H_
#define PSRING_PS_BINARY_MAIN_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace psring::ps {

// Parses the command line (exits on unknown flags, --help), tunes malloc for large tensors, then calls
// run(positional arguments after the program name, i.e. those after a bare `--`). A failed status is printed
// to stderr as "<name>: <CODE>: <message>" on one line. Returns the process exit code: 0, kExitPortInUse or
// 1 (ExitCodeFor).
int RunMain(int argc, char** argv, absl::string_view name,
            absl::FunctionRef<absl::Status(const std::vector<std::string>&)> run);

}  // namespace psring::ps

#endif  // PSRING_PS_BINARY_MAIN_H_
