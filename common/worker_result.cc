#include "common/worker_result.h"

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"

namespace psring {
namespace {

using google::protobuf::FieldDescriptor;

// protobuf's JSON printer leaves out proto2 fields that were never set; setting each to the value it reads
// as (its default) makes it print.
void SetEveryField(google::protobuf::Message* message) {
  const google::protobuf::Descriptor* descriptor = message->GetDescriptor();
  const google::protobuf::Reflection* reflection = message->GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (field->is_repeated() || reflection->HasField(*message, field)) continue;
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        reflection->SetInt32(message, field, field->default_value_int32());
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        reflection->SetInt64(message, field, field->default_value_int64());
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        reflection->SetDouble(message, field, field->default_value_double());
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        reflection->SetString(message, field, field->default_value_string());
        break;
      default:  // results.proto holds no other kinds; a new one would print once set
        break;
    }
  }
}

}  // namespace

absl::StatusOr<std::string> FormatResultLine(const google::protobuf::Message& result) {
  std::unique_ptr<google::protobuf::Message> complete(result.New());
  complete->CopyFrom(result);
  SetEveryField(complete.get());
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(*complete, &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print ", result.GetTypeName(), " as JSON: ", status.ToString()));
  }
  return absl::StrCat("PSRING_RESULT ", json);
}

absl::Status PrintResultLine(const google::protobuf::Message& result) {
  absl::StatusOr<std::string> line = FormatResultLine(result);
  if (!line.ok()) return line.status();
  std::printf("%s\n", line->c_str());
  if (std::fflush(stdout) != 0)
    return absl::UnavailableError("cannot write the PSRING_RESULT line to stdout");
  return absl::OkStatus();
}

}  // namespace psring
