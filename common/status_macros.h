// Status propagation helpers shared by every layer (absl::Status / absl::StatusOr).
#ifndef PSRING_COMMON_STATUS_MACROS_H_
#define PSRING_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#define PSRING_CONCAT_INNER_(a, b) a##b
#define PSRING_CONCAT_(a, b) PSRING_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(expr)                         \
  do {                                                \
    ::absl::Status psring_status_ = (expr);           \
    if (!psring_status_.ok()) return psring_status_;  \
  } while (0)

// `lhs` = value of `rexpr` (an absl::StatusOr<T>), or returns its status from the enclosing function.
//   ASSIGN_OR_RETURN(auto fd, Connect(addr));
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ASSIGN_OR_RETURN_IMPL_(PSRING_CONCAT_(psring_statusor_, __LINE__), lhs, rexpr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                           \
  if (!tmp.ok()) return tmp.status();           \
  lhs = std::move(tmp).value()

namespace psring {

// `status` with "context: " before its message. The code and the payloads stay, so marks such as
// PortInUseError's (common/exit_codes.h) survive every layer that adds its context.
inline absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  absl::Status annotated(status.code(), absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { annotated.SetPayload(url, payload); });
  return annotated;
}

}  // namespace psring

#endif  // PSRING_COMMON_STATUS_MACROS_H_
