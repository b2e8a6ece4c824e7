#include "bench/core/trace_merge.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace psring::bench {
namespace {

using ::google::protobuf::ListValue;
using ::google::protobuf::Struct;
using ::google::protobuf::Value;

// The events of one trace: the "traceEvents" array of an object, or the array itself.
absl::StatusOr<ListValue> ParseEvents(const std::string& json, const std::string& what) {
  Value root;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &root);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not JSON (", status.ToString(),
                                                   "): pass the file a worker's --timeline wrote"));
  }
  if (root.has_list_value()) return root.list_value();
  if (root.has_struct_value()) {
    auto it = root.struct_value().fields().find("traceEvents");
    if (it != root.struct_value().fields().end() && it->second.has_list_value())
      return it->second.list_value();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what,
                   " is JSON but not a trace: expected an array of events or an object with a "
                   "\"traceEvents\" array"));
}

Value Number(double v) {
  Value value;
  value.set_number_value(v);
  return value;
}

Value Text(const std::string& s) {
  Value value;
  value.set_string_value(s);
  return value;
}

// A field of an event: its number (0 when absent or not a number) or text ("" likewise).
double NumberField(const Struct& event, const char* key) {
  auto it = event.fields().find(key);
  return it != event.fields().end() && it->second.has_number_value() ? it->second.number_value() : 0;
}

std::string TextField(const Struct& event, const char* key) {
  auto it = event.fields().find(key);
  return it != event.fields().end() && it->second.has_string_value() ? it->second.string_value() : "";
}

}  // namespace

absl::StatusOr<std::string> MergeRankTraces(const std::vector<std::string>& rank_traces,
                                            const std::string& label, const std::vector<TraceMark>& marks) {
  ListValue merged;
  for (size_t rank = 0; rank < rank_traces.size(); ++rank) {
    ASSIGN_OR_RETURN(ListValue events,
                     ParseEvents(rank_traces[rank], absl::StrCat("rank ", rank, "'s timeline")));
    // The process's name first, so viewers label the rank's lane.
    Value name;
    Struct* meta = name.mutable_struct_value();
    (*meta->mutable_fields())["ph"] = Text("M");
    (*meta->mutable_fields())["name"] = Text("process_name");
    (*meta->mutable_fields())["pid"] = Number(static_cast<double>(rank));
    (*meta->mutable_fields())["tid"] = Number(0);
    (*(*meta->mutable_fields())["args"].mutable_struct_value()->mutable_fields())["name"] =
        Text(label.empty() ? absl::StrCat("rank ", rank) : absl::StrCat("rank ", rank, " (", label, ")"));
    *merged.add_values() = std::move(name);
    for (Value& event : *events.mutable_values()) {
      if (!event.has_struct_value()) continue;  // not an event; viewers ignore it too
      Struct* fields = event.mutable_struct_value();
      // The worker's own process name would override the rank's.
      if (TextField(*fields, "ph") == "M" && TextField(*fields, "name") == "process_name") continue;
      (*fields->mutable_fields())["pid"] = Number(static_cast<double>(rank));
      *merged.add_values() = std::move(event);
    }
  }
  for (const TraceMark& mark : marks) {
    if (mark.rank < 0 || mark.rank >= static_cast<int>(rank_traces.size())) {
      return absl::InvalidArgumentError(absl::StrCat("a timeline mark names rank ", mark.rank, " of ",
                                                     rank_traces.size(), " ranks"));
    }
    Value event;
    Struct* fields = event.mutable_struct_value();
    (*fields->mutable_fields())["ph"] = Text("i");
    (*fields->mutable_fields())["s"] = Text("p");
    (*fields->mutable_fields())["name"] = Text(mark.name);
    (*fields->mutable_fields())["cat"] = Text("attribution");
    (*fields->mutable_fields())["pid"] = Number(static_cast<double>(mark.rank));
    (*fields->mutable_fields())["tid"] = Number(0);
    (*fields->mutable_fields())["ts"] = Number(mark.ts_us);
    auto* args = (*fields->mutable_fields())["args"].mutable_struct_value()->mutable_fields();
    if (mark.step >= 0) (*args)["step"] = Number(mark.step);
    (*args)["lag_ms"] = Number(mark.lag_ms);
    *merged.add_values() = std::move(event);
  }
  Struct root;
  *(*root.mutable_fields())["traceEvents"].mutable_list_value() = std::move(merged);
  (*root.mutable_fields())["displayTimeUnit"] = Text("ms");
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(root, &json);
  if (!status.ok())
    return absl::InternalError(absl::StrCat("cannot print the merged trace: ", status.ToString()));
  return json;
}

absl::Status MergeRankTraceFiles(const std::vector<std::string>& rank_paths, const std::string& label,
                                 const std::string& out_path, const std::vector<TraceMark>& marks) {
  std::vector<std::string> traces;
  for (const std::string& path : rank_paths) {
    ASSIGN_OR_RETURN(std::string text,
                     ReadFileToString(path, absl::StrCat("cannot read timeline ", path,
                                                         " (did the worker run with --timeline?)")));
    traces.push_back(std::move(text));
  }
  ASSIGN_OR_RETURN(const std::string merged, MergeRankTraces(traces, label, marks));
  return WriteFileAtomically(out_path, merged);
}

absl::StatusOr<std::vector<TraceSpan>> ReadSpans(const std::string& trace_json) {
  ASSIGN_OR_RETURN(const ListValue events, ParseEvents(trace_json, "the trace"));
  std::map<std::pair<int, int>, std::string> thread_names;
  for (const Value& event : events.values()) {
    if (!event.has_struct_value()) continue;
    const Struct& e = event.struct_value();
    if (TextField(e, "ph") != "M" || TextField(e, "name") != "thread_name") continue;
    auto args = e.fields().find("args");
    if (args == e.fields().end() || !args->second.has_struct_value()) continue;
    thread_names[{static_cast<int>(NumberField(e, "pid")), static_cast<int>(NumberField(e, "tid"))}] =
        TextField(args->second.struct_value(), "name");
  }
  std::vector<TraceSpan> spans;
  for (const Value& event : events.values()) {
    if (!event.has_struct_value() || TextField(event.struct_value(), "ph") != "X") continue;
    const Struct& e = event.struct_value();
    TraceSpan span;
    span.pid = static_cast<int>(NumberField(e, "pid"));
    span.tid = static_cast<int>(NumberField(e, "tid"));
    auto name = thread_names.find({span.pid, span.tid});
    span.track = name != thread_names.end() && !name->second.empty() ? name->second
                                                                     : absl::StrCat("thread ", span.tid);
    span.name = TextField(e, "name");
    span.category = TextField(e, "cat");
    span.start_us = NumberField(e, "ts");
    span.duration_us = NumberField(e, "dur");
    auto args = e.fields().find("args");
    if (args != e.fields().end() && args->second.has_struct_value()) {
      auto step = args->second.struct_value().fields().find("step");
      if (step != args->second.struct_value().fields().end() && step->second.has_number_value()) {
        span.step = static_cast<int>(step->second.number_value());
      }
    }
    spans.push_back(std::move(span));
  }
  return spans;
}

}  // namespace psring::bench
