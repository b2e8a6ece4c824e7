// What //ps:server, //ps:worker and //ps:local share around main(): the usage message with every flag of this
// project listed under --help, flag parsing, and turning a failed run into a one-line error and exit code 1.
//
//   int main(int argc, char** argv) {
//     psring::ps::InitFlagsUsage("One shard of the parameter server.\n  bazel run //ps:server -- ...");
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

// Sets the usage message and makes --help list the flags defined in ps/ and common/ (not only those of the
// file holding main()). Binaries that also take the training flags use trainer::InitFlagsUsage instead (it
// covers ps/ too); //ps:server and //ps:local cannot link trainer/train_flags.cc (both define
// --checkpoint_dir with another meaning).
void InitFlagsUsage(absl::string_view usage);

// Parses the command line (exits on unknown flags, --help), tunes malloc for large tensors, then calls
// run(positional arguments after the program name, i.e. those after a bare `--`). A failed status is printed
// to stderr as "<name>: <status>" on one line. Returns the process exit code: 0 or 1.
int RunMain(int argc, char** argv, absl::string_view name,
            absl::FunctionRef<absl::Status(const std::vector<std::string>&)> run);

}  // namespace psring::ps

#endif  // PSRING_PS_BINARY_MAIN_H_
