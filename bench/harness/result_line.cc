#include "bench/harness/result_line.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace psring::bench {
namespace {

absl::Status ParseError(absl::string_view payload, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "cannot read the result line '", payload.substr(0, 300), "': ", what,
      ". The binary and the harness disagree on proto/results.proto: rebuild both from the same tree "
      "(./bazelw build //bench/... //ps/... //ring/...), and when a field was renamed, rename it in "
      "proto/results.proto and in every reader"));
}

// Strict: ignore_unknown_fields stays false, so a renamed key fails here instead of reading as a default.
absl::Status ParseInto(absl::string_view payload, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(payload.data(), payload.size()), message, options);
  if (!status.ok()) {
    return ParseError(payload, absl::StrCat("it does not match ", message->GetTypeName(), " (",
                                            status.ToString(), ")"));
  }
  return absl::OkStatus();
}

// The "role" key picks the message; any JSON object is read generically first to find it.
absl::StatusOr<std::string> Role(absl::string_view payload) {
  google::protobuf::Struct object;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(payload.data(), payload.size()), &object);
  if (!status.ok()) return ParseError(payload, absl::StrCat("not a JSON object (", status.ToString(), ")"));
  const auto it = object.fields().find("role");
  if (it == object.fields().end() || it->second.kind_case() != google::protobuf::Value::kStringValue) {
    return ParseError(payload, "no \"role\" string (\"worker\" or \"server\")");
  }
  return it->second.string_value();
}

absl::Status AddLine(absl::string_view payload, ResultLines* lines) {
  ASSIGN_OR_RETURN(const std::string role, Role(payload));
  if (role == "worker") return ParseInto(payload, &lines->workers.emplace_back());
  if (role == "server") return ParseInto(payload, &lines->servers.emplace_back());
  return ParseError(payload, absl::StrCat("unknown role \"", role, "\" (expected \"worker\" or \"server\")"));
}

}  // namespace

absl::StatusOr<ResultLines> ExtractResults(absl::string_view output) {
  ResultLines lines;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, kResultPrefix)) continue;
    RETURN_IF_ERROR(AddLine(line, &lines));
  }
  return lines;
}

}  // namespace psring::bench
