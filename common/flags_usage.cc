#include "common/flags_usage.h"

#include <vector>

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace psring {

void InitFlagsUsage(absl::string_view usage, std::initializer_list<absl::string_view> dirs) {
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [dirs = std::vector<absl::string_view>(dirs)](absl::string_view file) {
    for (absl::string_view dir : dirs) {
      if (absl::StartsWith(file, dir)) return true;
    }
    return false;
  };
  absl::SetFlagsUsageConfig(config);
}

}  // namespace psring
