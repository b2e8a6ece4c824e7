// The scaling report's files (scaling_report.h): one column table that writes scaling.csv, reads it back and
// fills scaling.json's runs, so a column added once reaches all three; and the files of one report written to
// its folder.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/report/scaling_report.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "proto/bench_report.pb.h"

namespace psring::bench {
namespace {

// One data row of a scaling.csv, its columns found by name in the header.
class CsvRow {
 public:
  CsvRow(const std::vector<std::string>* header, std::vector<std::string> fields)
      : header_(header), fields_(std::move(fields)) {}

  static int Column(const std::vector<std::string>& header, const std::string& name) {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  }
  // "" when the column is absent.
  std::string Text(const std::string& name) const {
    const int c = Column(*header_, name);
    return c < 0 ? "" : fields_[c];
  }
  // 0 when the column is absent or empty.
  double Number(const std::string& name) const {
    const std::string text = Text(name);
    return text.empty() ? 0.0 : std::strtod(text.c_str(), nullptr);
  }
  // `missing` when the column is absent or empty (columns older CSVs lack: unknown, not 0).
  double NumberOr(const std::string& name, double missing) const {
    return Text(name).empty() ? missing : Number(name);
  }

 private:
  const std::vector<std::string>* header_;
  std::vector<std::string> fields_;
};

// How a column is printed in the CSV.
enum class Format { kWord, kQuoted, kInt, kG6, kF4, kG };

// Which rows carry a column: every row, or only measured ones (a model row predicts a time, nothing else).
enum class Rows { kAll, kMeasured };

// Where a column goes in scaling.json's RunReport: nowhere, always, or only for train and replay runs.
enum class Json { kNone, kAlways, kOutsideGradient };

// A record's value in one column.
struct Value {
  double number = 0;
  std::string text;
};

using Getter = std::function<Value(const ScalingResult&, const RunRecord&)>;
using Reader = std::function<void(const CsvRow&, RunRecord*)>;

struct Column {
  const char* csv;   // the CSV header's name
  const char* json;  // RunReport's field name (with Json::kNone: "")
  Format format;
  Rows rows;
  Json in_json;
  Getter get;
  Reader read;       // empty: computed from the others (or constant), not read back
};

Value Num(double v) { return {v, ""}; }
Value Text(std::string t) { return {0, std::move(t)}; }

// The model's time for a row: a model row's own prediction; replay mode's model is of the whole step (compute
// and overlap), elsewhere of the exchange.
double ModelFor(const ScalingResult& result, const RunRecord& r) {
  if (r.source == "model") return r.exchange_s;
  return result.options.mode == "replay" ? ReplayModelSeconds(result, r.exchange, r.nodes, r.workload, r.bucket_mb)
                                         : RecordModelSeconds(result, r);
}

double ModelError(const ScalingResult& result, const RunRecord& r) {
  const double model = ModelFor(result, r);
  const double measured = result.options.mode == "replay" ? r.step_s : r.exchange_s;
  return model > 0 && measured > 0 ? (model - measured) / measured : 0;
}

// Every column, in the CSV's order; a new one goes at the end so older readers keep their columns.
const std::vector<Column>& Columns() {
  // Getters of plain members.
  auto number = [](auto member) {
    return [member](const ScalingResult&, const RunRecord& r) { return Num(static_cast<double>(r.*member)); };
  };
  auto text = [](auto member) { return [member](const ScalingResult&, const RunRecord& r) { return Text(r.*member); }; };
  // Readers of plain members (absent or empty: 0 or "").
  auto read_number = [](const char* name, auto member) {
    return [name, member](const CsvRow& row, RunRecord* r) {
      using T = std::remove_reference_t<decltype(r->*member)>;
      r->*member = static_cast<T>(row.Number(name));
    };
  };
  auto read_text = [](const char* name, auto member) {
    return [name, member](const CsvRow& row, RunRecord* r) { r->*member = row.Text(name); };
  };
  // Columns older CSVs lack, read as `missing` (unknown) when absent.
  auto read_or = [](const char* name, double RunRecord::*member, double missing) {
    return [name, member, missing](const CsvRow& row, RunRecord* r) { r->*member = row.NumberOr(name, missing); };
  };
  static const auto* const columns = new std::vector<Column>{
      {"source", "", Format::kWord, Rows::kAll, Json::kNone, text(&RunRecord::source), {}},
      {"mode",
       "",
       Format::kWord,
       Rows::kAll,
       Json::kNone,
       [](const ScalingResult& result, const RunRecord&) { return Text(result.options.mode); },
       {}},
      {"exchange",
       "exchange",
       Format::kWord,
       Rows::kAll,
       Json::kAlways,
       [](const ScalingResult&, const RunRecord& r) { return Text(ExchangeName(r.exchange)); },
       {}},
      {"nodes", "nodes", Format::kInt, Rows::kAll, Json::kAlways, number(&RunRecord::nodes),
       read_number("nodes", &RunRecord::nodes)},
      {"servers", "servers", Format::kInt, Rows::kAll, Json::kAlways, number(&RunRecord::servers),
       read_number("servers", &RunRecord::servers)},
      {"bytes", "bytes", Format::kInt, Rows::kAll, Json::kAlways, number(&RunRecord::bytes),
       read_number("bytes", &RunRecord::bytes)},
      {"steps", "steps", Format::kInt, Rows::kAll, Json::kAlways, number(&RunRecord::steps),
       read_number("steps", &RunRecord::steps)},
      {"step_s", "step_s", Format::kG6, Rows::kMeasured, Json::kAlways, number(&RunRecord::step_s),
       read_number("step_s", &RunRecord::step_s)},
      {"compute_s", "compute_s", Format::kG6, Rows::kMeasured, Json::kAlways, number(&RunRecord::compute_s),
       read_number("compute_s", &RunRecord::compute_s)},
      {"exchange_s", "exchange_s", Format::kG6, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::exchange_s), read_number("exchange_s", &RunRecord::exchange_s)},
      {"model_s",
       "model_s",
       Format::kG6,
       Rows::kAll,
       Json::kAlways,
       [](const ScalingResult& result, const RunRecord& r) { return Num(ModelFor(result, r)); },
       {}},
      {"model_rel_err",
       "",
       Format::kF4,
       Rows::kMeasured,
       Json::kNone,
       [](const ScalingResult& result, const RunRecord& r) { return Num(ModelError(result, r)); },
       {}},
      {"samples_per_s", "samples_per_s", Format::kG6, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::samples_per_s), read_number("samples_per_s", &RunRecord::samples_per_s)},
      {"algbw_Bps", "algbw_Bps", Format::kG6, Rows::kAll, Json::kAlways, number(&RunRecord::algbw),
       read_number("algbw_Bps", &RunRecord::algbw)},
      {"busbw_Bps", "busbw_Bps", Format::kG6, Rows::kAll, Json::kAlways, number(&RunRecord::busbw),
       read_number("busbw_Bps", &RunRecord::busbw)},
      {"link_bytes_per_step", "link_bytes_per_step", Format::kG6, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::link_bytes_per_step),
       read_number("link_bytes_per_step", &RunRecord::link_bytes_per_step)},
      {"sent_bytes_per_step", "bytes_sent_per_step", Format::kInt, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::bytes_sent_per_step),
       read_number("sent_bytes_per_step", &RunRecord::bytes_sent_per_step)},
      {"wrong", "wrong", Format::kInt, Rows::kMeasured, Json::kAlways, number(&RunRecord::wrong),
       read_number("wrong", &RunRecord::wrong)},
      {"test_accuracy", "test_accuracy", Format::kF4, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::test_accuracy), read_number("test_accuracy", &RunRecord::test_accuracy)},
      {"error", "error", Format::kQuoted, Rows::kMeasured, Json::kAlways, text(&RunRecord::error),
       read_text("error", &RunRecord::error)},
      {"workload", "workload", Format::kQuoted, Rows::kMeasured, Json::kOutsideGradient,
       text(&RunRecord::workload), read_text("workload", &RunRecord::workload)},
      {"bucket_mb", "bucket_mb", Format::kG, Rows::kMeasured, Json::kOutsideGradient,
       number(&RunRecord::bucket_mb), read_or("bucket_mb", &RunRecord::bucket_mb, -1)},
      {"buckets", "buckets", Format::kInt, Rows::kMeasured, Json::kOutsideGradient,
       number(&RunRecord::buckets), read_number("buckets", &RunRecord::buckets)},
      {"forward_s", "forward_s", Format::kG6, Rows::kMeasured, Json::kOutsideGradient,
       number(&RunRecord::forward_s), read_number("forward_s", &RunRecord::forward_s)},
      {"backward_s", "backward_s", Format::kG6, Rows::kMeasured, Json::kOutsideGradient,
       number(&RunRecord::backward_s), read_number("backward_s", &RunRecord::backward_s)},
      {"optimizer_s", "optimizer_s", Format::kG6, Rows::kMeasured, Json::kOutsideGradient,
       number(&RunRecord::optimizer_s), read_number("optimizer_s", &RunRecord::optimizer_s)},
      {"exposed_s", "exposed_s", Format::kG6, Rows::kMeasured, Json::kOutsideGradient,
       number(&RunRecord::exposed_s), read_number("exposed_s", &RunRecord::exposed_s)},
      {"timeline", "timeline", Format::kQuoted, Rows::kMeasured, Json::kOutsideGradient,
       text(&RunRecord::timeline), read_text("timeline", &RunRecord::timeline)},
      // Added with the saturation probes: older CSVs lack them (unknown, not bound).
      {"box_cpu", "box_cpu", Format::kF4, Rows::kMeasured, Json::kAlways, number(&RunRecord::box_cpu),
       read_or("box_cpu", &RunRecord::box_cpu, -1)},
      {"link_util", "link_util", Format::kF4, Rows::kMeasured, Json::kAlways, number(&RunRecord::link_util),
       read_or("link_util", &RunRecord::link_util, -1)},
      {"emulator_bound", "emulator_bound", Format::kInt, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::emulator_bound),
       [](const CsvRow& row, RunRecord* r) { r->emulator_bound = row.Number("emulator_bound") != 0; }},
      {"bound_reason", "bound_reason", Format::kQuoted, Rows::kMeasured, Json::kAlways,
       text(&RunRecord::bound_reason), read_text("bound_reason", &RunRecord::bound_reason)},
      {"cpu_stall", "cpu_stall", Format::kF4, Rows::kMeasured, Json::kAlways, number(&RunRecord::cpu_stall),
       read_or("cpu_stall", &RunRecord::cpu_stall, -1)},
      // Added with the per-host groups: older files lack it (unknown).
      {"host_stall", "host_stall", Format::kF4, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::host_stall), read_or("host_stall", &RunRecord::host_stall, -1)},
      // Added with the link queues' counters: older files lack them (unknown).
      {"link_packets", "link_packets", Format::kInt, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::link_packets), read_number("link_packets", &RunRecord::link_packets)},
      {"link_drops", "link_drops", Format::kInt, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::link_drops),
       [](const CsvRow& row,
          RunRecord* r) { r->link_drops = static_cast<int64_t>(row.NumberOr("link_drops", -1)); }},
      // Until issue 31 in scaling.json only.
      {"ok",
       "ok",
       Format::kInt,
       Rows::kMeasured,
       Json::kAlways,
       [](const ScalingResult&, const RunRecord& r) { return Num(r.ok() ? 1 : 0); },
       {}},
      {"wall_s", "wall_s", Format::kG6, Rows::kMeasured, Json::kAlways, number(&RunRecord::wall_s),
       read_number("wall_s", &RunRecord::wall_s)},
      {"step_spread", "step_spread", Format::kF4, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::step_spread), read_number("step_spread", &RunRecord::step_spread)},
      {"straggler_rank", "straggler_rank", Format::kInt, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::straggler_rank),
       [](const CsvRow& row,
          RunRecord* r) { r->straggler_rank = static_cast<int>(row.NumberOr("straggler_rank", -1)); }},
      {"straggler_share", "straggler_share", Format::kF4, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::straggler_share), read_number("straggler_share", &RunRecord::straggler_share)},
      {"straggler_lag_s", "straggler_lag_s", Format::kG6, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::straggler_lag_s), read_number("straggler_lag_s", &RunRecord::straggler_lag_s)},
      // Added with backup-worker pacing (issue 35): older files lack them (no backup workers, quorum
      // unknown).
      {"backup_workers", "backup_workers", Format::kInt, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::backup_workers), read_number("backup_workers", &RunRecord::backup_workers)},
      {"quorum_step_s", "quorum_step_s", Format::kG6, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::quorum_step_s), read_number("quorum_step_s", &RunRecord::quorum_step_s)},
      // Added with scaling --ps_chunks=bdp: older files lack it (the harness's chunk).
      {"ps_chunk_bytes", "ps_chunk_bytes", Format::kInt, Rows::kMeasured, Json::kAlways,
       number(&RunRecord::ps_chunk_bytes), read_number("ps_chunk_bytes", &RunRecord::ps_chunk_bytes)},
      // Added with --ps_chunks=capped: a chunk in an older file is bdp's, the only rule then.
      {"ps_chunk_rule", "ps_chunk_rule", Format::kWord, Rows::kMeasured, Json::kAlways,
       text(&RunRecord::ps_chunk_rule),
       [](const CsvRow& row, RunRecord* r) {
         r->ps_chunk_rule = row.Text("ps_chunk_rule");
         if (r->ps_chunk_rule.empty() && row.Number("ps_chunk_bytes") > 0) r->ps_chunk_rule = "bdp";
       }},
      // Added with --ps_chunks=capped too: older files lack them (the re-rendered report cannot tell).
      {"worker_args", "worker_args", Format::kQuoted, Rows::kMeasured, Json::kAlways,
       text(&RunRecord::worker_args), read_text("worker_args", &RunRecord::worker_args)},
      {"server_args", "server_args", Format::kQuoted, Rows::kMeasured, Json::kAlways,
       text(&RunRecord::server_args), read_text("server_args", &RunRecord::server_args)},
  };
  return *columns;
}

std::string CsvField(const Column& column, const Value& v) {
  switch (column.format) {
    case Format::kWord: return v.text;
    case Format::kQuoted: {
      // One line, no double quotes: the CSV's quoting stays simple.
      std::string line = v.text.substr(0, v.text.find('\n'));
      std::replace(line.begin(), line.end(), '"', '\'');
      return absl::StrCat("\"", line, "\"");
    }
    case Format::kInt: return absl::StrFormat("%d", static_cast<int64_t>(v.number));
    case Format::kG6: return absl::StrFormat("%.6g", v.number);
    case Format::kF4: return absl::StrFormat("%.4f", v.number);
    case Format::kG: return absl::StrFormat("%g", v.number);
  }
  return "";
}

// Splits one CSV line on commas outside double quotes.
std::vector<std::string> SplitCsvLine(absl::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

absl::StatusOr<RunRecord> RecordFromRow(const CsvRow& row) {
  RunRecord r;
  ASSIGN_OR_RETURN(r.exchange, ParseExchange(row.Text("exchange")));
  for (const Column& column : Columns()) {
    if (column.read) column.read(row, &r);
  }
  return r;
}

// JSON has no inf or nan: such a value stays unset and its key is absent (proto/bench_report.proto).
template <typename Message, typename Setter>
void SetFinite(Message* message, Setter setter, double value) {
  if (std::isfinite(value)) (message->*setter)(value);
}

// A run's RunReport: every column that goes to JSON, set by its field's name and type.
proto::RunReport RunMessage(const ScalingResult& result, const RunRecord& r) {
  proto::RunReport run;
  const google::protobuf::Descriptor* descriptor = run.GetDescriptor();
  const google::protobuf::Reflection* reflection = run.GetReflection();
  for (const Column& column : Columns()) {
    if (column.in_json == Json::kNone) continue;
    if (column.in_json == Json::kOutsideGradient && result.options.mode == "gradient") continue;
    const google::protobuf::FieldDescriptor* field = descriptor->FindFieldByName(column.json);
    if (field == nullptr) continue;  // a column's JSON name is RunReport's (record_io_test would catch a typo)
    const Value v = column.get(result, r);
    switch (field->cpp_type()) {
      case google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE:
        if (std::isfinite(v.number)) reflection->SetDouble(&run, field, v.number);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_INT32:
        reflection->SetInt32(&run, field, static_cast<int32_t>(v.number));
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_BOOL:
        reflection->SetBool(&run, field, v.number != 0);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_STRING:
        reflection->SetString(&run, field, v.text);
        break;
      default:
        break;
    }
  }
  return run;
}

proto::ScalingConfig ConfigMessage(const ScalingOptions& o) {
  proto::ScalingConfig config;
  config.set_mode(o.mode);
  for (int n : o.nodes) config.add_nodes(n);
  for (size_t bytes : o.model_bytes) config.add_model_bytes(bytes);
  config.set_steps(o.steps);
  config.set_warmup_steps(o.warmup_steps);
  config.set_ps_servers(o.ps_servers);
  config.set_ps_mode(o.ps_mode);
  config.set_link(o.cluster.link);
  config.set_latency(o.cluster.latency);
  config.set_queue(o.cluster.queue);
  SetFinite(&config, &proto::ScalingConfig::set_compute_ms, o.compute_ms);
  for (const std::string& w : o.workloads) config.add_workloads(w);
  for (double mb : o.bucket_mbs) config.add_bucket_mbs(mb);
  config.set_bytes_scale(o.bytes_scale);
  config.set_first_bucket_mb(o.first_bucket_mb);
  if (o.projection.link_bytes_per_second > 0) {
    config.set_project_link_bytes_per_second(o.projection.link_bytes_per_second);
    config.set_project_latency_s(o.projection.latency_s);
    if (o.projection.port_buffer_bytes > 0)
      config.set_project_port_buffer_bytes(o.projection.port_buffer_bytes);
  }
  return config;
}

proto::ClusterInfo ClusterMessage(const ScalingResult& result) {
  proto::ClusterInfo cluster;
  cluster.set_emulated(result.emulated);
  cluster.set_fallback_reason(result.fallback_reason);
  SetFinite(&cluster, &proto::ClusterInfo::set_link_bytes_per_second, result.link_bytes_per_second);
  SetFinite(&cluster, &proto::ClusterInfo::set_stream_bytes_per_second, result.stream_bytes_per_second);
  SetFinite(&cluster, &proto::ClusterInfo::set_latency_s, result.latency_s);
  cluster.set_latency_method(result.latency_method);
  SetFinite(&cluster, &proto::ClusterInfo::set_rtt_s, result.rtt_s);
  if (!result.hosts_description.empty()) cluster.set_hosts(result.hosts_description);
  if (!result.link_matrix.empty()) cluster.set_link_matrix(result.link_matrix);
  return cluster;
}

}  // namespace

std::vector<std::string> CsvColumnNames() {
  std::vector<std::string> names;
  for (const Column& column : Columns()) names.push_back(column.csv);
  return names;
}

std::vector<std::string> JsonRunFields() {
  std::vector<std::string> names;
  for (const Column& column : Columns()) {
    if (column.in_json != Json::kNone) names.push_back(column.json);
  }
  return names;
}

std::string ToCsv(const ScalingResult& result) {
  std::ostringstream csv;
  csv << absl::StrJoin(CsvColumnNames(), ",") << "\n";
  std::vector<RunRecord> rows = result.records;
  const std::vector<RunRecord> predicted = PredictedRecords(result);
  rows.insert(rows.end(), predicted.begin(), predicted.end());
  for (const RunRecord& r : rows) {
    std::vector<std::string> fields;
    for (const Column& column : Columns()) {
      const bool empty = column.rows == Rows::kMeasured && r.source != "measured";
      fields.push_back(empty ? "" : CsvField(column, column.get(result, r)));
    }
    csv << absl::StrJoin(fields, ",") << "\n";
  }
  return csv.str();
}

absl::StatusOr<std::vector<RunRecord>> RecordsFromCsv(const std::string& csv) {
  std::vector<absl::string_view> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  if (lines.empty()) return absl::InvalidArgumentError("empty CSV: pass a scaling.csv written by a run");
  const std::vector<std::string> header = SplitCsvLine(lines[0]);
  for (const char* required : {"source", "exchange", "nodes", "servers", "bytes", "step_s", "exchange_s"}) {
    if (CsvRow::Column(header, required) < 0) {
      return absl::InvalidArgumentError(absl::StrCat("CSV has no column '", required, "': not a scaling.csv"));
    }
  }
  std::vector<RunRecord> records;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> fields = SplitCsvLine(lines[i]);
    if (fields.size() != header.size()) {
      return absl::InvalidArgumentError(absl::StrCat("CSV line ", i + 1, " has ", fields.size(), " fields, not ",
                                                     header.size()));
    }
    const CsvRow row(&header, std::move(fields));
    if (row.Text("source") != "measured") continue;  // the model's rows are recomputed
    ASSIGN_OR_RETURN(RunRecord record, RecordFromRow(row));
    records.push_back(std::move(record));
  }
  return records;
}

absl::StatusOr<std::string> ToJson(const ScalingResult& result) {
  proto::ScalingReport report;
  *report.mutable_config() = ConfigMessage(result.options);
  *report.mutable_cluster() = ClusterMessage(result);
  if (result.model.has_value()) report.set_model_source(ModelSource(result));
  for (const RunRecord& r : result.records) *report.add_runs() = RunMessage(result, r);
  for (const ModelPoint& m : Extrapolation(result)) {
    proto::ModelPoint* point = report.add_model();
    point->set_exchange(ExchangeName(m.exchange));
    point->set_nodes(m.nodes);
    point->set_bytes(m.bytes);
    SetFinite(point, &proto::ModelPoint::set_seconds, m.seconds);
  }
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(report, &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cannot print scaling.json: ", status.ToString(),
                                            "; the CSV holds the same runs"));
  }
  return json;
}

absl::Status WriteOutputs(const ScalingResult& result, const std::string& dir, std::vector<std::string>* written) {
  RETURN_IF_ERROR(MakeDirectories(dir));
  const std::vector<size_t> sizes = Sizes(result);
  ASSIGN_OR_RETURN(std::string json, ToJson(result));
  std::vector<std::pair<std::string, std::string>> files = {{"scaling.csv", ToCsv(result)},
                                                            {"scaling.json", std::move(json)}};
  if (result.options.mode == "replay") {
    ASSIGN_OR_RETURN(auto figures, ReplayFigures(result));
    files.insert(files.end(), figures.begin(), figures.end());
  } else if (!sizes.empty()) {
    files.push_back({"scaling.svg", RenderSvg(MakeFigure(result, sizes.back()))});
  }
  for (const auto& [name, content] : files) {
    const std::string file = absl::StrCat(dir, "/", name);
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", file, ": ", std::strerror(errno)));
    written->push_back(file);
  }
  return absl::OkStatus();
}

}  // namespace psring::bench
