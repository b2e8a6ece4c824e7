#include "ps/binary_main.h"

#include <cstdio>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "ps/wire.h"

namespace psring::ps {

void InitFlagsUsage(absl::string_view usage) {
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) {
    return absl::StartsWith(file, "ps/") || absl::StartsWith(file, "common/");
  };
  absl::SetFlagsUsageConfig(config);
}

int RunMain(int argc, char** argv, absl::string_view name,
            absl::FunctionRef<absl::Status(const std::vector<std::string>&)> run) {
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  TuneMallocForTensors();
  const absl::Status status = run(std::vector<std::string>(positional.begin() + 1, positional.end()));
  if (!status.ok()) {
    std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(name.size()), name.data(), status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace psring::ps
