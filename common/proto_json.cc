#include "common/proto_json.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace psring {

absl::StatusOr<std::string> PrettyJson(const google::protobuf::Message& message, absl::string_view what) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.add_whitespace = true;
  std::string json;
  const auto printed = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!printed.ok()) return absl::InternalError(absl::StrCat("cannot print ", what, " as JSON: ", printed.ToString()));
  return json;
}

}  // namespace psring
