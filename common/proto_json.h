// Protocol Buffers messages as the JSON files psring writes (model files, CPU models, calibration runs):
// field names as in the .proto, indented, so a person can read and diff them.
//
//   ASSIGN_OR_RETURN(const std::string json, PrettyJson(file, "the model"));
//   RETURN_IF_ERROR(WriteFileAtomically(path, json));
//
// Thread-safety: a pure function.
#ifndef PSRING_COMMON_PROTO_JSON_H_
#define PSRING_COMMON_PROTO_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace psring {

// kInternal "cannot print <what> as JSON: ..." when protobuf cannot print the message.
absl::StatusOr<std::string> PrettyJson(const google::protobuf::Message& message, absl::string_view what);

}  // namespace psring

#endif  // PSRING_COMMON_PROTO_JSON_H_
