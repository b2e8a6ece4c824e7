// Exit codes that psring binaries share with whatever launches them (the scaling harness, scripts), so a
// launcher reacts to what happened without reading error messages.
//
//   0                 success
//   1                 any other error (the message on stderr says what to do)
//   kExitPortInUse    a port this process was told to listen on is taken by another process; a launcher
//                     that picked the port itself may pick another and retry
//
// Errors carry the same fact in-process: PortInUseError() marks an absl::Status with a payload that
// IsPortInUse() recognises through any number of absl::Status copies (the message may be reworded freely).
#ifndef PSRING_COMMON_EXIT_CODES_H_
#define PSRING_COMMON_EXIT_CODES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace psring {

inline constexpr int kExitPortInUse = 98;  // EADDRINUSE on Linux, for the curious

inline constexpr char kPortInUsePayloadUrl[] = "type.psring/port_in_use";

// kUnavailable (another port, or later, may work) carrying the port-in-use mark.
inline absl::Status PortInUseError(absl::string_view message) {
  absl::Status status = absl::UnavailableError(message);
  status.SetPayload(kPortInUsePayloadUrl, absl::Cord("1"));
  return status;
}

inline bool IsPortInUse(const absl::Status& status) {
  return status.GetPayload(kPortInUsePayloadUrl).has_value();
}

// What main() returns for `status`: 0, kExitPortInUse or 1.
inline int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return 0;
  return IsPortInUse(status) ? kExitPortInUse : 1;
}

}  // namespace psring

#endif  // PSRING_COMMON_EXIT_CODES_H_
