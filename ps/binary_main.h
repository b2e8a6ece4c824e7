// main() of //ps:server and //ps:local: psring::RunMain (common/binary_main.h) with malloc tuned for the
// large tensors the parameter server moves.
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

// psring::RunMain, calling TuneMallocForTensors() and QuietGrpcLogs() (ps/wire.h) before run. Returns
// ExitCodeFor(status).
int RunMain(int argc, char** argv, absl::string_view name,
            absl::FunctionRef<absl::Status(const std::vector<std::string>&)> run);

}  // namespace psring::ps

#endif  // PSRING_PS_BINARY_MAIN_H_
