#include "common/binary_main.h"

#include <cstdio>

#include "common/exit_codes.h"
#include "common/flags_usage.h"

namespace psring {

int RunMain(int argc, char** argv, absl::string_view name,
            absl::FunctionRef<absl::Status(const std::vector<std::string>&)> run) {
  const std::vector<char*> positional = ParseFlags(argc, argv);
  const absl::Status status = run(std::vector<std::string>(positional.begin() + 1, positional.end()));
  if (!status.ok()) {
    // The code and message only: payloads are for launchers, which get them as the exit code.
    std::fprintf(stderr, "%.*s: %s: %.*s\n", static_cast<int>(name.size()), name.data(),
                 absl::StatusCodeToString(status.code()).c_str(), static_cast<int>(status.message().size()),
                 status.message().data());
  }
  return ExitCodeFor(status);
}

}  // namespace psring
