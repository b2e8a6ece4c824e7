#include "common/flags_usage.h"

#include <cstdlib>
#include <iostream>
#include <vector>

#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
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

std::vector<char*> ParseFlags(int argc, char** argv) {
  // The same parse as absl::ParseCommandLine, with the usage flags left to us: Abseil 20220623's
  // HandleUsageFlags returns 1 (its exit code) after printing the help a user asked for.
  std::vector<char*> positional = absl::flags_internal::ParseCommandLineImpl(
      argc, argv, absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage, absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  if (absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage()) != -1) {
    std::cout.flush();
    std::exit(0);
  }
  return positional;
}

}  // namespace psring
